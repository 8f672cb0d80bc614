/**
 * The commands of drill F8. Parameters are drawn at generation time
 * (`arbitraries.ts`); lease ids, fingerprints and attempts are picked at run
 * time from what the model knows then ("the current lease", "a stale one").
 * Each command runs its call, compares the reply with the model's prediction,
 * then reads the key back and checks it (`harness.ts`).
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import type fc from 'fast-check';
import type { Effect } from '../../src/contract/index.js';
import { sweepOnce } from '../../src/ledger/sweeper.js';
import {
  checkKey,
  cloneModel,
  commitKey,
  compareReply,
  fail,
  type KeyRead,
  learn,
  type Model,
  pickLease,
  type Real,
  readKey,
  requestOf,
  SWEEP,
  send,
} from './harness.js';
import {
  approvalExpires,
  type Call,
  type Expect,
  fingerprintOf,
  KEYS,
  lapseEvent,
  leaseExpires,
  type OpModel,
  PURGEABLE,
  predict,
  RESULTS,
  SCOPE,
} from './ledger-model.js';

export type LeasePick = 'current' | 'stale' | 'bogus';
export type Spec =
  | {
      kind: 'begin';
      k: number;
      variant: number;
      effect?: Effect;
      dispatch: boolean;
      requireApproval: boolean;
      lease: 'none' | 'fresh' | LeasePick;
    }
  | { kind: 'dispatch' | 'heartbeat' | 'release' | 'unknown'; k: number; lease: LeasePick }
  | { kind: 'complete'; k: number; lease: LeasePick; status: 'succeeded' | 'failed'; result: number }
  | { kind: 'approve'; k: number; fp: 'none' | 'right' | 'wrong' }
  | { kind: 'reject'; k: number; withResult: boolean; note?: string }
  | {
      kind: 'resolve';
      k: number;
      status: 'succeeded' | 'failed' | 'ready';
      result: number;
      expected: 'none' | 'right' | 'wrong';
    };

/** Commands run so far (the test prints the total). */
export const stats = { commands: 0, seen: new Map<string, number>() };
export const tally = (what: string) => stats.seen.set(what, (stats.seen.get(what) ?? 0) + 1);
const label = (c: Call, on: OpModel | undefined, e: Expect) =>
  `${c.kind} on ${on ? `${on.status}${on.unwritten ? ' (unwritten lapse)' : ''}` : 'nothing'}: ` +
  `${e.status} ${e.code ?? e.outcome ?? ''}${e.recovered ? ' recovered' : ''} [${e.events.join(' ')}]`;

/** The concrete call of a spec, given what the model knows now. */
export function callOf(s: Spec, m: Model, freshLease?: string): Call {
  const op = m.ops[s.k];
  switch (s.kind) {
    case 'begin': {
      const leaseId =
        s.lease === 'none'
          ? undefined
          : s.lease === 'fresh'
            ? (freshLease ?? randomUUID())
            : pickLease(m, s.k, s.lease);
      const { lease: _, ...rest } = s;
      return leaseId === undefined ? rest : { ...rest, leaseId };
    }
    case 'approve': {
      const right = op?.fingerprint ?? fingerprintOf(0);
      const wrong = right === fingerprintOf(0) ? fingerprintOf(2) : fingerprintOf(0);
      return {
        kind: 'approve',
        k: s.k,
        ...(s.fp === 'none' ? {} : { fingerprint: s.fp === 'right' ? right : wrong }),
      };
    }
    case 'reject':
      return s;
    case 'resolve': {
      const { expected, ...rest } = s;
      const attempt = op?.attempt ?? 0;
      return expected === 'none'
        ? rest
        : { ...rest, expectedAttempt: expected === 'right' ? attempt : attempt + 1 };
    }
    default: {
      const { lease, ...rest } = s;
      return { ...rest, leaseId: pickLease(m, s.k, lease) } as Call;
    }
  }
}

