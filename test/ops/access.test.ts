/**
 * Access (contract section 5; drills B2, B3): the cross-tenant matrix over
 * every endpoint, role checks, authentication, public endpoints, actors, and
 * open mode. A denied call is 403 SCOPE_FORBIDDEN or 404 NOT_FOUND, and its
 * response carries nothing of the other tenant: not its key, id, fingerprint,
 * lease id, request, result or metadata.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiKey, hashSecret, newSecret, type Role } from '../../src/auth/keys.js';
import { client, eventCount, type Reply, snapshot } from '../support/http.js';
import { createTestApp, type TestApp } from '../support/service.js';

/** Setup builds databases and fixtures: headroom for a busy machine, not a timing assertion. */
const SETUP_MS = 180_000;

type Api = ReturnType<typeof client>;

const SECRETS: Record<string, string> = {};
function key(name: string, role: Role, scopes: string[]): ApiKey {
  SECRETS[name] = newSecret();
  return { name, role, scopes, sha256: hashSecret(SECRETS[name]!) };
}

// `agent` (no hyphen) is a victim scope on purpose: the pattern `agent-*` must not reach it.
const KEYS: ApiKey[] = [
  key('client-a', 'client', ['agent-a']),
  key('client-pattern', 'client', ['agent-*']),
  key('op-a', 'operator', ['agent-a']),
  key('op-pattern', 'operator', ['agent-*']),
  key('client-b', 'client', ['bank', 'agent']),
  key('op-b', 'operator', ['bank', 'agent']),
];
const ATTACKERS = ['client-a', 'client-pattern', 'op-a', 'op-pattern'] as const;
const VICTIM_SCOPES = ['bank', 'agent'] as const;

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp({ keys: KEYS });
}, SETUP_MS);
afterAll(() => t.close());

const as = (name: string, scope: string) => client(t.app, scope, SECRETS[name]);

/** One of B's operations and every value of it that must never reach another tenant. */
interface Victim {
  scope: string;
  kind: 'running' | 'pending' | 'unknown' | 'done';
  key: string;
  id: string;
  leaseId: string | null;
  request: Record<string, unknown>;
  secrets: string[];
}

async function makeVictim(scope: string, kind: Victim['kind']): Promise<Victim> {
  const tag = randomUUID();
  const k = `vault/${scope}/${kind}/${tag}`;
  const request = { account: `ACCT-${tag}`, memo: `memo-${tag}` };
  const b = as('client-b', scope);
  const r = await b.begin({
    key: k,
    request,
    effect: 'non_idempotent_write',
    owner: `owner-${tag}`,
    metadata: { trace: `trace-${tag}` },
    requireApproval: kind === 'pending',
  });
  expect(r.status).toBe(kind === 'pending' ? 202 : 201);
  const leaseId: string | null = r.body.lease?.id ?? null;
  if (kind === 'unknown') expect((await b.unknown(k, leaseId!)).status).toBe(200);
  if (kind === 'done') {
    expect((await b.complete(k, leaseId!, 'succeeded', { ticket: `TICKET-${tag}` })).status).toBe(200);
  }
  const op = r.body.operation;
  const secrets = [
    k,
    encodeURIComponent(k),
    op.id,
    op.fingerprint,
    op.fingerprint.replace(/^sha256:/, ''),
    request.account,
    request.memo,
    `owner-${tag}`,
    `trace-${tag}`,
    `TICKET-${tag}`,
    tag,
  ];
  if (leaseId) secrets.push(leaseId);
  return { scope, kind, key: k, id: op.id, leaseId, request, secrets };
}

/**
 * The raw response, minus the echo of the path the caller itself sent (the
 * problem's `instance`), contains none of the victim's values; nor do the headers.
 */
function expectNoData(r: Reply, sentPath: string, secrets: string[]): void {
  const scrubbed = r.raw.split(sentPath).join('');
  const headers = JSON.stringify(r.headers);
  for (const s of secrets) {
    expect(scrubbed, `response leaks ${s}`).not.toContain(s);
    expect(headers, `headers leak ${s}`).not.toContain(s);
  }
}

function expectDenied(r: Reply, allowed: Array<403 | 404>): void {
  expect(allowed, `status ${r.status}: ${r.raw}`).toContain(r.status);
  expect(r.headers['content-type']).toContain('application/problem+json');
  expect(r.body.code).toBe(r.status === 403 ? 'SCOPE_FORBIDDEN' : 'NOT_FOUND');
  expect(r.body.operation).toBeUndefined();
}

