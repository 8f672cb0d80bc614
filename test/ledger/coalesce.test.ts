/**
 * Coalescing (`src/db/coalesce.ts`): concurrent begins, completes and reads
 * by key may be folded into one multi-row statement, and each must still get
 * exactly the answer, the rows and the events it would have got alone.
 *
 * The multi-row statements run here on both engines against keys in every
 * state, next to the one-row statements on twin keys in the same states.
 * (Not on Citus, where coalescing is off.)
 * Then, on Postgres, many concurrent calls through the service with
 * coalescing on: one winner per key, every other call its own exact answer,
 * and the folding really happened. The coalescer's own rules (how many in
 * flight, one identity per batch, what a failed batch does) are checked on a
 * fold without a database: there is no SQL in them.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { arrayLiteral, Coalescer, coalescingStats, type Fold, rowIdentity } from '../../src/db/coalesce.js';
import { fingerprintOf } from '../../src/ledger/json-value.js';
import { beginValues, insertMany, insertOrRead, type NewOperation } from '../../src/ledger/sql/begin.js';
import {
  COMPLETE_FOLDED,
  type CompleteCall,
  completeValues,
  runComplete,
} from '../../src/ledger/sql/lease-holder.js';
import { readByKey, readManyByKey } from '../../src/ledger/sql/read.js';
import { transitionMany } from '../../src/ledger/sql/transition.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import { eventually } from '../client/support.js';
import { newOperation, REQUEST } from '../support/begin-input.js';
import { onCitus, onPostgres } from '../support/engine.js';
import { client, expireApproval, expireLease } from '../support/http.js';
import { createTestApp, type TestApp } from '../support/service.js';

const SCOPE = 'fold';

const input = (key: string, over: Partial<NewOperation> = {}) => newOperation(SCOPE, key, over);

/** A row without what differs between twin keys: ids, keys, times (and the second-granular countdown). */
function twin(row: object | undefined): Record<string, unknown> | undefined {
  if (!row) return row;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(row)) {
    if (/^(id|key|leaseId|leaseSecondsLeft)$/.test(k) || /At$|Until$|Deadline$/.test(k)) continue;
    out[k] = v;
  }
  return out;
}

type Api = ReturnType<typeof client>;
const body = (key: string, extra: Record<string, unknown> = {}) => ({
  key,
  request: { n: 1 },
  effect: 'non_idempotent_write',
  ...extra,
});

/** Puts `<prefix>/<state>` in every state begin and complete can meet; the lease ids of the live ones. */
async function states(t: TestApp, api: Api, prefix: string): Promise<Record<string, string | null>> {
  const k = (s: string) => `${prefix}/${s}`;
  const leases: Record<string, string | null> = {};
  const s = await api.begin(body(k('succeeded')));
  await api.complete(k('succeeded'), s.body.lease.id, 'succeeded', { ok: true });
  leases.succeeded = s.body.lease.id;
  const f = await api.begin(body(k('failed')));
  await api.complete(k('failed'), f.body.lease.id, 'failed', { why: 'no' });
  leases.failed = f.body.lease.id;
  leases.in_progress = (await api.begin(body(k('in_progress')))).body.lease.id;
  const r = await api.begin(body(k('ready'), { dispatch: false }));
  await api.release(k('ready'), r.body.lease.id);
  leases.ready = r.body.lease.id;
  const u = await api.begin(body(k('outcome_unknown')));
  await api.unknown(k('outcome_unknown'), u.body.lease.id);
  leases.outcome_unknown = u.body.lease.id;
  leases.lapsed_dispatched = (await api.begin(body(k('lapsed_dispatched')))).body.lease.id;
  await expireLease(t.db, SCOPE, k('lapsed_dispatched'));
  leases.lapsed_undispatched = (
    await api.begin(body(k('lapsed_undispatched'), { dispatch: false }))
  ).body.lease.id;
  await expireLease(t.db, SCOPE, k('lapsed_undispatched'));
  const idem = await api.begin(body(k('lapsed_idempotent'), { effect: 'idempotent_write' }));
  await expireLease(t.db, SCOPE, k('lapsed_idempotent'));
  leases.lapsed_idempotent = idem.body.lease.id;
  await api.begin(body(k('pending_approval'), { requireApproval: true }));
  leases.pending_approval = null;
  await api.begin(body(k('approval_expired'), { requireApproval: true }));
  await expireApproval(t.db, SCOPE, k('approval_expired'));
  leases.approval_expired = null;
  return leases;
}

