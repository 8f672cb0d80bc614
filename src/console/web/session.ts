/**
 * The signed-in key lives in this tab's sessionStorage only: never in a URL,
 * a cookie or a log. Closing the tab forgets it.
 */

const KEY = 'idem.console.apiKey';
const ROLE = 'idem.console.role';
const REFRESH = 'idem.console.autoRefresh';

export type Role = 'operator' | 'client';

export interface Session {
  apiKey: string;
  role: Role;
}

export function loadSession(): Session | null {
  const apiKey = sessionStorage.getItem(KEY);
  const role = sessionStorage.getItem(ROLE);
  if (!apiKey || (role !== 'operator' && role !== 'client')) return null;
  return { apiKey, role };
}

export function saveSession(s: Session): void {
  sessionStorage.setItem(KEY, s.apiKey);
  sessionStorage.setItem(ROLE, s.role);
}

export function clearSession(): void {
  sessionStorage.removeItem(KEY);
  sessionStorage.removeItem(ROLE);
}

export function autoRefresh(): boolean {
  return sessionStorage.getItem(REFRESH) !== 'off';
}

export function setAutoRefresh(on: boolean): void {
  sessionStorage.setItem(REFRESH, on ? 'on' : 'off');
}
