/**
 * Bringing the database up at start. A service that starts before its
 * database (a compose file, a rolling restart, an outage) must not die: it
 * listens, answers `/readyz` 503, and keeps trying with backoff, one log line
 * per attempt, until the database answers; then it migrates and serves.
 */
import { sql } from 'drizzle-orm';
import { CITUS_INSTALLED } from './citus.js';
import type { Database } from './database.js';
import { isUnavailable } from './errors.js';
import { migrateDatabase } from './migrate.js';

/** The log the wait reports to (pino's shape). */
export interface StartupLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface StartupOptions {
  migrate: boolean;
  databaseUrl: string | undefined;
  /** Stops the wait (shutdown during start). */
  signal: AbortSignal;
  /** Said with "database opened" (the embedded engine's folder). */
  where?: Record<string, unknown>;
  /** First pause between attempts; doubles up to `maxDelayMs`. */
  firstDelayMs?: number;
  maxDelayMs?: number;
}

/** The one line a failed attempt is logged as: the driver's code and message, never a stack. */
export function describeFailure(err: unknown): { code?: string; reason: string } {
  let e: unknown = err;
  // drizzle wraps the driver's error: the innermost one says what happened.
  for (let i = 0; i < 5 && e && typeof e === 'object' && 'cause' in e && e.cause; i++) e = e.cause;
  const inner = (e ?? err) as { code?: unknown; message?: unknown; errors?: { message?: unknown }[] };
  // A refused connection to "localhost" is an AggregateError of one per address, with no message.
  const message =
    typeof inner.message === 'string' && inner.message
      ? inner.message
      : typeof inner.errors?.[0]?.message === 'string'
        ? inner.errors[0].message
        : String(inner.code ?? 'unknown error');
  return { ...(typeof inner.code === 'string' ? { code: inner.code } : {}), reason: message.split('\n')[0]! };
}

/**
 * Turns coalescing on once the database answers, unless it is Citus: a
 * multi-row statement names its scopes in arrays, so Citus cannot route it
 * to one shard; there every statement runs alone.
 */
export async function enableCoalescing(db: Database): Promise<void> {
  if (!db.coalesce) return;
  const citus = await db.rows(sql.raw(CITUS_INSTALLED));
  db.coalesce.enabled = citus.length === 0;
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(t);
      resolve();
    });
  });

/**
 * Waits until the database answers, then applies the migrations (or, with
 * `migrate: false`, only checks it answers). Resolves `true` once done,
 * `false` if stopped first; rejects on a failure that waiting cannot fix
 * (a failing migration, a refused password), after saying so in one line.
 */
export async function awaitDatabase(db: Database, log: StartupLog, o: StartupOptions): Promise<boolean> {
  const first = o.firstDelayMs ?? 250;
  const max = o.maxDelayMs ?? 10_000;
  for (let attempt = 1; !o.signal.aborted; attempt++) {
    try {
      await db.rows(sql`SELECT 1`);
      log.info({ engine: db.kind, ...o.where }, 'database opened');
      await enableCoalescing(db);
      if (o.migrate) {
        await migrateDatabase(db, o.databaseUrl);
        log.info({}, 'migrations applied');
      }
      return true;
    } catch (err) {
      if (!isUnavailable(err)) throw err;
      // Full jitter: replicas restarted together do not knock in step.
      const delayMs = Math.round(Math.min(max, first * 2 ** (attempt - 1)) * (0.5 + Math.random() / 2));
      const { code, reason } = describeFailure(err);
      log.warn(
        { attempt, retryInMs: delayMs, ...(code ? { code } : {}) },
        `waiting for the database (${reason}); next try in ${delayMs} ms`,
      );
      await sleep(delayMs, o.signal);
    }
  }
  return false;
}
