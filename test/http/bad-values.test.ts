/**
 * Values the schema used to let through to Postgres, each of which answered
 * 500 (issue 8): NUL and lone surrogates in any text field, integers beyond
 * their column, non-finite numbers, date-times `Date.parse` cannot read, and
 * crafted list cursors. Each is now 400 INVALID_ARGUMENT naming the field,
 * and writes nothing.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, type Reply, snapshot } from '../support/http.js';
import { createTestApp, type TestApp } from '../support/service.js';

let t: TestApp;
let api: ReturnType<typeof client>;
/** A pending approval (approve, reject) and an outcome_unknown operation (resolve), both live. */
const F = { pending: '', unknown: '', unknownLease: '', live: '', liveLease: '' };

beforeAll(async () => {
  t = await createTestApp();
  api = client(t.app);
  F.pending = `bad-values/pending/${randomUUID()}`;
  expect((await api.begin({ key: F.pending, request: {}, requireApproval: true })).status).toBe(202);
  F.unknown = `bad-values/unknown/${randomUUID()}`;
  const u = await api.begin({ key: F.unknown, request: {} });
  F.unknownLease = u.body.lease.id;
  expect((await api.unknown(F.unknown, F.unknownLease)).status).toBe(200);
  F.live = `bad-values/live/${randomUUID()}`;
  const l = await api.begin({ key: F.live, request: {}, leaseMs: 3_600_000 });
  F.liveLease = l.body.lease.id;
});
afterAll(() => t.close());

const enc = encodeURIComponent;
const op = (key: string, action: string) => `/v1/scopes/orders/operations/${enc(key)}/${action}`;

async function expectRefused(send: () => Promise<Reply>, field: string, what: string): Promise<void> {
  const before = await snapshot(t.db);
  const r = await send();
  expect(r.status, `${what}: ${r.raw}`).toBe(400);
  expect(r.headers['content-type'], what).toContain('application/problem+json');
  expect(r.body.code, what).toBe('INVALID_ARGUMENT');
  expect(r.body.retryable, what).toBe(false);
  expect(r.body.field, what).toBe(field);
  expect(await snapshot(t.db), `${what} wrote nothing`).toEqual(before);
}

const BAD_TEXT: [string, string][] = [
  ['NUL', 'a\u0000b'],
  ['a lone high surrogate', 'a\ud800b'],
  ['a lone low surrogate', '\udfff'],
];

describe('one text rule for every string field: no NUL, well-formed Unicode', () => {
  /** [endpoint, field, body with the text in it, url]. */
  const fields: [string, string, (s: string) => Record<string, unknown>, () => string][] = [
    ['approve', 'note', (s) => ({ note: s }), () => op(F.pending, 'approve')],
    ['reject', 'note', (s) => ({ note: s }), () => op(F.pending, 'reject')],
    ['resolve', 'note', (s) => ({ status: 'failed', note: s }), () => op(F.unknown, 'resolve')],
    [
      'begin',
      'owner',
      (s) => ({ key: `bv/${randomUUID()}`, request: {}, owner: s }),
      () => '/v1/scopes/orders/operations',
    ],
    [
      'begin',
      'metadata',
      (s) => ({ key: `bv/${randomUUID()}`, request: {}, metadata: { t: s } }),
      () => '/v1/scopes/orders/operations',
    ],
    [
      'begin',
      'request',
      (s) => ({ key: `bv/${randomUUID()}`, request: [{ deep: [s] }] }),
      () => '/v1/scopes/orders/operations',
    ],
    ['release', 'reason', (s) => ({ leaseId: F.liveLease, reason: s }), () => op(F.live, 'release')],
    ['unknown', 'reason', (s) => ({ leaseId: F.liveLease, reason: s }), () => op(F.live, 'unknown')],
    [
      'complete',
      'result',
      (s) => ({ leaseId: F.liveLease, status: 'failed', result: { [s]: 1 } }),
      () => op(F.live, 'complete'),
    ],
  ];
  for (const [endpoint, field, body, url] of fields) {
    it(`${endpoint} ${field}`, async () => {
      for (const [what, s] of BAD_TEXT) {
        await expectRefused(
          () => api.call('POST', url(), body(s)),
          field,
          `${endpoint} ${field} with ${what}`,
        );
      }
    });
  }

  it('the query string and the path: cursor and status with NUL, an id with NUL', async () => {
    await expectRefused(() => api.call('GET', '/v1/operations?cursor=a%00b'), 'cursor', 'cursor with NUL');
    await expectRefused(() => api.call('GET', '/v1/operations?status=ready%00'), 'status', 'status with NUL');
  });

  it('the same notes without the bad character are accepted', async () => {
    const r = await api.resolve(F.unknown, {
      status: 'failed',
      note: 'checked upstream: never sent \u{1F600}',
    });
    expect(r.status, r.raw).toBe(200);
  });
});

