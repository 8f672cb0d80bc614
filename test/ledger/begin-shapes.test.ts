/**
 * begin has two shapes (`sql/begin.ts`): insert first (for a key this process
 * has not seen) and, for one it has, a plain read first with the insert only
 * when the read finds nothing (a purged key). They must answer the same
 * for every key in every state; only their cost differs. Each key below is
 * put in one state through the API, then both shapes run on it with the same
 * input, and a new key is begun with each.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fingerprintOf } from '../../src/ledger/json-value.js';
import { RecentKeys } from '../../src/ledger/recent-keys.js';
import { insertOrRead, type NewOperation } from '../../src/ledger/sql/begin.js';
import { newOperation, REQUEST } from '../support/begin-input.js';
import { client, expireApproval, expireLease } from '../support/http.js';
import { createTestApp, type TestApp } from '../support/service.js';

const SCOPE = 'shapes';

const input = (key: string, over: Partial<NewOperation> = {}) => newOperation(SCOPE, key, over);

/** The second-granular countdown may tick between two statements. */
function comparable(row: object | undefined): Record<string, unknown> | undefined {
  if (!row) return row;
  const { leaseSecondsLeft: _s, ...rest } = row as Record<string, unknown>;
  return rest;
}

describe('the two shapes of begin', () => {
  let t: TestApp;
  let api: ReturnType<typeof client>;
  const keys: Record<string, string> = {};

  beforeAll(async () => {
    t = await createTestApp();
    api = client(t.app, SCOPE);
    const body = (key: string, extra: Record<string, unknown> = {}) => ({
      key,
      request: { n: 1 },
      effect: 'non_idempotent_write',
      ...extra,
    });
    const k = (name: string) => {
      keys[name] = `k/${name}`;
      return keys[name];
    };

    const s = await api.begin(body(k('succeeded')));
    await api.complete(keys.succeeded!, s.body.lease.id, 'succeeded', { ok: true });
    const f = await api.begin(body(k('failed')));
    await api.complete(keys.failed!, f.body.lease.id, 'failed', { why: 'no' });
    await api.begin(body(k('in_progress')));
    const r = await api.begin(body(k('ready'), { dispatch: false }));
    await api.release(keys.ready!, r.body.lease.id);
    const u = await api.begin(body(k('outcome_unknown')));
    await api.unknown(keys.outcome_unknown!, u.body.lease.id);
    await api.begin(body(k('lapsed_dispatched')));
    await expireLease(t.db, SCOPE, keys.lapsed_dispatched!);
    await api.begin(body(k('lapsed_undispatched'), { dispatch: false }));
    await expireLease(t.db, SCOPE, keys.lapsed_undispatched!);
    await api.begin(body(k('pending_approval'), { requireApproval: true }));
    await api.begin(body(k('approved'), { requireApproval: true }));
    await api.approve(keys.approved!, {});
    await api.begin(body(k('rejected'), { requireApproval: true }));
    await api.reject(keys.rejected!, { note: 'no' });
    await api.begin(body(k('approval_expired'), { requireApproval: true }));
    await expireApproval(t.db, SCOPE, keys.approval_expired!);
    for (const [name, key] of Object.entries(keys)) {
      expect((await api.get(key)).status, name).toBe(200);
    }
  });
  afterAll(async () => {
    await t?.close();
  });

  it('answer with the same row for a key in every state, whatever the fingerprint', async () => {
    for (const [name, key] of Object.entries(keys)) {
      for (const fingerprint of [fingerprintOf(REQUEST), fingerprintOf('{"n":2}')]) {
        const byInsert = await insertOrRead(t.db, input(key, { fingerprint }), false);
        const byRead = await insertOrRead(t.db, input(key, { fingerprint }), true);
        expect(byInsert?.via, name).toBe('read');
        expect(comparable(byRead), name).toEqual(comparable(byInsert));
      }
    }
  });

  it('both create a new key alike, and neither creates it twice', async () => {
    const a = await insertOrRead(
      t.db,
      input('new/a', { leaseId: '00000000-0000-4000-8000-00000000000a' }),
      false,
    );
    const b = await insertOrRead(
      t.db,
      input('new/b', { leaseId: '00000000-0000-4000-8000-00000000000a' }),
      true,
    );
    expect(a?.via).toBe('written');
    expect(b?.via).toBe('written');
    const strip = (r: object | undefined) => {
      const {
        id: _i,
        key: _k,
        leaseExpiresAt: _l,
        dispatchedAt: _d,
        createdAt: _c,
        updatedAt: _u,
        ...rest
      } = comparable(r) as Record<string, unknown>;
      return rest;
    };
    expect(strip(b)).toEqual(strip(a));
    // Again on the same keys, each the other way round: both now read the row back.
    expect((await insertOrRead(t.db, input('new/a'), true))?.id).toBe(a?.id);
    expect((await insertOrRead(t.db, input('new/b'), false))?.id).toBe(b?.id);
    expect((await api.events('new/a')).body.events).toHaveLength(1);
    expect((await api.events('new/b')).body.events).toHaveLength(1);
  });
});

describe('RecentKeys', () => {
  it('remembers up to its capacity, forgetting the oldest first', () => {
    const r = new RecentKeys(3);
    for (const k of ['a', 'b', 'c']) r.add('s', k);
    expect(['a', 'b', 'c'].map((k) => r.has('s', k))).toEqual([true, true, true]);
    r.add('s', 'a'); // already there: no reordering, no growth
    r.add('s', 'd');
    expect(r.size).toBe(3);
    expect(['a', 'b', 'c', 'd'].map((k) => r.has('s', k))).toEqual([false, true, true, true]);
  });
  it('tells (scope, key) pairs apart whatever they contain', () => {
    const r = new RecentKeys(10);
    r.add('ab', 'c');
    expect(r.has('a', 'bc')).toBe(false);
    expect(r.has('ab', 'c')).toBe(true);
  });
});
