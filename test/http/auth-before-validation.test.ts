/**
 * Authorization comes before validation (issue 8): whatever the body (valid,
 * malformed JSON, invalid fields, no body at all), an anonymous call is 401,
 * a client key on an operator endpoint is 403, and a key calling a scope it
 * may not use is 403. Before, a bad body answered 400 first and told a caller
 * without the right what the endpoint expects.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiKey, hashSecret, newSecret, type Role } from '../../src/auth/keys.js';
import { snapshot } from '../support/http.js';
import { createTestApp, type TestApp } from '../support/service.js';

const SECRETS: Record<string, string> = {};
function key(name: string, role: Role, scopes: string[]): ApiKey {
  SECRETS[name] = newSecret();
  return { name, role, scopes, sha256: hashSecret(SECRETS[name]!) };
}

let t: TestApp;
let pendingKey = '';
beforeAll(async () => {
  t = await createTestApp({
    keys: [key('client', 'client', ['orders']), key('operator', 'operator', ['orders'])],
  });
  pendingKey = `auth-first/${randomUUID()}`;
  const r = await t.app.inject({
    method: 'POST',
    url: '/v1/scopes/orders/operations',
    headers: { authorization: `Bearer ${SECRETS.client}` },
    payload: { key: pendingKey, request: {}, requireApproval: true },
  });
  expect(r.statusCode, r.body).toBe(202);
});
afterAll(() => t.close());

/** Bodies that each fail validation or parsing in a different place. */
const BODIES: [string, string | undefined][] = [
  ['malformed JSON', '{"note":'],
  ['invalid UTF-8', '{"note":"\xff"}'],
  ['an unknown field', '{"zzz":1}'],
  ['a wrongly typed field', '{"note":42,"status":7}'],
  ['a NUL in a note', '{"note":"a\\u0000b","status":"failed"}'],
  ['an array', '[]'],
  ['an empty body', ''],
  ['no body', undefined],
];

const op = (scope: string, action: string) =>
  `/v1/scopes/${scope}/operations/${encodeURIComponent(pendingKey)}/${action}`;

async function call(method: 'GET' | 'POST', url: string, body: string | undefined, who?: string) {
  const headers: Record<string, string> = {};
  if (who) headers.authorization = `Bearer ${SECRETS[who]}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  return t.app.inject({
    method,
    url,
    headers,
    ...(body !== undefined ? { payload: Buffer.from(body, 'latin1') } : {}),
  });
}

function expectProblem(r: Awaited<ReturnType<typeof call>>, status: number, code: string, what: string) {
  expect(r.statusCode, `${what}: ${r.body}`).toBe(status);
  expect(r.headers['content-type'], what).toContain('application/problem+json');
  expect(r.json().code, what).toBe(code);
}

describe('operator endpoints: 403 for a client key, 401 without a key, whatever the body', () => {
  for (const action of ['approve', 'reject', 'resolve']) {
    for (const [what, body] of BODIES) {
      it(`${action} with ${what}`, async () => {
        const before = await snapshot(t.db);
        expectProblem(await call('POST', op('orders', action), body, 'client'), 403, 'SCOPE_FORBIDDEN', what);
        expectProblem(await call('POST', op('orders', action), body), 401, 'UNAUTHENTICATED', what);
        expect(await snapshot(t.db)).toEqual(before);
      });
    }
  }

  it('stats, with a query string and a body it does not take', async () => {
    expectProblem(await call('GET', '/v1/stats?zzz=1', undefined, 'client'), 403, 'SCOPE_FORBIDDEN', 'stats');
    expectProblem(await call('GET', '/v1/stats?zzz=1', undefined), 401, 'UNAUTHENTICATED', 'stats');
  });

  it('the operator key gets past authorization to validation (the same bodies are 400)', async () => {
    for (const [what, body] of BODIES.slice(0, 5)) {
      expectProblem(
        await call('POST', op('orders', 'resolve'), body, 'operator'),
        400,
        'INVALID_ARGUMENT',
        what,
      );
    }
  });
});

describe('client endpoints: a scope the key may not use is 403 whatever the body', () => {
  const endpoints: [string, 'GET' | 'POST', string][] = [
    ['begin', 'POST', '/v1/scopes/bank/operations'],
    ...['dispatch', 'heartbeat', 'complete', 'release', 'unknown', 'approve', 'reject', 'resolve'].map(
      (a): [string, 'GET' | 'POST', string] => [a, 'POST', op('bank', a)],
    ),
  ];
  for (const [name, method, url] of endpoints) {
    it(name, async () => {
      for (const [what, body] of BODIES) {
        for (const who of ['client', 'operator']) {
          expectProblem(await call(method, url, body, who), 403, 'SCOPE_FORBIDDEN', `${who}, ${what}`);
        }
        expectProblem(await call(method, url, body), 401, 'UNAUTHENTICATED', what);
      }
    });
  }

  it('the list with a forbidden scope and an invalid limit', async () => {
    const url = '/v1/operations?scope=bank&limit=abc';
    expectProblem(await call('GET', url, undefined, 'client'), 403, 'SCOPE_FORBIDDEN', 'list');
    expectProblem(await call('GET', url, undefined), 401, 'UNAUTHENTICATED', 'list');
  });
});