describe('every integer has a bound, and non-finite numbers are refused', () => {
  const resolveKey = () => F.unknown;
  const asText = (n: string) => `{"status":"ready","note":"n","expectedAttempt":${n}}`;
  for (const n of ['2147483648', '1e20', '9007199254740993', '1e400', '-1e400', '-1']) {
    it(`resolve expectedAttempt ${n}`, async () => {
      await expectRefused(
        () => api.call('POST', op(resolveKey(), 'resolve'), asText(n)),
        'expectedAttempt',
        `expectedAttempt ${n}`,
      );
    });
  }
  it('expectedAttempt 2147483647 is in range (and simply not the current attempt)', async () => {
    const k = `bv/attempt/${randomUUID()}`;
    const b = await api.begin({ key: k, request: {} });
    await api.unknown(k, b.body.lease.id);
    const r = await api.resolve(k, { status: 'ready', note: 'n', expectedAttempt: 2_147_483_647 });
    expect(r.status, r.raw).toBe(409);
  });
  for (const [field, n] of [
    ['leaseMs', '1e400'],
    ['retentionMs', '1e400'],
    ['approvalTimeoutMs', '-1e400'],
  ] as const) {
    it(`begin ${field} ${n}`, async () => {
      await expectRefused(
        () =>
          api.call(
            'POST',
            '/v1/scopes/orders/operations',
            `{"key":"bv/${randomUUID()}","request":{},"${field}":${n}}`,
          ),
        field,
        `${field} ${n}`,
      );
    });
  }
  it('heartbeat leaseMs 1e400', async () => {
    await expectRefused(
      () => api.call('POST', op(F.live, 'heartbeat'), `{"leaseId":"${F.liveLease}","leaseMs":1e400}`),
      'leaseMs',
      'heartbeat leaseMs',
    );
  });
  for (const n of ['1e400', '1e20', '0', '501', '9007199254740993']) {
    it(`list limit ${n}`, async () => {
      await expectRefused(() => api.call('GET', `/v1/operations?limit=${n}`), 'limit', `limit ${n}`);
    });
  }
});

describe('createdBefore: RFC 3339 that JavaScript cannot read is refused', () => {
  for (const v of ['2016-12-31T23:59:60Z', '2020-01-01T00:00:00+00', '2020-02-30T00:00:00Z', 'yesterday']) {
    it(v, async () => {
      await expectRefused(
        () => api.call('GET', `/v1/operations?createdBefore=${enc(v)}`),
        'createdBefore',
        v,
      );
    });
  }
  it('readable ones are accepted, with any offset', async () => {
    for (const v of [
      '2999-01-01T00:00:00Z',
      '2999-01-01T00:00:00.123456+05:30',
      '1970-01-01T00:00:00-00:00',
    ]) {
      const r = await api.call('GET', `/v1/operations?createdBefore=${enc(v)}`);
      expect(r.status, `${v}: ${r.raw}`).toBe(200);
    }
  });
});

describe('crafted list cursors are 400, never a database error', () => {
  const b64 = (s: string) => Buffer.from(s).toString('base64url');
  for (const [what, cursor] of [
    ['a time beyond bigint', b64(`99999999999999999999.${randomUUID()}`)],
    ['a time beyond any timestamp', b64(`9223372036854775807.${randomUUID()}`)],
    ['36 dashes for an id', b64(`1.${'-'.repeat(36)}`)],
    ['an id of the right length but not a uuid', b64(`1.${'a'.repeat(36)}`)],
    ['a negative time', b64(`-1.${randomUUID()}`)],
    ['no separator', b64(randomUUID())],
    ['not base64url', '!!!'],
  ] as const) {
    it(what, async () => {
      await expectRefused(() => api.call('GET', `/v1/operations?cursor=${enc(cursor)}`), 'cursor', what);
    });
  }
  it('a cursor the service issued still pages', async () => {
    for (let i = 0; i < 3; i++) await api.begin({ key: `bv/page/${randomUUID()}`, request: {} });
    const first = await api.call('GET', '/v1/operations?limit=2');
    expect(first.status, first.raw).toBe(200);
    expect(first.body.nextCursor).toEqual(expect.any(String));
    const next = await api.call('GET', `/v1/operations?limit=2&cursor=${enc(first.body.nextCursor)}`);
    expect(next.status, next.raw).toBe(200);
    expect(next.body.items[0].id).not.toBe(first.body.items[1].id);
  });
});
