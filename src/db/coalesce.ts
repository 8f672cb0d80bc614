/**
 * Coalescing: executions of one hot-path statement that arrive while enough
 * of them are already in flight are folded into one multi-row statement, so
 * they share one round trip, one transaction and one commit flush.
 *
 * Nothing waits on purpose. Up to `inFlight` executions of a kind go out at
 * once, each alone, exactly as without coalescing; only what arrives while
 * all of those are out queues, and when one comes back, everything queued
 * goes out together as one statement. Under light load every request runs
 * its own statement; under heavy load batches grow by themselves.
 *
 * Each folded request still gets its own exact answer: the multi-row
 * statement answers per input (matched by `identity`), two inputs with the
 * same identity (the same scope and key) never share a batch, and a batch
 * that fails is run again one input at a time, since the failed statement
 * wrote nothing: a value one input could not store, or a lock one key waited
 * too long for, is that input's answer alone. Only a database that cannot be
 * reached (`databaseAway`) is every input's answer at once, as it would have
 * been alone.
 *
 * A statement that waits (a row lock a caller's transaction holds, say)
 * must not hold up every later call of its kind: after `stallMs` it stops
 * counting as in flight, and the next ones go out beside it, on a connection
 * that is free (with none free, they wait for one, up to `stallLimitMs`).
 *
 * Only a pooled database folds (`Database.coalesce`): a database bound to one
 * connection, such as a caller's transaction, runs every statement alone.
 */

import type { Database } from './database.js';

/** How one statement kind folds. */
export interface Fold<In, Out> {
  /** Inputs with the same identity never share a batch (the same row twice in one statement). */
  identity(input: In): string;
  /** One input alone: the single-row statement. */
  one(input: In): Promise<Out>;
  /** Several inputs (distinct identities) in one statement: the answer of each, by identity. */
  many(inputs: readonly In[]): Promise<ReadonlyMap<string, Out>>;
  /** The answer of an input the multi-row statement returned nothing for. */
  absent: Out;
}

import { isUnavailable } from './errors.js';

interface Waiter<In, Out> {
  input: In;
  identity: string;
  resolve(out: Out): void;
  reject(err: unknown): void;
}

/**
 * Failures of one statement rather than of the database: a lock or statement
 * timeout, a rolled-back serialization. One key of a batch may have caused
 * them, so they are no reason to fail the others.
 */
const STATEMENT_FAILURES = new Set(['55P03', '57014', '40001', '40P01']);

/** The database could not run anything (away, refusing, out of resources): every input's answer. */
function databaseAway(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return isUnavailable(err) && !(typeof code === 'string' && STATEMENT_FAILURES.has(code));
}

/**
 * After this long a statement no longer counts as in flight (it is waiting on
 * something: a row lock, a commit flush behind a large write). Under S1 a
 * statement takes 1 to 3 ms; during a sweeper drain many take longer, and with
 * 20 ms here S1 kept 0.58 of its rate and its p99 tripled, against 0.66 and
 * 1.58x with 5 ms (S5, same machine, two statements of a kind in flight, the
 * default then; not measured again with one).
 */
const STALL_MS = 5;

/**
 * How long a stalled statement holds up its kind when no connection is free.
 * Going out beside it then means opening a connection, and on the benchmark
 * machine a new connection took 10 to 17 ms to open and its first statement
 * 12 to 21 ms more (the backend loads its catalog caches and plans from
 * nothing), longer than the statement it would go round. After a cold start
 * (every connection closed) at 1,000 cycles/s, each stall opened another such
 * connection: three runs ended with 8, 9 and 12, against 4 each with this limit.
 */
const STALL_LIMIT_MS = 50;

/** How a coalescer batches and when it stops waiting on a stalled statement. */
export interface CoalescerOptions {
  /** Inputs one statement carries at most. */
  maxBatch?: number;
  /** After this long a statement stops holding up its kind (`STALL_MS`). */
  stallMs?: number;
  /** Whether a connection is free now (a pool's idle count); without one, stalled statements wait. */
  spare?: () => boolean;
  /** How long they wait for one (`STALL_LIMIT_MS`). */
  stallLimitMs?: number;
}

export class Coalescer<In, Out> {
  readonly #queue: Waiter<In, Out>[] = [];
  #inFlight = 0;
  /** Counters for the benchmark and the tests: statements sent, and inputs they carried. */
  readonly stats = { statements: 0, inputs: 0, folded: 0 };

  constructor(
    private readonly fold: Fold<In, Out>,
    private readonly inFlight: number,
    options: CoalescerOptions = {},
  ) {
    if (!(inFlight >= 1)) throw new Error('a coalescer needs at least one statement in flight');
    this.maxBatch = options.maxBatch ?? 64;
    this.stallMs = options.stallMs ?? STALL_MS;
    this.spare = options.spare ?? (() => true);
    this.stallLimitMs = options.stallLimitMs ?? STALL_LIMIT_MS;
  }

  private readonly maxBatch: number;
  private readonly stallMs: number;
  private readonly spare: () => boolean;
  private readonly stallLimitMs: number;

  run(input: In): Promise<Out> {
    return new Promise<Out>((resolve, reject) => {
      this.#queue.push({ input, identity: this.fold.identity(input), resolve, reject });
      this.#pump();
    });
  }

