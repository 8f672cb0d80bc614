/** What every view gets, and what it gives back to the shell. */
import type { Api } from '../api.js';
import type { Role } from '../session.js';

export interface Ctx {
  api: Api;
  role: Role;
  /** Goes to another view (a `#/...` location). */
  go(hash: string): void;
}

export interface View {
  el: HTMLElement;
  /** Called by auto-refresh; a view that must not be refreshed under the operator's hands omits it. */
  refresh?(): Promise<void>;
  /** Stops the view's own timers when it is left. */
  dispose?(): void;
}

/** The location of an operation's page. */
export const opHash = (scope: string, key: string) =>
  `#/op/${encodeURIComponent(scope)}/${encodeURIComponent(key)}`;
