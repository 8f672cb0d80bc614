/**
 * Shared helpers of the client tests: the real ledger service over real HTTP,
 * a logger that keeps its lines, and a downstream that counts effects.
 */
import { Writable } from 'node:stream';
import { type Logger, pino } from 'pino';
import { afterAll, beforeAll } from 'vitest';
import {
  LedgerClient,
  type LedgerClientOptions,
  type ToolDefinition,
  ToolExecutor,
  type ToolExecutorOptions,
} from '../../src/client/index.js';
import type { Database } from '../../src/db/database.js';
import { createTestDatabase } from '../support/db.js';
import { onPostgres } from '../support/engine.js';
import { type RunningService, startService } from '../support/service.js';

/**
 * Room for a file's setup (a database cloned from the template, a service
 * started): generous, because test files run in parallel on a small machine.
 */
export const SETUP_TIMEOUT_MS = 180_000;

/** The real ledger, listening on loopback, and a validating client for it. */
export interface Ledger {
  url: string;
  ledger: LedgerClient;
  /** The service's database, for time travel (`expireLease`). */
  db: Database;
  /** Another client, e.g. with a fault-injecting fetch. */
  client(options?: Partial<LedgerClientOptions>): LedgerClient;
  close(): Promise<void>;
}

/** Starts the real service on a fresh database. */
export async function startLedger(): Promise<Ledger> {
  const service = await startService();
  const client = (options: Partial<LedgerClientOptions> = {}) =>
    new LedgerClient({ baseUrl: service.url, validateResponses: true, ...options });
  return { url: service.url, ledger: client(), client, db: service.db, close: () => service.close() };
}

/**
 * The real ledger for one test file: started before its tests, closed after.
 * The answer stands for it from the first test on (reading it earlier throws).
 */
export function useLedger(): Ledger {
  let started: Ledger | undefined;
  beforeAll(async () => {
    started = await startLedger();
  }, SETUP_TIMEOUT_MS);
  afterAll(() => started?.close());
  const get = (): Ledger => {
    if (!started) throw new Error('the ledger starts in beforeAll: use it inside a test');
    return started;
  };
  return {
    get url() {
      return get().url;
    },
    get ledger() {
      return get().ledger;
    },
    get db() {
      return get().db;
    },
    client: (options) => get().client(options),
    close: () => get().close(),
  };
}

/**
 * An executor on the test ledger, in scope `agents` unless told otherwise:
 * its log lines are kept, its sleeps are instant and recorded, its jitter is
 * pinned at the middle. `options` override any of that.
 */
export function testExecutor(
  L: Ledger,
  tools: ToolDefinition[],
  options: Partial<ToolExecutorOptions> = {},
): { ex: ToolExecutor; lines: Record<string, unknown>[]; delays: number[] } {
  const { logger, lines } = memoryLogger();
  const { sleep, delays } = recordingSleep();
  const ex = new ToolExecutor({
    ledger: L.ledger,
    scope: 'agents',
    tools,
    logger,
    sleep,
    random: () => 0.5,
    ...options,
  });
  return { ex, lines, delays };
}

/** A ledger whose service can be stopped and started again on the same database. */
export interface RestartableLedger {
  /** False on the embedded engine: one process, so no restart. */
  readonly canRestart: boolean;
  url(): string;
  /** Stops the service and starts a new one on the same database (a new port). */
  restart(): Promise<void>;
  close(): Promise<void>;
}

/** Starts the real service on a database it keeps across restarts (Postgres only for restarts). */
export async function startRestartableLedger(): Promise<RestartableLedger> {
  if (!onPostgres()) {
    const only = await startService();
    return {
      canRestart: false,
      url: () => only.url,
      restart: () =>
        Promise.reject(new Error('the embedded engine cannot be restarted under a live process')),
      close: () => only.close(),
    };
  }
  const testDb = await createTestDatabase();
  let current: RunningService = await startService({ testDb });
  return {
    canRestart: true,
    url: () => current.url,
    restart: async () => {
      await current.close();
      current = await startService({ testDb });
    },
    close: async () => {
      await current.close();
      await testDb.drop();
    },
  };
}

/** A pino logger whose lines are kept as parsed objects. */
export function memoryLogger(): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n')) if (line.trim()) lines.push(JSON.parse(line));
      done();
    },
  });
  return { logger: pino({ level: 'debug' }, stream), lines };
}

/** Instant sleeps that remember what was asked. */
export function recordingSleep(): {
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  delays: number[];
} {
  const delays: number[] = [];
  return {
    delays,
    sleep: async (ms, signal) => {
      if (signal?.aborted) throw signal.reason;
      delays.push(ms);
    },
  };
}

/** A unique id per test, so keys never collide across tests sharing a service. */
let counter = 0;
export function uid(prefix = 's'): string {
  counter++;
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${counter}`;
}

/** Polls `check` until it holds (real time, bounded). */
export async function eventually(check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 25));
  }
}