/**
 * Not on Citus: the service turns coalescing off there (`src/db/startup.ts`),
 * because Citus cannot plan the multi-row statements (their keys come in
 * arrays: "cannot push down this subquery"). The one-row statements' races
 * run on Citus in `concurrency.test.ts` and the drills.
 */
const COALESCING_RUNS = !onCitus();

describe.runIf(COALESCING_RUNS)('the multi-row statements answer as the one-row ones', () => {
  let t: TestApp;
  let api: Api;
  let one: Record<string, string | null>;
  let many: Record<string, string | null>;

  beforeAll(async () => {
    t = await createTestApp();
    api = client(t.app, SCOPE);
    one = await states(t, api, 'one');
    many = await states(t, api, 'many');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('begin: a key in every state, with its own and another fingerprint, and new keys', async () => {
    const inputs: NewOperation[] = [];
    for (const state of Object.keys(one)) {
      for (const fingerprint of [fingerprintOf(REQUEST), fingerprintOf('{"n":2}')]) {
        inputs.push(input(`many/${state}`, { fingerprint, actor: `a-${inputs.length}` }));
      }
    }
    // Reads do not write: one statement cannot hold a key twice, so each fingerprint in its own.
    const firsts = inputs.filter((_, i) => i % 2 === 0);
    const seconds = inputs.filter((_, i) => i % 2 === 1);
    const newOnes = [1, 2, 3].map((n) =>
      input(`many/new${n}`, { effect: n === 2 ? 'read' : 'unclassified' }),
    );
    newOnes.push(input('many/new-approval', { requireApproval: true }));
    newOnes.push(input('many/new-undispatched', { dispatch: false, owner: '{"w":1}' }));
    const byMany = new Map<string, unknown>();
    for (const batch of [[...firsts, ...newOnes], seconds]) {
      const answers = await insertMany(
        t.db,
        batch.map((i) => beginValues(i)),
      );
      for (const i of batch)
        byMany.set(`${i.key} ${i.fingerprint}`, answers.get(rowIdentity(i.scope, i.key)));
    }
    for (const i of [...inputs, ...newOnes]) {
      const single = await insertOrRead(t.db, { ...i, key: i.key.replace(/^many\//, 'one/') }, false);
      const folded = byMany.get(`${i.key} ${i.fingerprint}`) as object | undefined;
      expect(folded, i.key).toBeDefined();
      expect(twin(folded), `${i.key} ${i.fingerprint}`).toEqual(twin(single));
    }
    // Each new key has its one `created` event, with the actor of its own input.
    for (const n of newOnes) {
      const events = (await api.events(n.key)).body.events;
      const twinEvents = (await api.events(n.key.replace(/^many\//, 'one/'))).body.events;
      expect(events.map((e: { type: string }) => e.type)).toEqual(['created']);
      expect(events[0].actor).toBe(n.actor);
      expect(events.map(eventShape)).toEqual(twinEvents.map(eventShape));
    }
  });

  it('complete: a key in every state, with its own lease, another one, the same and another result', async () => {
    const calls = (prefix: string, leases: Record<string, string | null>): CompleteCall[][] => {
      const rounds: CompleteCall[][] = [[], []];
      for (const [state, lease] of Object.entries(leases)) {
        const key = `${prefix}/${state}`;
        const base = { scope: SCOPE, key, actor: `actor-${state}` };
        // First its own lease (the same result as a succeeded key's), then a stranger's.
        rounds[0]!.push({
          ...base,
          leaseId: lease ?? randomUUID(),
          status: 'succeeded',
          result: '{"ok":true}',
        });
        rounds[1]!.push({ ...base, leaseId: randomUUID(), status: 'failed', result: null });
      }
      rounds[0]!.push({
        scope: SCOPE,
        key: `${prefix}/never-begun`,
        actor: 'x',
        leaseId: randomUUID(),
        status: 'succeeded',
        result: null,
      });
      return rounds;
    };
    const singles = calls('one', one);
    const folded = calls('many', many);
    for (let round = 0; round < 2; round++) {
      const answers = await transitionMany(t.db, COMPLETE_FOLDED, folded[round]!.map(completeValues));
      for (let i = 0; i < singles[round]!.length; i++) {
        const s = singles[round]![i]!;
        const m = folded[round]![i]!;
        const alone = await runComplete(t.db, s).catch((err: { code?: string }) => err.code ?? String(err));
        const together = answers.get(rowIdentity(m.scope, m.key));
        if (typeof alone === 'string') {
          expect(alone, m.key).toBe('NOT_FOUND');
          expect(together, m.key).toBeUndefined();
          continue;
        }
        const a = alone;
        expect(together, m.key).toBeDefined();
        expect({ ...together!, row: twin(together!.row) }, `${m.key} round ${round}`).toEqual({
          ...a,
          row: twin(a.row),
        });
      }
    }
    // The same events, in the same order, for every key (lapses, completions, refusals).
    for (const state of Object.keys(one)) {
      const a = (await api.events(`one/${state}`)).body.events.map(eventShape);
      const b = (await api.events(`many/${state}`)).body.events.map(eventShape);
      expect(b, state).toEqual(a);
    }
  });

  it('read by key: a key in every state, and one that is not there', async () => {
    const keys = [...Object.keys(one).map((s) => `one/${s}`), ...Object.keys(many).map((s) => `many/${s}`)];
    keys.push('never/begun');
    const together = await readManyByKey(
      t.db,
      keys.map((key) => ({ scope: SCOPE, key })),
    );
    expect(together.has(rowIdentity(SCOPE, 'never/begun'))).toBe(false);
    expect(together.size).toBe(keys.length - 1);
    // The countdown is second-granular and the two statements run at different times.
    const steady = (row: object | undefined) => row && { ...row, leaseSecondsLeft: undefined };
    for (const key of keys) {
      const alone = await readByKey(t.db, SCOPE, key);
      expect(steady(together.get(rowIdentity(SCOPE, key))), key).toEqual(steady(alone));
    }
  });
});

/** An event without its id, time and operation. */
function eventShape(e: Record<string, unknown>) {
  const { id: _i, at: _a, operationId: _o, key: _k, ...rest } = e;
  const detail = { ...(rest.detail as Record<string, unknown>) };
  delete detail.lapsedAt;
  return { ...rest, detail };
}

describe.runIf(onPostgres() && COALESCING_RUNS)('coalescing under concurrency', () => {
  let t: TestApp;
  let api: Api;

  beforeAll(async () => {
    // One statement of a kind in flight: everything that arrives meanwhile is folded.
    t = await createTestApp({ dbSettings: { coalesce: 1, poolMax: 20 } });
    api = client(t.app, SCOPE);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('many begins on a few keys: one winner per key, every other call its own answer', async () => {
    const keys = Array.from({ length: 12 }, (_, i) => `race/${i}`);
    const calls = keys.flatMap((key) =>
      Array.from({ length: 6 }, (_, j) => api.begin(body(key, j === 5 ? { request: { n: 2 } } : {}))),
    );
    const replies = await Promise.all(calls);
    for (let k = 0; k < keys.length; k++) {
      const mine = replies.slice(k * 6, k * 6 + 6);
      // The sixth call has other arguments, and may win the key as well as any of the five.
      const winners = mine.flatMap((r, j) => (r.status === 201 ? [j] : []));
      expect(winners, keys[k]).toHaveLength(1);
      const winnerIsOther = winners[0] === 5;
      for (let j = 0; j < 6; j++) {
        if (j === winners[0]) continue;
        const sameAsWinner = (j === 5) === winnerIsOther;
        expect(mine[j]!.status, `${keys[k]} call ${j}`).toBe(sameAsWinner ? 409 : 422);
        expect(mine[j]!.body.code, `${keys[k]} call ${j}`).toBe(
          sameAsWinner ? 'OPERATION_IN_PROGRESS' : 'KEY_REUSED',
        );
      }
      const events = (await api.events(keys[k]!)).body.events;
      expect(
        events.filter((e: { type: string }) => e.type === 'created'),
        keys[k],
      ).toHaveLength(1);
    }
  });

  it('many begin-complete cycles at once: every one lands once, and the statements were shared', async () => {
    const before = coalescingStats(t.db);
    const n = 80;
    await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const key = `cycle/${i}`;
        const b = await api.begin(body(key));
        expect(b.status, key).toBe(201);
        const c = await api.complete(key, b.body.lease.id, 'succeeded', { i });
        expect(c.status, key).toBe(200);
        expect(c.body.operation.result, key).toEqual({ i });
        // A stranger's completion is refused, and recorded.
        const s = await api.complete(key, randomUUID(), 'succeeded', { i });
        expect(s.status, key).toBe(409);
      }),
    );
    for (let i = 0; i < n; i++) {
      const types = (await api.events(`cycle/${i}`)).body.events.map((e: { type: string }) => e.type);
      expect(types).toEqual(['created', 'completed', 'stale_completion_rejected']);
    }
    const after = coalescingStats(t.db);
    const folded = (k: string) => (after[k]?.folded ?? 0) - (before[k]?.folded ?? 0);
    expect(folded('idem_begin_insert')).toBeGreaterThan(0);
    expect(folded('idem_complete')).toBeGreaterThan(0);
    // Operators see it too.
    const text = await createMetrics(t.db).registry.metrics();
    const count = (statement: string, sent: string) =>
      Number(
        text.match(
          new RegExp(`idem_db_coalesced_calls_total{statement="${statement}",sent="${sent}"} (\\d+)`),
        )?.[1],
      );
    expect(count('idem_complete', 'folded')).toBe(after.idem_complete!.folded);
    expect(count('idem_complete', 'alone')).toBe(after.idem_complete!.inputs - after.idem_complete!.folded);
    expect(count('idem_begin_insert', 'folded')).toBeGreaterThan(0);
  });

  it('many replays at once: each its own stored result, and the reads were shared', async () => {
    const before = coalescingStats(t.db);
    const n = 80;
    const replies = await Promise.all(Array.from({ length: n }, (_, i) => api.begin(body(`cycle/${i}`))));
    replies.forEach((r, i) => {
      expect(r.status, `cycle/${i}`).toBe(200);
      expect(r.headers['idempotent-replayed'], `cycle/${i}`).toBe('true');
      expect(r.body.operation.key, `cycle/${i}`).toBe(`cycle/${i}`);
      expect(r.body.operation.result, `cycle/${i}`).toEqual({ i });
    });
    const after = coalescingStats(t.db);
    expect((after.idem_read_by_key?.folded ?? 0) - (before.idem_read_by_key?.folded ?? 0)).toBeGreaterThan(0);
  });
});

describe('the coalescer', () => {
  /** A fold that records every statement it was asked for; `fail` makes a batch fail with a SQLSTATE. */
  function recording(fail?: (inputs: readonly string[]) => string | undefined) {
    const sent: string[][] = [];
    const gates: Array<() => void> = [];
    const gate = () => new Promise<void>((r) => gates.push(r));
    const fold: Fold<string, string | undefined> = {
      identity: (v) => v.split('#')[0]!,
      one: async (v) => {
        sent.push([v]);
        await gate();
        if (v.startsWith('bad')) throw Object.assign(new Error('bad value'), { code: '22P02' });
        return `one:${v}`;
      },
      many: async (vs) => {
        sent.push([...vs]);
        await gate();
        const code = fail?.(vs);
        if (code) throw Object.assign(new Error('batch failed'), { code });
        return new Map(vs.filter((v) => !v.startsWith('gone')).map((v) => [v.split('#')[0]!, `many:${v}`]));
      },
      absent: undefined,
    };
    const open = async () => {
      await new Promise((r) => setImmediate(r));
      while (gates.length) gates.shift()!();
      await new Promise((r) => setImmediate(r));
    };
    return { fold, sent, open };
  }

  it('sends alone while fewer than its limit are in flight, and folds what queues behind them', async () => {
    const r = recording();
    const co = new Coalescer(r.fold, 2);
    const answers = Promise.all(['a', 'b', 'c', 'd', 'e'].map((v) => co.run(v)));
    expect(r.sent).toEqual([['a'], ['b']]);
    for (let i = 0; i < 4; i++) await r.open();
    expect(await answers).toEqual(['one:a', 'one:b', 'many:c', 'many:d', 'many:e'].map((x) => x));
    expect(r.sent).toEqual([['a'], ['b'], ['c', 'd', 'e']]);
    expect(co.stats).toEqual({ statements: 3, inputs: 5, folded: 3 });
  });

  it('never puts one identity twice in a batch, and keeps the order of the rest', async () => {
    const r = recording();
    const co = new Coalescer(r.fold, 1);
    const answers = Promise.all(['x', 'a#1', 'a#2', 'b', 'a#3', 'c'].map((v) => co.run(v)));
    for (let i = 0; i < 6; i++) await r.open();
    expect(r.sent).toEqual([['x'], ['a#1', 'b', 'c'], ['a#2'], ['a#3']]);
    expect(await answers).toEqual(['one:x', 'many:a#1', 'one:a#2', 'many:b', 'one:a#3', 'many:c']);
  });

  it('answers `absent` for an input the batch returned nothing for', async () => {
    const r = recording();
    const co = new Coalescer(r.fold, 1);
    const answers = Promise.all(['x', 'gone', 'y'].map((v) => co.run(v)));
    for (let i = 0; i < 3; i++) await r.open();
    expect(await answers).toEqual(['one:x', undefined, 'many:y']);
  });

  it('runs a batch that failed on a value again one input at a time, each with its own answer', async () => {
    const r = recording((vs) => (vs.some((v) => v.startsWith('bad')) ? '22P02' : undefined));
    const co = new Coalescer(r.fold, 1);
    const answers = ['x', 'p', 'bad', 'q'].map((v) =>
      co.run(v).then(String, (e: Error) => `error:${e.message}`),
    );
    for (let i = 0; i < 6; i++) await r.open();
    expect(await Promise.all(answers)).toEqual(['one:x', 'one:p', 'error:bad value', 'one:q']);
    expect(r.sent).toEqual([['x'], ['p', 'bad', 'q'], ['p'], ['bad'], ['q']]);
  });

  it('gives every input of a batch the database could not run (unreachable) that failure', async () => {
    const r = recording(() => '57P01');
    const co = new Coalescer(r.fold, 1);
    const answers = ['x', 'p', 'q'].map((v) => co.run(v).then(String, (e: Error) => `error:${e.message}`));
    for (let i = 0; i < 4; i++) await r.open();
    expect(await Promise.all(answers)).toEqual(['one:x', 'error:batch failed', 'error:batch failed']);
    expect(r.sent).toEqual([['x'], ['p', 'q']]);
  });

  it('runs a failed batch again one at a time whatever the failure, unless the database is away', async () => {
    // A lock one key waited too long for (55P03) is that key's answer alone.
    const r = recording((vs) => (vs.includes('p') ? '55P03' : undefined));
    const co = new Coalescer(r.fold, 1);
    const answers = ['x', 'p', 'q'].map((v) => co.run(v).then(String, (e: Error) => `error:${e.message}`));
    for (let i = 0; i < 5; i++) await r.open();
    expect(await Promise.all(answers)).toEqual(['one:x', 'one:p', 'one:q']);
  });

  it('lets the next statements out beside one that has been waiting for longer than its stall time', async () => {
    const r = recording();
    const co = new Coalescer(r.fold, 1, { stallMs: 30 });
    const first = co.run('slow');
    const queued = [co.run('a'), co.run('b')];
    expect(r.sent).toEqual([['slow']]);
    await eventually(() => r.sent.length === 2);
    expect(r.sent).toEqual([['slow'], ['a', 'b']]);
    for (let i = 0; i < 3; i++) await r.open();
    expect(await first).toBe('one:slow');
    expect(await Promise.all(queued)).toEqual(['many:a', 'many:b']);
  });

  it('with no connection free, holds the next statements back until one is free', async () => {
    const r = recording();
    let free = false;
    const co = new Coalescer(r.fold, 1, { stallMs: 10, spare: () => free, stallLimitMs: 10_000 });
    const first = co.run('slow');
    const queued = [co.run('a'), co.run('b')];
    await new Promise((res) => setTimeout(res, 60));
    expect(r.sent).toEqual([['slow']]);
    free = true;
    await eventually(() => r.sent.length === 2);
    expect(r.sent).toEqual([['slow'], ['a', 'b']]);
    for (let i = 0; i < 2; i++) await r.open();
    expect(await first).toBe('one:slow');
    expect(await Promise.all(queued)).toEqual(['many:a', 'many:b']);
  });

  it('with no connection free, lets the next statements out after the stall limit all the same', async () => {
    const r = recording();
    const co = new Coalescer(r.fold, 1, { stallMs: 10, spare: () => false, stallLimitMs: 300 });
    const first = co.run('slow');
    const queued = co.run('a');
    await new Promise((res) => setTimeout(res, 50));
    expect(r.sent).toEqual([['slow']]);
    await eventually(() => r.sent.length === 2);
    expect(r.sent).toEqual([['slow'], ['a']]);
    for (let i = 0; i < 2; i++) await r.open();
    expect(await first).toBe('one:slow');
    expect(await queued).toBe('one:a');
  });

  it('writes array literals that keep any text', () => {
    expect(arrayLiteral(['a', 'b"c', 'd\\e', null, 3, true, '', 'NULL', '{x,y}'])).toBe(
      '{"a","b\\"c","d\\\\e",NULL,"3","true","","NULL","{x,y}"}',
    );
  });
});
