/**
 * Listing and stats (contract section 2; issue 3 item 4): filters (with the
 * statuses rule A gives before any sweeper ran), keyset pagination oldest
 * first, the caller's scopes only, and per-scope stats.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiKey, hashSecret } from '../../src/auth/keys.js';
import { loadConfig } from '../../src/config.js';
import { sweepOnce } from '../../src/ledger/sweeper.js';
import { client, expireApproval, expireLease, type Reply } from '../support/http.js';
import { createTestApp, type TestApp } from '../support/service.js';

/** Setup builds databases and fixtures: headroom for a busy machine, not a timing assertion. */
const SETUP_MS = 180_000;

type Item = { id: string; key: string; scope: string; status: string; effect: string; createdAt: string };

/** Scope names unique to this file's run. */
const T = `l${randomBytes(4).toString('hex')}`;
// The pagination scopes share a prefix no other block of this file uses, so the
// pattern key below sees exactly ONE and TWO.
const ONE = `${T}p-one`;
const TWO = `${T}p-two`;
const THREE = `${T}px-three`; // not matched by `${T}p-*`

const keys: ApiKey[] = [
  { name: 'root', role: 'operator', scopes: ['*'], sha256: hashSecret('root') },
  { name: 'pattern', role: 'client', scopes: [`${T}p-*`], sha256: hashSecret('pattern') },
  { name: 'exact', role: 'client', scopes: [TWO], sha256: hashSecret('exact') },
  { name: 'underscore', role: 'client', scopes: ['q_1-*'], sha256: hashSecret('underscore') },
  { name: 'stats-op', role: 'operator', scopes: [`${T}-st*`], sha256: hashSecret('stats-op') },
  { name: 'stats-client', role: 'client', scopes: ['*'], sha256: hashSecret('stats-client') },
];

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp({ keys });
}, SETUP_MS);
afterAll(() => t.close());

const get = (secret: string, url: string) => client(t.app, ONE, secret).call('GET', url);

/** n begins in `scope`, a few at a time; returns the operations in creation order. */
async function many(scope: string, n: number, body: (i: number) => Record<string, unknown> = () => ({})) {
  const api = client(t.app, scope, 'root');
  const out: Item[] = [];
  for (let i = 0; i < n; i += 25) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(25, n - i) }, (_, j) =>
        api.begin({
          key: `row/${String(i + j).padStart(4, '0')}/${randomUUID()}`,
          request: { i: i + j },
          ...body(i + j),
        }),
      ),
    );
    for (const r of batch) {
      expect(r.status).toBeLessThan(300);
      out.push(r.body.operation);
    }
  }
  return out;
}