const opPath = (scope: string, k: string, action = '') =>
  `/v1/scopes/${scope}/operations/${encodeURIComponent(k)}${action ? `/${action}` : ''}`;

/** Every endpoint that names an operation by scope and key, with a body a holder/operator would send. */
function byKeyCalls(v: Victim, leaseId: string) {
  return [
    {
      name: 'begin',
      method: 'POST' as const,
      path: `/v1/scopes/${v.scope}/operations`,
      body: { key: v.key, request: v.request },
    },
    { name: 'get', method: 'GET' as const, path: opPath(v.scope, v.key) },
    { name: 'events', method: 'GET' as const, path: opPath(v.scope, v.key, 'events') },
    {
      name: 'dispatch',
      method: 'POST' as const,
      path: opPath(v.scope, v.key, 'dispatch'),
      body: { leaseId },
    },
    {
      name: 'heartbeat',
      method: 'POST' as const,
      path: opPath(v.scope, v.key, 'heartbeat'),
      body: { leaseId, leaseMs: 60_000 },
    },
    {
      name: 'complete',
      method: 'POST' as const,
      path: opPath(v.scope, v.key, 'complete'),
      body: { leaseId, status: 'succeeded', result: { stolen: true } },
    },
    { name: 'release', method: 'POST' as const, path: opPath(v.scope, v.key, 'release'), body: { leaseId } },
    { name: 'unknown', method: 'POST' as const, path: opPath(v.scope, v.key, 'unknown'), body: { leaseId } },
    { name: 'approve', method: 'POST' as const, path: opPath(v.scope, v.key, 'approve'), body: {} },
    {
      name: 'reject',
      method: 'POST' as const,
      path: opPath(v.scope, v.key, 'reject'),
      body: { note: 'not yours' },
    },
    {
      name: 'resolve',
      method: 'POST' as const,
      path: opPath(v.scope, v.key, 'resolve'),
      body: { status: 'succeeded', note: 'not yours', result: { stolen: true } },
    },
  ];
}

