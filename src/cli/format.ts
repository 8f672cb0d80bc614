/** How the operator CLI writes values a person reads and pastes back. */
import type { Operation } from '../contract/index.js';

/** Characters a POSIX shell passes through unquoted. */
const SHELL_SAFE = /^[A-Za-z0-9_@%+=:,./-]+$/;

/**
 * `value` as one shell word: as it is when that is safe, else in single
 * quotes. A fingerprint is any printable ASCII (spaces, quotes, `$`), and
 * what `ops show` prints must paste into `--fingerprint` unchanged.
 */
export function shellWord(value: string): string {
  if (SHELL_SAFE.test(value)) return value;
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/** A compact age: `42s`, `7m3s`, `5h12m`, `3d4h`. */
export function age(fromIso: string, now = Date.now()): string {
  const s = Math.max(0, Math.floor((now - Date.parse(fromIso)) / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${s % 60}s`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h}h${m % 60}m`;
  return `${Math.floor(h / 24)}d${h % 24}h`;
}

/** One row of `ops list`: what a person needs to pick the call to look at. */
export function listRow(op: Operation, now = Date.now()): Record<string, unknown> {
  const m = (op.metadata ?? {}) as Record<string, unknown>;
  return {
    scope: op.scope,
    key: op.key,
    status: op.status,
    effect: op.effect,
    attempt: op.attempt,
    tool: typeof m.tool === 'string' ? m.tool : undefined,
    age: age(op.createdAt, now),
    // What the tool said it will do (the executor records it); the request when there is none.
    preview: m.preview ?? op.request ?? undefined,
  };
}

export const LIST_COLUMNS = ['scope', 'key', 'status', 'effect', 'attempt', 'tool', 'age', 'preview'];

/** The command that approves exactly what was shown, ready to paste. */
export function approveCommand(op: Operation): string {
  return `idem ops approve ${shellWord(op.scope)} ${shellWord(op.key)} --fingerprint ${shellWord(op.fingerprint)}`;
}