  #pump(): void {
    while (this.#inFlight < this.inFlight && this.#queue.length > 0) {
      const batch = this.#take();
      this.#inFlight++;
      let counted = true;
      const uncount = () => {
        if (!counted) return;
        counted = false;
        this.#inFlight--;
        this.#pump();
      };
      // Beside it only on a free connection, or once `stallLimitMs` has passed.
      const since = performance.now();
      const stalled = () => {
        if (this.spare() || performance.now() - since >= this.stallLimitMs) uncount();
        else timer = setTimeout(stalled, this.stallMs);
      };
      let timer = setTimeout(stalled, this.stallMs);
      void this.#send(batch).finally(() => {
        clearTimeout(timer);
        uncount();
      });
    }
  }

  /** The oldest queued inputs, up to `maxBatch`, one per identity; the others keep their place. */
  #take(): Waiter<In, Out>[] {
    const q = this.#queue;
    if (q.length === 1) return q.splice(0, 1);
    const batch: Waiter<In, Out>[] = [];
    const seen = new Set<string>();
    let kept = 0;
    for (let i = 0; i < q.length; i++) {
      const w = q[i]!;
      if (batch.length < this.maxBatch && !seen.has(w.identity)) {
        seen.add(w.identity);
        batch.push(w);
      } else {
        q[kept++] = w;
      }
    }
    q.length = kept;
    return batch;
  }

  async #send(batch: Waiter<In, Out>[]): Promise<void> {
    this.stats.statements++;
    this.stats.inputs += batch.length;
    if (batch.length === 1) {
      const w = batch[0]!;
      await this.fold.one(w.input).then(w.resolve, w.reject);
      return;
    }
    this.stats.folded += batch.length;
    let answers: ReadonlyMap<string, Out>;
    try {
      answers = await this.fold.many(batch.map((w) => w.input));
    } catch (err) {
      if (databaseAway(err)) {
        for (const w of batch) w.reject(err);
        return;
      }
      // The statement wrote nothing: each input alone, for its own answer.
      await Promise.all(batch.map((w) => this.fold.one(w.input).then(w.resolve, w.reject)));
      return;
    }
    for (const w of batch) w.resolve(answers.has(w.identity) ? answers.get(w.identity)! : this.fold.absent);
  }
}

/** One identity per (scope, key): Postgres text cannot hold the separator. */
export const rowIdentity = (scope: string, key: string) => `${scope}\u0000${key}`;

/** The identity of an input or a row: its (scope, key). */
export const identityOf = (v: { scope: string; key: string }) => rowIdentity(v.scope, v.key);

/** A multi-row statement's answers, by the identity of the row each one is about. */
export function byIdentity<T>(
  answers: readonly T[],
  rowOf: (answer: T) => { scope: string; key: string },
): Map<string, T> {
  const out = new Map<string, T>();
  for (const a of answers) out.set(identityOf(rowOf(a)), a);
  return out;
}

/**
 * The input relation of a multi-row statement: `unnest` of one array per
 * parameter (`$name::type[]`), its columns named `<prefix><name>`.
 */
export function unnestInput(
  names: readonly string[],
  types: Readonly<Record<string, string>>,
  prefix = '',
): string {
  return `SELECT * FROM unnest(${names.map((n) => `$${n}::${types[n]}[]`).join(', ')})
      AS i(${names.map((n) => `"${prefix}${n}"`).join(', ')})`;
}

/** The values of a multi-row statement: for each parameter, the array of every input's value. */
export function arrayValues(names: readonly string[], inputs: readonly object[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const n of names) out[n] = arrayLiteral(inputs.map((v) => (v as Record<string, unknown>)[n]));
  return out;
}

/**
 * A Postgres array literal of text elements (`{"a","b",NULL}`), for a
 * multi-row statement's `unnest($name::type[])`. Every element is quoted, so
 * any text survives; numbers and booleans are written as text, null as NULL.
 */
export function arrayLiteral(values: readonly unknown[]): string {
  let out = '{';
  for (let i = 0; i < values.length; i++) {
    if (i > 0) out += ',';
    const v = values[i];
    if (v === null) {
      out += 'NULL';
      continue;
    }
    const s = typeof v === 'string' ? v : String(v);
    // Most values hold neither character: looking is cheaper than a replace that finds nothing.
    out += `"${s.includes('"') || s.includes('\\') ? s.replace(/[\\"]/g, '\\$&') : s}"`;
  }
  return `${out}}`;
}

const coalescers = new WeakMap<object, Map<string, Coalescer<never, unknown>>>();

/**
 * The coalescer of statement kind `kind` on `db`, made on first use; none when
 * `db` does not coalesce (or not yet: see `Database.coalesce`).
 */
export function coalescerFor<In, Out>(
  db: Database,
  kind: string,
  fold: (db: Database) => Fold<In, Out>,
): Coalescer<In, Out> | undefined {
  const c = db.coalesce;
  if (!c?.enabled) return undefined;
  let kinds = coalescers.get(c);
  if (!kinds) {
    kinds = new Map();
    coalescers.set(c, kinds);
  }
  let co = kinds.get(kind) as Coalescer<In, Out> | undefined;
  if (!co) {
    co = new Coalescer(fold(db), c.inFlight, { spare: () => db.poolStats().idle > 0 });
    kinds.set(kind, co as unknown as Coalescer<never, unknown>);
  }
  return co;
}

/** What each kind's coalescer on `db` has sent so far (for tests and the benchmark's notes). */
export function coalescingStats(db: Database): Record<string, Coalescer<never, unknown>['stats']> {
  const kinds = db.coalesce ? coalescers.get(db.coalesce) : undefined;
  return Object.fromEntries([...(kinds ?? [])].map(([k, c]) => [k, { ...c.stats }]));
}
