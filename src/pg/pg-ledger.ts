/**
 * `PgLedger`: the ledger as a library inside a downstream service's own
 * Postgres transaction (docs/downstream.md, section 2). `once()` registers the
 * operation, runs the service's writes and stores the result in ONE
 * transaction on one connection, so "the note is saved" and "this key is
 * done" commit or roll back together.
 *
 * It runs the ledger's own code (`ledger/begin.ts`, `ledger/holder.ts`) on a
 * `Database` bound to the transaction's connection: one code path with the
 * service, and its rows are ordinary operations and events.
 *
 *   BEGIN ─▶ begin (INSERT ... ON CONFLICT) ─┬─ acquired ─▶ fn(tx) ─▶ complete ─▶ COMMIT  (executed)
 *                                            ├─ replayed ─▶ COMMIT                        (replayed)
 *                                            └─ refused (KEY_REUSED, IN_PROGRESS, UNKNOWN) ─▶ ROLLBACK, throw
 *   any throw before COMMIT ─▶ ROLLBACK: nothing of it remains; the next attempt runs cleanly.
 *
 * A concurrent duplicate's INSERT waits on the unique key until the first
 * transaction ends; begin then reads again with a fresh snapshot (READ
 * COMMITTED: every statement gets one) and replays, or claims the key if
 * the first rolled back.
 */
import type { PGlite } from '@electric-sql/pglite';
import type pg from 'pg';
import { loadConfig } from '../config.js';
import type { BeginBody, Effect, Operation } from '../contract/index.js';
import { clientDatabase, pgliteTxDatabase } from '../db/client-database.js';
import { type Database, rerunning, withReruns } from '../db/database.js';
import { migrateDatabase, migrateOnClient } from '../db/migrate.js';
import { pgliteStatements } from '../db/pglite-statements.js';
import type { Claim, ClaimInput, ClaimOutcome, DownstreamLedger, TxClient } from '../downstream/ledger.js';
import { IdemError } from '../errors.js';
import { type BeginReply, begin } from '../ledger/begin.js';
import { complete, heartbeat, markUnknown, release } from '../ledger/holder.js';
import { getByKey } from '../ledger/read.js';
import { filledABatch, LeaseScanFloor, type SweepResult, sweepOnce } from '../ledger/sweeper.js';
import { type TendResult, tendYoungTables } from '../ledger/young-tables.js';
import { type OpenTransaction, openPg, openPglite } from './transaction.js';

/** Options of a {@link PgLedger}: a node-postgres pool, or a PGlite instance (embedded engine). */
export interface PgLedgerOptions {
  pool?: pg.Pool;
  pglite?: PGlite;
  /** Recorded as the actor of events and the lease owner. Default `pg-ledger`. */
  actor?: string;
  /** Send the ledger's hot-path statements as named prepared statements. Default true. */
  prepared?: boolean;
}

/** What `once` registers: `request` (fingerprinted with RFC 8785 and stored) or a `fingerprint`. */
export interface OnceInput {
  scope: string;
  key: string;
  request?: unknown;
  fingerprint?: string;
  /** Default `non_idempotent_write`: inside the transaction it runs at most once anyway. */
  effect?: Effect;
  metadata?: Record<string, unknown>;
}

/** What `once` came to. `result` is the stored JSON, the same for both outcomes. */
export interface OnceResult<T> {
  outcome: 'executed' | 'replayed';
  result: T;
  operation: Operation;
}

/**
 * What one `sweep()` did: the lapses and purges it wrote, the tables it
 * analyzed, and whether a batch filled (`more`: call again soon).
 */
export type PgLedgerSweep = SweepResult & TendResult & { more: boolean };

/** The service's sweeper settings (batches of 500), for `sweep()`. */
const SWEEP = loadConfig({}).sweep;

/** Seconds a caller waits before asking again about an operation waiting for approval. */
const PENDING_RETRY_AFTER_S = 5;

/** The in-transaction ledger. Also a `ledger` for `idem/fastify` and `idem/express`. */
export class PgLedger implements DownstreamLedger {
  readonly #pool: pg.Pool | undefined;
  readonly #pglite: PGlite | undefined;
  readonly #actor: string;
  readonly #prepared: boolean;
  /** Autocommit statements, for claims outside a transaction. */
  readonly #db: Database;
  readonly #floor = new LeaseScanFloor();

