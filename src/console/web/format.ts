/** How times, ages and JSON read in the console. */

let skewMs = 0;

/** The service's clock minus ours (from the `Date` header), so ages read by the service's clock. */
export function setServerSkew(ms: number): void {
  skewMs = Math.abs(ms) > 2000 ? ms : 0;
}

/** Now, by the service's clock as far as we can tell. */
export function now(): number {
  return Date.now() + skewMs;
}

/** A duration as a person reads it: "40 s", "12 min", "3 h", "2 d". */
export function duration(ms: number): string {
  const sec = Math.max(0, Math.round(ms / 1000));
  if (sec < 60) return `${sec} s`;
  const min = Math.floor(sec / 60);
  if (min < 60) return `${min} min`;
  const hours = Math.floor(min / 60);
  if (hours < 48) return `${hours} h`;
  return `${Math.floor(hours / 24)} d`;
}

/** Age of a timestamp: "12 min". */
export function age(iso: string | null | undefined): string {
  return iso ? duration(now() - Date.parse(iso)) : '—';
}

/** A deadline relative to now: "in 40 s" or "3 min ago". */
export function relative(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = Date.parse(iso) - now();
  return d >= 0 ? `in ${duration(d)}` : `${duration(-d)} ago`;
}

/** A timestamp in UTC, to the second: "2026-12-01 09:12:03 UTC". */
export function when(iso: string | null | undefined): string {
  if (!iso) return '—';
  return `${new Date(iso).toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** JSON for a `<pre>`: indented; null reads as "null". */
export function json(value: unknown): string {
  return JSON.stringify(value, null, 2) ?? 'null';
}

/** A metadata value as one line of text. */
export function text(value: unknown): string {
  if (value === null || value === undefined) return '';
  return typeof value === 'string' ? value : JSON.stringify(value);
}
