/**
 * Which database failures mean "unavailable, try again" (503) rather than a
 * bug (500). SQLSTATEs by class, with the reason for each.
 */

const UNAVAILABLE_SQLSTATES: Record<string, string> = {
  '08000': 'connection_exception',
  '08003': 'connection_does_not_exist',
  '08006': 'connection_failure',
  '08001': 'sqlclient_unable_to_establish_sqlconnection',
  '08004': 'sqlserver_rejected_establishment_of_sqlconnection',
  // The server refuses the service's login. Each is configuration an operator
  // fixes on the database side; until then every request fails alike, and the
  // clients' requests were not at fault: "unavailable, retry later", not a bug.
  '28000': 'invalid_authorization_specification: the role may not log in (NOLOGIN, pg_hba)',
  '28P01': 'invalid_password: the service credentials were refused',
  '3D000': 'invalid_catalog_name: the database does not exist (yet, or any more)',
  '57P04': 'database_dropped',
  '53000': 'insufficient_resources',
  '53100': 'disk_full',
  '53200': 'out_of_memory',
  '53300': 'too_many_connections: max_connections, or the role or database CONNECTION LIMIT',
  '57014': 'query_canceled: statement_timeout fired under load',
  '57P01': 'admin_shutdown: the server is restarting',
  '57P02': 'crash_shutdown',
  '57P03': 'cannot_connect_now: the server is starting up',
  '55P03': 'lock_not_available: lock_timeout fired',
  '40001': 'serialization_failure: safe to re-run (CockroachDB, SERIALIZABLE)',
  '40P01': 'deadlock_detected: one side was rolled back, safe to re-run',
  '25P03': 'idle_in_transaction_session_timeout',
};

/** Node-level failures of a connection (the server went away or never answered). */
const TRANSPORT_ERRNOS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
]);

const TRANSPORT_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Query read timeout',
  'Client has encountered a connection error',
  'Connection ended unexpectedly',
  'terminating connection',
  'Client was closed',
];

/** drizzle wraps driver errors; the driver's error is the `cause`. */
function* chain(err: unknown): Generator<Record<string, unknown>> {
  let e: unknown = err;
  for (let i = 0; i < 5 && e && typeof e === 'object'; i++) {
    yield e as Record<string, unknown>;
    e = (e as { cause?: unknown }).cause;
  }
}

export function isUnavailable(err: unknown): boolean {
  for (const e of chain(err)) {
    const code = typeof e.code === 'string' ? e.code : undefined;
    if (code && (code in UNAVAILABLE_SQLSTATES || TRANSPORT_ERRNOS.has(code))) return true;
    const msg = typeof e.message === 'string' ? e.message : '';
    if (TRANSPORT_MESSAGES.some((m) => msg.includes(m))) return true;
  }
  return false;
}

/**
 * Failures after which the same statement may simply run again: the database
 * rolled it back whole. Our statements are single and atomic, so re-running
 * is always safe (docs/concepts.md, scale-out rule 9).
 */
const RERUNNABLE = new Set(['40001', '40P01']);

export function isRerunnable(err: unknown): boolean {
  for (const e of chain(err)) {
    if (typeof e.code === 'string' && RERUNNABLE.has(e.code)) return true;
  }
  return false;
}

/** A SQLSTATE (five digits or capitals), as opposed to a Node errno such as ECONNRESET. */
const SQLSTATE = /^[0-9A-Z]{5}$/;

/**
 * What of an error may be logged. drizzle's message carries the SQL and every
 * parameter (lease ids, request and result bodies), and a driver's message,
 * detail and hint can quote the value it refused (`invalid input syntax for
 * type uuid: "..."`), so a database error is logged by its SQLSTATE and the
 * names of its constraint, table, column and routine only. Other errors (a
 * transport failure, a bug) keep their innermost message.
 */
export function loggableError(err: unknown): Record<string, unknown> {
  const links = [...chain(err)];
  const top = links[0];
  if (!top) return { message: typeof err === 'string' ? '(a thrown string)' : typeof err };
  const inner = links[links.length - 1]!;
  const stack =
    typeof top.stack === 'string' ? top.stack.slice(Math.max(0, top.stack.indexOf('\n    at '))) : undefined;
  const type = typeof top.name === 'string' ? top.name : 'Error';
  const db = links.find((e) => typeof e.code === 'string' && SQLSTATE.test(e.code));
  if (db) {
    const code = db.code as string;
    const names: Record<string, unknown> = {};
    for (const k of ['constraint', 'table', 'column', 'routine', 'severity'] as const) {
      if (typeof db[k] === 'string') names[k] = db[k];
    }
    const why = UNAVAILABLE_SQLSTATES[code];
    return { type, code, message: `SQLSTATE ${code}${why ? ` (${why})` : ''}`, ...names, stack };
  }
  return {
    type,
    message: typeof inner.message === 'string' ? inner.message : undefined,
    code: typeof inner.code === 'string' ? inner.code : undefined,
    stack,
  };
}