  constructor(options: PgLedgerOptions) {
    if (!options.pool === !options.pglite) throw new Error('PgLedger needs exactly one of pool and pglite');
    this.#pool = options.pool;
    this.#pglite = options.pglite;
    this.#actor = options.actor ?? 'pg-ledger';
    this.#prepared = options.prepared ?? true;
    this.#db = this.#pool
      ? withReruns(clientDatabase(this.#pool, { prepared: this.#prepared }))
      : pgliteTxDatabase(
          this.#pglite as PGlite,
          this.#prepared ? pgliteStatements(this.#pglite as PGlite) : undefined,
        );
  }

  /** Applies Idem's migrations (serialised with the service's by the same advisory lock). */
  async migrate(): Promise<void> {
    if (!this.#pool) return migrateDatabase(this.#db);
    const client = await this.#pool.connect();
    try {
      await migrateOnClient(client);
    } finally {
      client.release();
    }
  }

  /**
   * One pass of the service's sweeper, for a database no Idem service sweeps
   * (each replica of the service sweeps on its own): writes the lapses that
   * are due (reads apply them anyway), purges operations past their
   * retention, and analyzes a young ledger that has grown, so that no pooled
   * connection keeps plans made while the ledger was nearly empty
   * (`ledger/young-tables.ts`). Call it on a timer (the service's is a
   * second); safe from many processes at once. A pass writes at most 2,000
   * lapses and purges 2,000 operations; `more` says to call again soon.
   */
  async sweep(): Promise<PgLedgerSweep> {
    const swept = await sweepOnce(this.#db, SWEEP, 'sweeper', this.#floor);
    const tended = await tendYoungTables(this.#db);
    return { ...swept, ...tended, more: filledABatch(swept, SWEEP) };
  }

  /**
   * Runs `fn` at most once per `(scope, key)`, committed together with the
   * stored result. A throw (from `fn` or the database) means nothing was
   * committed and the operation does not exist: the next call runs cleanly.
   * `fn` may run again after a serialization failure or deadlock, but only
   * after its previous transaction was rolled back whole.
   */
  async once<T>(input: OnceInput, fn: (tx: TxClient) => Promise<T>): Promise<OnceResult<T>> {
    return rerunning(async () => {
      const t = await this.#open();
      try {
        const begun = await this.#begin(t.db, input);
        const op = begun.body.operation;
        if (begun.body.outcome === 'replayed') {
          await t.commit(); // begin may have recorded a lapse
          return { outcome: 'replayed', result: op.result as T, operation: op };
        }
        const leaseId = begun.body.lease!.id;
        const value = await fn(t.tx);
        const done = await complete(
          t.db,
          this.#target(input, leaseId, { status: 'succeeded', result: value }),
        );
        await t.commit();
        return { outcome: 'executed', result: done.operation.result as T, operation: done.operation };
      } catch (err) {
        await t.rollback();
        throw err;
      }
    });
  }

  /** The operation as the ledger shows it, or undefined. */
  async get(scope: string, key: string): Promise<Operation | undefined> {
    return getByKey(this.#db, scope, key);
  }

  /** For the middleware: a lease, held in a transaction when `input.transactional`. */
  async claim(input: ClaimInput): Promise<ClaimOutcome> {
    if (!input.transactional) return this.#claimPlain(input);
    return rerunning(async () => {
      const t = await this.#open();
      try {
        const begun = await this.#begin(t.db, input);
        if (begun.body.outcome === 'replayed') {
          await t.commit();
          return { kind: 'replayed', operation: begun.body.operation };
        }
        return { kind: 'acquired', claim: this.#txClaim(t, input, begun) };
      } catch (err) {
        await t.rollback();
        throw err;
      }
    });
  }

  async #claimPlain(input: ClaimInput): Promise<ClaimOutcome> {
    const begun = await this.#begin(this.#db, input);
    if (begun.body.outcome === 'replayed') return { kind: 'replayed', operation: begun.body.operation };
    const op = begun.body.operation;
    const target = this.#target(input, begun.body.lease!.id);
    const claim: Claim = {
      operationId: op.id,
      attempt: op.attempt,
      recovered: begun.body.recovered === true,
      heartbeat: async (leaseMs) => void (await heartbeat(this.#db, { ...target, leaseMs })),
      complete: async (status, result) => void (await complete(this.#db, { ...target, status, result })),
      release: async () => void (await release(this.#db, target)),
      unknown: async () => void (await markUnknown(this.#db, target)),
    };
    return { kind: 'acquired', claim };
  }

  #txClaim(t: OpenTransaction, input: ClaimInput, begun: BeginReply): Claim {
    const op = begun.body.operation;
    const target = this.#target(input, begun.body.lease!.id);
    return {
      operationId: op.id,
      attempt: op.attempt,
      recovered: begun.body.recovered === true,
      tx: t.tx,
      // The row is this transaction's own, locked until it ends: no one else can take the lease.
      heartbeat: async () => {},
      complete: async (status, result) => {
        try {
          await complete(t.db, { ...target, status, result });
          await t.commit();
        } catch (err) {
          await t.rollback();
          throw err;
        }
      },
      // Both undo the handler's writes with the operation: it did not happen.
      release: () => t.rollback(),
      unknown: () => t.rollback(),
    };
  }

  async #begin(db: Database, input: OnceInput | ClaimInput): Promise<BeginReply> {
    const body: BeginBody = {
      key: input.key,
      effect: input.effect ?? 'non_idempotent_write',
      dispatch: true,
      owner: (input as ClaimInput).owner ?? this.#actor,
      ...((input as ClaimInput).leaseMs ? { leaseMs: (input as ClaimInput).leaseMs } : {}),
      ...(input.metadata ? { metadata: input.metadata } : {}),
      ...('request' in input && input.request !== undefined
        ? { request: input.request }
        : { fingerprint: input.fingerprint as string }),
    };
    const begun = await begin(db, input.scope, body, this.#actor);
    if (begun.body.outcome === 'pending_approval') {
      throw new IdemError('OPERATION_IN_PROGRESS', 'this operation waits for an approval', {
        operation: begun.body.operation,
        retryAfter: begun.retryAfter ?? PENDING_RETRY_AFTER_S,
      });
    }
    return begun;
  }

  #target<X extends object>(input: { scope: string; key: string }, leaseId: string, extra?: X) {
    return { scope: input.scope, key: input.key, leaseId, actor: this.#actor, ...(extra as X) };
  }

  #open(): Promise<OpenTransaction> {
    return this.#pool
      ? openPg(this.#pool, this.#prepared)
      : openPglite(this.#pglite as PGlite, this.#prepared);
  }
}