/** Follows nextCursor to the end; every page ok and at most `limit` long. */
async function pages(secret: string, query: string, limit: number) {
  const items: Item[] = [];
  let cursor: string | null = null;
  let n = 0;
  do {
    const url = `/v1/operations?${query}${query ? '&' : ''}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const r: Reply = await get(secret, url);
    expect(r.status, r.raw).toBe(200);
    expect(r.body.items.length).toBeLessThanOrEqual(limit);
    if (r.body.nextCursor) expect(r.body.items.length).toBe(limit);
    items.push(...r.body.items);
    cursor = r.body.nextCursor;
    expect(++n).toBeLessThan(1000);
  } while (cursor);
  return items;
}

/** Oldest first, ties by id (the keyset order). */
const keysetOrder = (a: Item, b: Item) =>
  Date.parse(a.createdAt) - Date.parse(b.createdAt) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

describe('filters', () => {
  const S = `${T}-filters`;
  const fx: Record<string, Item> = {};

  beforeAll(async () => {
    const api = client(t.app, S, 'root');
    const mk = async (name: string, body: Record<string, unknown>) => {
      const r = await api.begin({ key: `${name}/${randomUUID()}`, request: { name }, ...body });
      expect(r.status).toBeLessThan(300);
      fx[name] = r.body.operation;
      return r;
    };
    await mk('live', { effect: 'read', leaseMs: 600_000 });
    await mk('pending', { requireApproval: true, effect: 'non_idempotent_write' });
    const rel = await mk('released', { effect: 'idempotent_write' });
    await api.release(fx.released!.key, rel.body.lease.id);
    const unk = await mk('unknown', { effect: 'non_idempotent_write' });
    await api.unknown(fx.unknown!.key, unk.body.lease.id);
    const ok = await mk('succeeded', { effect: 'read' });
    await api.complete(fx.succeeded!.key, ok.body.lease.id, 'succeeded', { v: 1 });
    const ko = await mk('failed', { effect: 'unclassified' });
    await api.complete(fx.failed!.key, ko.body.lease.id, 'failed', { e: 1 });
    await mk('rejected', { requireApproval: true, effect: 'unclassified' });
    await api.reject(fx.rejected!.key, { note: 'no' });
    // Lapses no sweeper has written yet (rule A and the approval deadline).
    await mk('lapsedUnknown', { effect: 'non_idempotent_write' });
    await expireLease(t.db, S, fx.lapsedUnknown!.key);
    await mk('lapsedReady', { effect: 'non_idempotent_write', dispatch: false });
    await expireLease(t.db, S, fx.lapsedReady!.key);
    await mk('lapsedApproval', { requireApproval: true, effect: 'read' });
    await expireApproval(t.db, S, fx.lapsedApproval!.key);
    await mk('recoverable', { effect: 'idempotent_write' });
    await expireLease(t.db, S, fx.recoverable!.key);
    // Time travel: each row created one day after the previous, from 2020-01-01.
    const names = Object.keys(fx);
    for (const [i, name] of names.entries()) {
      await t.db.rows(sql`UPDATE idem_operations SET created_at = timestamptz '2020-01-01T00:00:00Z' + ${i}::int * interval '1 day'
        WHERE scope = ${S} AND key = ${fx[name]!.key}`);
    }
  }, SETUP_MS);

  const list = async (q: string) => {
    const r = await get('root', `/v1/operations?scope=${S}&limit=500${q}`);
    expect(r.status, r.raw).toBe(200);
    return r.body.items as Item[];
  };
  const names = (items: Item[]) => items.map((i) => Object.keys(fx).find((n) => fx[n]!.key === i.key));

  it('no filter: every row of the scope, oldest first', async () => {
    expect(names(await list(''))).toEqual(Object.keys(fx));
  });

  it('status filters use the status a read shows (rule A applied), before any sweeper ran', async () => {
    const expected: Record<string, string[]> = {
      in_progress: ['live', 'recoverable'],
      pending_approval: ['pending'],
      ready: ['released', 'lapsedReady'],
      outcome_unknown: ['unknown', 'lapsedUnknown'],
      succeeded: ['succeeded'],
      failed: ['failed'],
      rejected: ['rejected', 'lapsedApproval'],
    };
    for (const [status, want] of Object.entries(expected)) {
      const items = await list(`&status=${status}`);
      expect(names(items), status).toEqual(want);
      for (const i of items) expect(i.status).toBe(status);
    }
  });

  it('effect filter and combinations', async () => {
    expect(names(await list('&effect=read'))).toEqual(['live', 'succeeded', 'lapsedApproval']);
    expect(names(await list('&effect=non_idempotent_write&status=outcome_unknown'))).toEqual([
      'unknown',
      'lapsedUnknown',
    ]);
    expect(await list('&effect=read&status=failed')).toEqual([]);
  });

  it('createdBefore: strictly older rows only', async () => {
    expect(names(await list('&createdBefore=2020-01-04T00:00:00Z'))).toEqual(['live', 'pending', 'released']);
    expect(names(await list('&createdBefore=2020-01-04T00:00:00.001Z'))).toEqual([
      'live',
      'pending',
      'released',
      'unknown',
    ]);
    expect(await list('&createdBefore=2019-12-31T00:00:00Z')).toEqual([]);
    expect(names(await list('&createdBefore=2020-01-05T00:00:00Z&status=outcome_unknown'))).toEqual([
      'unknown',
    ]);
  });

  it('limit: at most that many, with a cursor to the rest', async () => {
    const r = await get('root', `/v1/operations?scope=${S}&limit=3`);
    expect(names(r.body.items)).toEqual(['live', 'pending', 'released']);
    expect(typeof r.body.nextCursor).toBe('string');
    const all = await pages('root', `scope=${S}`, 3);
    expect(names(all)).toEqual(Object.keys(fx));
    const exact = await get('root', `/v1/operations?scope=${S}&limit=${Object.keys(fx).length}`);
    expect(exact.body.nextCursor).toBeNull();
  });

  it('bad parameters and cursors: 400 INVALID_ARGUMENT', async () => {
    const forged = Buffer.from(`12.${randomUUID()}x`).toString('base64url');
    for (const q of [
      'limit=0',
      'limit=501',
      'limit=abc',
      'status=done',
      'effect=write',
      'createdBefore=yesterday',
      'scope=*',
      'cursor=not-a-cursor',
      `cursor=${forged}`,
      `cursor=${Buffer.from('1.2').toString('base64url')}`,
      `cursor=${'A'.repeat(600)}`,
    ]) {
      const r = await get('root', `/v1/operations?${q}`);
      expect(r.status, `${q}: ${r.raw}`).toBe(400);
      expect(r.headers['content-type']).toContain('application/problem+json');
      expect(r.body.code).toBe('INVALID_ARGUMENT');
    }
    const c = await get('root', `/v1/operations?cursor=garbage`);
    expect(c.body.field).toBe('cursor');
  });
});

describe('keyset pagination', () => {
  let one: Item[];
  let two: Item[];
  let three: Item[];

  beforeAll(async () => {
    [one, two, three] = [await many(ONE, 250), await many(TWO, 30), await many(THREE, 20)];
    // Ties on purpose: groups of ten rows share one created_at (replicas can
    // create rows in the same microsecond); the keyset must order by (created_at, id).
    // timestamp + interval, not timestamptz + interval: Citus refuses a STABLE function over a column in UPDATE.
    await t.db.rows(sql`UPDATE idem_operations o SET created_at = timezone('UTC', timestamp '2021-06-01 00:00:00'
        + (r.n / 10) * interval '1 second')
      FROM (SELECT scope, key, (row_number() OVER (ORDER BY key))::int AS n FROM idem_operations
            WHERE scope = ${ONE}) r
      WHERE o.scope = r.scope AND o.key = r.key`);
    const fresh = await pages('root', `scope=${ONE}`, 500);
    one = fresh;
  }, SETUP_MS);

  it('250 rows with limit 7: every row exactly once, oldest first (ties by id)', async () => {
    const items = await pages('root', `scope=${ONE}`, 7);
    expect(items).toHaveLength(250);
    expect(new Set(items.map((i) => i.id)).size).toBe(250);
    expect(new Set(items.map((i) => i.id))).toEqual(new Set(one.map((i) => i.id)));
    expect(items.map((i) => i.id)).toEqual([...items].sort(keysetOrder).map((i) => i.id));
    expect(new Set(items.map((i) => i.createdAt)).size).toBe(26);
  });

  it('a page boundary inside a tie group skips and repeats nothing', async () => {
    // limit 10 pages align with the groups; 3, 11 and 13 cut through them.
    for (const limit of [3, 10, 11, 13]) {
      const items = await pages('root', `scope=${ONE}`, limit);
      expect(
        items.map((i) => i.id),
        `limit ${limit}`,
      ).toEqual(one.map((i) => i.id));
    }
  });

  it('a pattern key paginates over exactly its scopes', async () => {
    const items = await pages('pattern', '', 7);
    expect(items.map((i) => i.id).sort()).toEqual([...one, ...two].map((i) => i.id).sort());
    expect(items.map((i) => i.id)).toEqual([...items].sort(keysetOrder).map((i) => i.id));
    expect(items.some((i) => i.scope === THREE)).toBe(false);
  });

  it('an exact-scope key lists only that scope', async () => {
    const items = await pages('exact', '', 7);
    expect(items.map((i) => i.id).sort()).toEqual(two.map((i) => i.id).sort());
  });

  it("scope filter inside the key's patterns works; outside them is 403", async () => {
    const items = await pages('pattern', `scope=${TWO}`, 7);
    expect(items.map((i) => i.id).sort()).toEqual(two.map((i) => i.id).sort());
    for (const scope of [THREE, T, 'other']) {
      const r = await get('pattern', `/v1/operations?scope=${scope}`);
      expect(r.status).toBe(403);
      expect(r.body.code).toBe('SCOPE_FORBIDDEN');
    }
    const r = await get('exact', `/v1/operations?scope=${ONE}`);
    expect(r.status).toBe(403);
    // The root key sees the third scope too.
    expect((await pages('root', `scope=${THREE}`, 7)).map((i) => i.id).sort()).toEqual(
      three.map((i) => i.id).sort(),
    );
  });

  it('pattern characters are literal: `q_1-*` does not match `qX1-a`', async () => {
    const mine = await many('q_1-a', 2);
    await many('qX1-a', 2);
    const items = await pages('underscore', '', 50);
    expect(items.map((i) => i.id).sort()).toEqual(mine.map((i) => i.id).sort());
  });
});

describe('stats', () => {
  const A = `${T}-st-a`;
  const B = `${T}-st-b`;
  const HIDDEN = `${T}-hidden`;
  const OPEN = ['pending_approval', 'ready', 'in_progress', 'outcome_unknown'];

  beforeAll(async () => {
    const a = client(t.app, A, 'root');
    const key = () => `st/${randomUUID()}`;
    await a.begin({ key: key(), request: {}, leaseMs: 600_000 });
    await a.begin({ key: key(), request: {}, leaseMs: 600_000 });
    await a.begin({ key: key(), request: {}, requireApproval: true });
    const rel = await a.begin({ key: key(), request: {} });
    await a.release(rel.body.operation.key, rel.body.lease.id);
    const unk = await a.begin({ key: key(), request: {}, effect: 'non_idempotent_write' });
    await a.unknown(unk.body.operation.key, unk.body.lease.id);
    // Became outcome_unknown (rule A) two hours ago: its lease ran out then.
    const old = await a.begin({ key: key(), request: {}, effect: 'unclassified' });
    await t.db.rows(sql`UPDATE idem_operations SET created_at = now() - interval '2 hours 1 minute',
        updated_at = now() - interval '2 hours 1 minute', dispatched_at = now() - interval '2 hours 1 minute',
        lease_expires_at = now() - interval '2 hours'
      WHERE scope = ${A} AND key = ${old.body.operation.key}`);
    const lapsedReady = await a.begin({ key: key(), request: {}, dispatch: false });
    await expireLease(t.db, A, lapsedReady.body.operation.key);
    const lapsedApproval = await a.begin({ key: key(), request: {}, requireApproval: true });
    await expireApproval(t.db, A, lapsedApproval.body.operation.key);
    const done = await a.begin({ key: key(), request: {} });
    await a.complete(done.body.operation.key, done.body.lease.id, 'succeeded', 1);

    await client(t.app, B, 'root').begin({ key: key(), request: {}, leaseMs: 600_000 });
    const h = client(t.app, HIDDEN, 'root');
    const hu = await h.begin({ key: key(), request: {} });
    await h.unknown(hu.body.operation.key, hu.body.lease.id);
  }, SETUP_MS);

  type ScopeStats = {
    scope: string;
    counts: Record<string, number>;
    oldestOutcomeUnknownAgeMs: number | null;
  };
  const stats = async (secret: string) => {
    const r = await get(secret, '/v1/stats');
    expect(r.status, r.raw).toBe(200);
    return r.body.scopes as ScopeStats[];
  };
  const nonZero = (c: Record<string, number>) =>
    Object.fromEntries(Object.entries(c).filter(([, n]) => n > 0));

  function expectFixture(scopes: ScopeStats[]) {
    expect(scopes.map((s) => s.scope).sort()).toEqual([A, B]);
    const a = scopes.find((s) => s.scope === A)!;
    const b = scopes.find((s) => s.scope === B)!;
    // Open statuses only, as reads show them (rule A applied).
    expect(nonZero(a.counts)).toEqual({ in_progress: 2, pending_approval: 1, ready: 2, outcome_unknown: 2 });
    for (const s of Object.keys(a.counts)) expect(OPEN).toContain(s);
    expect(a.oldestOutcomeUnknownAgeMs).toBeGreaterThanOrEqual(2 * 3_600_000);
    expect(a.oldestOutcomeUnknownAgeMs).toBeLessThan(2 * 3_600_000 + 10 * 60_000);
    expect(nonZero(b.counts)).toEqual({ in_progress: 1 });
    expect(b.oldestOutcomeUnknownAgeMs).toBeNull();
  }

  it("per scope, the caller's scopes only: open counts and the oldest outcome_unknown age", async () => {
    expectFixture(await stats('stats-op'));
  });

  it('reads the same after the sweeper wrote the lapses', async () => {
    await sweepOnce(t.db, loadConfig({}).sweep);
    expectFixture(await stats('stats-op'));
  });

  it('an operator key for every scope sees the hidden scope too; a client key gets 403', async () => {
    const all = await stats('root');
    const hidden = all.find((s) => s.scope === HIDDEN)!;
    expect(nonZero(hidden.counts)).toEqual({ outcome_unknown: 1 });
    expect(hidden.oldestOutcomeUnknownAgeMs).toBeGreaterThanOrEqual(0);
    const r = await get('stats-client', '/v1/stats');
    expect(r.status).toBe(403);
    expect(r.body.code).toBe('SCOPE_FORBIDDEN');
  });
});