describe('cross-tenant matrix (B2)', () => {
  let victims: Victim[];
  let before: Record<string, unknown>[];
  let eventsBefore: number;

  beforeAll(async () => {
    victims = [];
    for (const scope of VICTIM_SCOPES) {
      for (const kind of ['running', 'pending', 'unknown', 'done'] as const) {
        victims.push(await makeVictim(scope, kind));
      }
    }
    // The attackers' own operations, so their lists are not trivially empty.
    for (const scope of ['agent-a', 'agent-b']) {
      await as('op-pattern', scope).begin({ key: `own/${randomUUID()}`, request: { mine: true } });
    }
    before = (await snapshot(t.db)).filter((r) => VICTIM_SCOPES.includes(r.scope as 'bank'));
    eventsBefore = await eventCount(t.db);
  }, SETUP_MS);

  for (const attacker of ATTACKERS) {
    it(`${attacker}: every by-key endpoint on B's operations is denied with no data of B`, async () => {
      for (const v of victims) {
        // The real lease id (as if leaked) and a guessed one: both denied the same way.
        for (const leaseId of [v.leaseId ?? randomUUID(), randomUUID()]) {
          for (const c of byKeyCalls(v, leaseId)) {
            const api = as(attacker, v.scope);
            const r = await api.call(c.method, c.path, c.body);
            expectDenied(r, [403, 404]);
            expectNoData(r, c.path, v.secrets);
            // No existence oracle: a key B never used is denied identically.
            const ghostKey = `vault/${v.scope}/ghost/${randomUUID()}`;
            const ghost = byKeyCalls({ ...v, key: ghostKey }, leaseId).find((g) => g.name === c.name)!;
            const g = await api.call(ghost.method, ghost.path, ghost.body);
            expect([g.status, g.body.code], `${c.name} on ${v.kind}`).toEqual([r.status, r.body.code]);
            expect(g.body.detail).toBe(r.body.detail);
          }
        }
      }
    });

    it(`${attacker}: get by id of B's operations is 404, the same as an id that never existed`, async () => {
      const api = as(attacker, 'agent-a');
      const missing = await api.getById(randomUUID());
      expectDenied(missing, [404]);
      for (const v of victims) {
        const path = `/v1/operations/${v.id}`;
        const r = await api.call('GET', path);
        expectDenied(r, [404]);
        expect(r.body.detail).toBe(missing.body.detail);
        expectNoData(r, path, v.secrets);
      }
    });

    it(`${attacker}: listing B's scope is denied; listing without a filter shows none of B`, async () => {
      const api = as(attacker, 'agent-a');
      const allSecrets = victims.flatMap((v) => v.secrets);
      for (const scope of VICTIM_SCOPES) {
        for (const q of [
          `scope=${scope}`,
          `scope=${scope}&status=pending_approval`,
          `scope=${scope}&limit=500`,
        ]) {
          const path = `/v1/operations?${q}`;
          const r = await api.call('GET', path);
          expectDenied(r, [403, 404]);
          expectNoData(r, '/v1/operations', allSecrets);
        }
      }
      for (const q of [
        '',
        '?status=pending_approval',
        '?status=outcome_unknown',
        '?effect=non_idempotent_write',
      ]) {
        const r = await api.call('GET', `/v1/operations${q}`);
        expect(r.status).toBe(200);
        expectNoData(r, '', allSecrets);
        for (const item of r.body.items) {
          expect(attacker.endsWith('-a') ? item.scope === 'agent-a' : item.scope.startsWith('agent-')).toBe(
            true,
          );
        }
      }
      // The list does work for the attacker's own scopes.
      const own = await api.call('GET', '/v1/operations');
      expect(own.body.items.length).toBeGreaterThan(0);
    });

    it(`${attacker}: stats is 403 for a client key, and never shows B's scopes to an operator`, async () => {
      const r = await as(attacker, 'agent-a').call('GET', '/v1/stats');
      if (attacker.startsWith('client')) {
        expectDenied(r, [403]);
      } else {
        expect(r.status).toBe(200);
        const scopes = r.body.scopes.map((s: { scope: string }) => s.scope);
        expect(scopes).not.toContain('bank');
        expect(scopes).not.toContain('agent');
        expect(scopes.length).toBeGreaterThan(0);
      }
      expectNoData(r, '/v1/stats', ['"bank"', '"agent"']);
    });
  }

  it("a leaked lease id used under the attacker's own scope reaches nothing of B", async () => {
    for (const v of victims.filter((x) => x.leaseId)) {
      for (const attacker of ATTACKERS) {
        const api = as(attacker, 'agent-a');
        for (const action of ['dispatch', 'heartbeat', 'complete', 'release', 'unknown'] as const) {
          const body =
            action === 'complete' ? { leaseId: v.leaseId, status: 'succeeded' } : { leaseId: v.leaseId };
          const path = opPath('agent-a', v.key, action);
          const r = await api.call('POST', path, body);
          expectDenied(r, [404]);
          expectNoData(r, path, v.secrets);
        }
      }
    }
  });

  it("the same key in the attacker's own scope is a different operation: no replay of B's result", async () => {
    const done = victims.find((v) => v.kind === 'done' && v.scope === 'bank')!;
    const r = await as('client-a', 'agent-a').begin({
      key: done.key,
      request: done.request,
      leaseId: done.leaseId,
    });
    expect(r.status).toBe(201);
    expect(r.body.outcome).toBe('acquired');
    expect(r.body.operation.id).not.toBe(done.id);
    expect(r.body.operation.scope).toBe('agent-a');
    expect(r.body.operation.result).toBeNull();
    expect(r.raw).not.toContain(`TICKET-`);
  });

  it("after the whole matrix B's rows and events are exactly as they were", async () => {
    const after = (await snapshot(t.db)).filter((r) => VICTIM_SCOPES.includes(r.scope as 'bank'));
    expect(after).toEqual(before);
    // Only the attackers' own begins above wrote events.
    const bEvents = await t.db.rows<{ n: number }>(
      sql`SELECT count(*)::int AS n FROM idem_events WHERE scope IN ('bank', 'agent')`,
    );
    expect(bEvents[0]!.n).toBe(
      // created for each victim, + unknown's marked_unknown, + done's completed
      victims.length + 2 * 2,
    );
    expect(await eventCount(t.db)).toBeGreaterThan(eventsBefore);
  });
});