export function describeSpec(s: Spec): string {
  const { kind, k, ...rest } = s;
  const params = Object.entries(rest)
    .filter(([, v]) => v !== undefined)
    .map(([p, v]) =>
      p === 'result' ? `result=${JSON.stringify(RESULTS[v as number]) ?? 'none'}` : `${p}=${v}`,
    );
  return `${kind}(k${k}${params.length ? ` ${params.join(' ')}` : ''})`;
}

export async function observe(
  r: Real,
  m: Model,
  k: number,
  want: { events: readonly string[]; ordered: boolean; changes: boolean },
  context: Record<string, unknown>,
): Promise<KeyRead> {
  const read = await readKey(r, k);
  const d = checkKey(r, m, k, read, want);
  if (d.length)
    fail(`key k${k} after ${context.command}`, d, { ...context, model: m.ops[k] ?? 'no operation' });
  commitKey(r, k, read);
  return read;
}

export type Cmd = fc.AsyncCommand<Model, Real>;

/** One HTTP call, alone. */
export class HttpCmd implements Cmd {
  constructor(readonly spec: Spec) {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    stats.commands++;
    const c = callOf(this.spec, m);
    const before = m.ops[c.k];
    const e = predict(before, c);
    const reply = await send(r.api, c);
    const req = requestOf(c);
    const context = {
      command: this.toString(),
      request: `POST ${req.url} ${JSON.stringify(req.body)}`,
      model: before ?? 'no operation',
      reply: reply.raw,
    };
    // The prediction must explain the reply and then the reads.
    const replyDiffs = compareReply(reply, e, m);
    if (replyDiffs.length) {
      fail(`${this} answered otherwise than the model`, replyDiffs, { ...context, expected: e });
    }
    const read = await readKey(r, c.k);
    const mm = cloneModel(m);
    learn(mm, c.k, e, reply);
    const why = checkKey(r, mm, c.k, read, { events: e.events, ordered: true, changes: e.changes });
    if (why.length) fail(`key k${c.k} after ${this}`, why, { ...context, model: before ?? 'no operation' });
    Object.assign(m, mm);
    commitKey(r, c.k, read);
    tally(label(c, before, e));
    // A reply's operation is what the next read shows.
    if (
      reply.body.operation &&
      JSON.stringify(reply.body.operation) !== JSON.stringify(read.get.body.operation)
    ) {
      fail(`${this}: the reply's operation is not what a read shows next`, [read.get.raw], context);
    }
  }
  toString = () => describeSpec(this.spec);
}

/** GET by key, by id, or by the id of a purged earlier operation under the key. */
export class GetCmd implements Cmd {
  constructor(
    readonly k: number,
    readonly by: 'key' | 'id' | 'old-id',
  ) {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    stats.commands++;
    const context = { command: this.toString() };
    const read = await observe(r, m, this.k, { events: [], ordered: true, changes: false }, context);
    const current = m.ops[this.k]?.id ?? undefined;
    const id = this.by === 'id' ? current : m.ids[this.k]!.find((x) => x !== current);
    if (id === undefined) return;
    const g = await r.api.getById(id);
    const want = id === current ? JSON.stringify(read.get.body) : undefined;
    if (want === undefined ? g.status !== 404 : g.status !== 200 || JSON.stringify(g.body) !== want) {
      fail(`${this}: GET /v1/operations/${id}`, [`HTTP ${g.status}: ${g.raw.slice(0, 300)}`], {
        ...context,
        byKey: read.get.raw,
      });
    }
  }
  toString = () => `get(k${this.k} by=${this.by})`;
}

/**
 * Time travel: the deadlines of one operation still ahead (its lease's expiry,
 * or its approval deadline) move into the past, as if the database clock had
 * run on. Only deadlines move: every decision is still the service's, by now().
 */