describe('operator endpoints need an operator key (B3)', () => {
  it('a client key calling approve, reject, resolve or stats in its own scope: 403, nothing changes', async () => {
    const b = as('client-b', 'bank');
    const pending = await b.begin({ key: `own/${randomUUID()}`, request: { n: 1 }, requireApproval: true });
    const unk = await b.begin({
      key: `own/${randomUUID()}`,
      request: { n: 2 },
      effect: 'non_idempotent_write',
    });
    await b.unknown(unk.body.operation.key, unk.body.lease.id);
    const before = await snapshot(t.db);
    const calls: [string, Promise<Reply>][] = [
      ['approve', b.approve(pending.body.operation.key)],
      [
        'approve+fp',
        b.approve(pending.body.operation.key, { fingerprint: pending.body.operation.fingerprint }),
      ],
      ['reject', b.reject(pending.body.operation.key, { note: 'self-reject' })],
      ['resolve', b.resolve(unk.body.operation.key, { status: 'succeeded', note: 'I did it' })],
      ['resolve ready', b.resolve(unk.body.operation.key, { status: 'ready', note: 'again' })],
      ['stats', b.call('GET', '/v1/stats')],
    ];
    for (const [name, p] of calls) {
      const r = await p;
      expect(r.status, name).toBe(403);
      expect(r.body).toMatchObject({ code: 'SCOPE_FORBIDDEN', retryable: false });
    }
    expect(await snapshot(t.db)).toEqual(before);
    // The same calls with the operator key of that scope work.
    const op = as('op-b', 'bank');
    expect((await op.approve(pending.body.operation.key)).status).toBe(200);
    expect((await op.resolve(unk.body.operation.key, { status: 'failed', note: 'checked' })).status).toBe(
      200,
    );
    expect((await op.call('GET', '/v1/stats')).status).toBe(200);
  });
});

describe('authentication', () => {
  const k = `auth/${randomUUID()}`;
  const lease = randomUUID();
  const endpoints: [string, 'GET' | 'POST', string, unknown?][] = [
    ['begin', 'POST', '/v1/scopes/bank/operations', { key: k, request: {} }],
    ['get', 'GET', opPath('bank', k)],
    ['get by id', 'GET', `/v1/operations/${randomUUID()}`],
    ['events', 'GET', opPath('bank', k, 'events')],
    ['dispatch', 'POST', opPath('bank', k, 'dispatch'), { leaseId: lease }],
    ['heartbeat', 'POST', opPath('bank', k, 'heartbeat'), { leaseId: lease }],
    ['complete', 'POST', opPath('bank', k, 'complete'), { leaseId: lease, status: 'succeeded' }],
    ['release', 'POST', opPath('bank', k, 'release'), { leaseId: lease }],
    ['unknown', 'POST', opPath('bank', k, 'unknown'), { leaseId: lease }],
    ['approve', 'POST', opPath('bank', k, 'approve'), {}],
    ['reject', 'POST', opPath('bank', k, 'reject'), {}],
    ['resolve', 'POST', opPath('bank', k, 'resolve'), { status: 'ready', note: 'x' }],
    ['list', 'GET', '/v1/operations'],
    ['list scope', 'GET', '/v1/operations?scope=bank'],
    ['stats', 'GET', '/v1/stats'],
  ];
  const headers: [string, string | undefined][] = [
    ['no Authorization header', undefined],
    ['an unknown secret', `Bearer ${newSecret()}`],
    ['the stored hash instead of the secret', `Bearer ${KEYS[5]!.sha256}`],
    ['Bearer without a token', 'Bearer'],
    ['Bearer and a blank', 'Bearer '],
    ['an empty header', ''],
    ['Basic scheme with a real secret', `Basic ${Buffer.from(`op-b:${SECRETS['op-b']}`).toString('base64')}`],
    ['a real secret in the Basic scheme', 'Basic SECRET'],
    ['a real secret with no scheme', 'SECRET'],
    ['two tokens', 'Bearer SECRET SECRET'],
    ['a real secret with a suffix', 'Bearer SECRETx'],
  ];

  for (const [what, header] of headers) {
    it(`${what}: 401 UNAUTHENTICATED on every endpoint, nothing written`, async () => {
      const auth = header?.replaceAll('SECRET', SECRETS['op-b']!);
      const before = await eventCount(t.db);
      for (const [name, method, url, body] of endpoints) {
        const h: Record<string, string> = {};
        if (auth !== undefined) h.authorization = auth;
        if (body !== undefined) h['content-type'] = 'application/json';
        const r = await t.app.inject({ method, url, headers: h, payload: body as object });
        expect(r.statusCode, `${name}: ${r.body}`).toBe(401);
        expect(r.headers['content-type']).toContain('application/problem+json');
        expect(r.json()).toMatchObject({ code: 'UNAUTHENTICATED', status: 401, retryable: false });
        expect(r.body).not.toContain(k);
      }
      expect(await eventCount(t.db)).toBe(before);
    });
  }

  it('the scheme name is case-insensitive (RFC 9110): `bearer <secret>` authenticates', async () => {
    const r = await t.app.inject({
      method: 'GET',
      url: '/v1/stats',
      headers: { authorization: `bearer ${SECRETS['op-b']}` },
    });
    expect(r.statusCode).toBe(200);
  });

  it('public endpoints answer without a key (and with a bad one)', async () => {
    for (const auth of [undefined, 'Bearer nope']) {
      const headers: Record<string, string> = auth ? { authorization: auth } : {};
      const health = await t.app.inject({ method: 'GET', url: '/healthz', headers });
      expect(health.statusCode).toBe(200);
      const ready = await t.app.inject({ method: 'GET', url: '/readyz', headers });
      expect(ready.statusCode).toBe(200);
      const metrics = await t.app.inject({ method: 'GET', url: '/metrics', headers });
      expect(metrics.statusCode).toBe(200);
      expect(metrics.body).toContain('idem_');
      const spec = await t.app.inject({ method: 'GET', url: '/openapi.json', headers });
      expect(spec.statusCode).toBe(200);
      expect(spec.json().openapi).toMatch(/^3\./);
      const docs = await t.app.inject({ method: 'GET', url: '/docs', headers });
      expect(docs.statusCode).toBeLessThan(400);
    }
  });

  it('dot segments after a public prefix do not skip authentication', async () => {
    for (const url of ['/docs/../v1/operations', '/healthz/../v1/operations', '/docs/%2e%2e/v1/stats']) {
      const r = await t.app.inject({ method: 'GET', url });
      expect([401, 404], `${url}: ${r.body}`).toContain(r.statusCode);
      expect(r.body).not.toContain('"items"');
    }
  });
});