export class AdvanceCmd implements Cmd {
  constructor(readonly k: number) {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    stats.commands++;
    const key = KEYS[this.k]!;
    // Only a deadline still ahead moves: time passes each deadline once.
    await r.db.rows(sql`UPDATE idem_operations SET lease_expires_at = now() - interval '1 millisecond'
      WHERE scope = ${SCOPE} AND key = ${key} AND status IN ('in_progress', 'outcome_unknown')
        AND lease_expires_at > now()`);
    await r.db.rows(sql`UPDATE idem_operations SET approval_deadline = now() - interval '1 millisecond'
      WHERE scope = ${SCOPE} AND key = ${key} AND status = 'pending_approval' AND approval_deadline > now()`);
    const before = m.ops[this.k];
    const lease = leaseExpires(before);
    const approval = approvalExpires(lease.next);
    m.ops[this.k] = approval.next;
    tally(`advance on ${before?.status ?? 'nothing'}: -> ${approval.next?.status ?? 'nothing'}`);
    const changes = lease.changes || approval.changes;
    await observe(r, m, this.k, { events: [], ordered: true, changes }, { command: this.toString() });
  }
  toString = () => `advance(k${this.k}: its deadlines pass)`;
}

/**
 * One sweeper pass (`sweepOnce`), after the retention of one operation (or of
 * every one, `'all'`) has passed: its `retained_until` moves into the past.
 * Every lapse the reads already showed is written, and reads stay
 * byte-identical; a terminal or ready operation past retention is deleted with
 * its events (section 6), and nothing else is.
 */
export class SweepCmd implements Cmd {
  constructor(readonly purge?: number | 'all') {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    stats.commands++;
    const targets = this.purge === undefined ? [] : this.purge === 'all' ? [...KEYS.keys()] : [this.purge];
    for (const k of targets) {
      // Only a retention that runs (a ready or terminal row's) passes.
      await r.db.rows(sql`UPDATE idem_operations SET retained_until = now() - interval '1 millisecond'
        WHERE scope = ${SCOPE} AND key = ${KEYS[k]!} AND retained_until IS NOT NULL`);
    }
    // The row's stored status decides; an unwritten lapse is written first, and retained anew.
    const purged = targets.filter((k) => {
      const op = m.ops[k];
      return op !== undefined && !op.unwritten && PURGEABLE.has(op.status);
    });
    const lapsed = m.ops.filter((op) => op?.unwritten);
    const want = {
      leaseExpired: lapsed.filter((op) => op!.status !== 'rejected').length,
      approvalExpired: lapsed.filter((op) => op!.status === 'rejected').length,
      purged: purged.length,
    };
    const got = await sweepOnce(r.db, SWEEP);
    tally(`sweep ${JSON.stringify(want)}`);
    if (JSON.stringify(got) !== JSON.stringify(want)) {
      fail(`${this}`, [`sweepOnce ${JSON.stringify(got)}, model ${JSON.stringify(want)}`], { models: m.ops });
    }
    const events = m.ops.map((op) => (op ? lapseEvent(op) : []));
    const goneIds = purged.map((k) => m.ops[k]!.id!);
    m.ops = m.ops.map((op, k) => (purged.includes(k) ? undefined : op && { ...op, unwritten: false }));
    // Events go with their operation.
    const left = await r.db.rows<{ n: number }>(
      sql`SELECT count(*)::int AS n FROM idem_events WHERE operation_id = ANY(${`{${goneIds.join(',')}}`}::uuid[])`,
    );
    if (left[0]!.n !== 0) fail(`${this}`, [`${left[0]!.n} events of purged operations ${goneIds} are left`]);
    for (const k of KEYS.keys()) {
      const want = { events: events[k]!, ordered: true, changes: false };
      await observe(r, m, k, want, { command: this.toString() });
    }
  }
  toString = () =>
    this.purge === undefined
      ? 'sweep()'
      : `purge(${this.purge === 'all' ? 'every key' : `k${this.purge}`}: retention passes; sweep)`;
}

/** A few commands in a row, each checked as alone: steers the races' runs to the states where calls meet. */
export class SeqCmd implements Cmd {
  constructor(readonly cmds: Cmd[]) {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    for (const c of this.cmds) await c.run(m, r);
  }
  toString = () => this.cmds.map(String).join('; ');
}