describe('actors', () => {
  it("events record the key's name as the actor; approval and resolution record the operator", async () => {
    const c = as('client-b', 'bank');
    const op = as('op-b', 'bank');
    const k1 = `actors/${randomUUID()}`;
    await c.begin({ key: k1, request: { a: 1 }, requireApproval: true });
    const approved = await op.approve(k1, { note: 'looks fine' });
    expect(approved.body.operation.approval).toMatchObject({ state: 'approved', decidedBy: 'op-b' });
    const a = await c.begin({ key: k1, request: { a: 1 }, dispatch: false });
    await c.dispatch(k1, a.body.lease.id);
    await c.unknown(k1, a.body.lease.id);
    const resolved = await op.resolve(k1, {
      status: 'succeeded',
      note: 'checked the bank',
      result: { ok: 1 },
    });
    expect(resolved.body.operation.resolution).toMatchObject({ by: 'op-b', note: 'checked the bank' });
    const ev = (await c.events(k1)).body.events.map((e: { type: string; actor: string }) => [
      e.type,
      e.actor,
    ]);
    expect(ev).toEqual([
      ['created', 'client-b'],
      ['approved', 'op-b'],
      ['acquired', 'client-b'],
      ['dispatched', 'client-b'],
      ['marked_unknown', 'client-b'],
      ['resolved', 'op-b'],
    ]);
  });
});

describe('open mode (no keys configured)', () => {
  let open: TestApp;
  let api: Api;
  beforeAll(async () => {
    open = await createTestApp();
    api = client(open.app, 'anything');
  }, SETUP_MS);
  afterAll(() => open.close());

  it('works without a key and records the actor `anonymous`', async () => {
    const k = `open/${randomUUID()}`;
    const r = await api.begin({ key: k, request: { a: 1 }, requireApproval: true });
    expect(r.status).toBe(202);
    const ok = await api.approve(k, { note: 'open' });
    expect(ok.status).toBe(200);
    expect(ok.body.operation.approval.decidedBy).toBe('anonymous');
    const a = await api.begin({ key: k, request: { a: 1 } });
    expect(a.status).toBe(200);
    expect((await api.complete(k, a.body.lease.id, 'succeeded', 1)).status).toBe(200);
    const ev = (await api.events(k)).body.events;
    expect(ev.map((e: { type: string }) => e.type)).toEqual(['created', 'approved', 'acquired', 'completed']);
    expect(new Set(ev.map((e: { actor: string }) => e.actor))).toEqual(new Set(['anonymous']));
    expect((await api.call('GET', '/v1/stats')).status).toBe(200);
    expect((await api.call('GET', '/v1/operations')).body.items.length).toBeGreaterThan(0);
  });
});
