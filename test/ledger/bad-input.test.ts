/**
 * Drill B1 (docs/drills.md) for every endpoint that exists: begin, get by key, get
 * by id, dispatch, heartbeat, complete, release, unknown, events. Every bad
 * request must get a 4xx RFC 9457 problem with a `code` and `retryable`, never
 * a 5xx, never a stack trace or SQL text, and must write NOTHING: the rows and
 * the events are compared before and after each call.
 *
 * Lease-holder cases aim at a live, undispatched lease with its real lease id,
 * so that a bad body the service wrongly accepted would show up as a write.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, expireLease, snapshot } from '../support/http.js';
import { createTestApp, type TestApp } from '../support/service.js';

let t: TestApp;
let api: ReturnType<typeof client>;

/** The live lease every lease-holder case aims at, and a terminal operation. */
const F = { key: '', leaseId: '', id: '', doneKey: '' };

beforeAll(async () => {
  t = await createTestApp();
  api = client(t.app);
  F.key = `bad-input/live/${randomUUID()}`;
  const live = await api.begin({ key: F.key, request: { a: 1 }, dispatch: false, leaseMs: 3_600_000 });
  expect(live.status).toBe(201);
  F.leaseId = live.body.lease.id;
  F.id = live.body.operation.id;
  // A mix of other states, so "nothing written" covers them too.
  F.doneKey = `bad-input/done/${randomUUID()}`;
  const done = await api.begin({ key: F.doneKey, request: {} });
  await api.complete(F.doneKey, done.body.lease.id, 'succeeded', { ok: true });
  const expired = `bad-input/expired/${randomUUID()}`;
  await api.begin({ key: expired, request: {}, effect: 'non_idempotent_write' });
  await expireLease(t.db, 'orders', expired);
  await api.begin({ key: `bad-input/pending/${randomUUID()}`, request: {}, requireApproval: true });
  await client(t.app, 'other-tenant').begin({ key: F.key, request: { b: 2 } });
});
afterAll(() => t.close());

// ---------------------------------------------------------------------------
// Requests

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH';
type Payload = string | Buffer | Record<string, unknown> | unknown[] | number | boolean | null;

interface BadCase {
  name: string;
  method: Method;
  /** Built inside the test: the fixture exists by then. */
  url: () => string;
  body?: () => Payload;
  /** `null`: send no content-type header at all. Default: application/json when there is a body. */
  contentType?: string | null;
  /** Where the contract pins it. */
  status?: number;
  code?: string;
  /** The field the problem must name (INVALID_ARGUMENT "names the field"). */
  field?: string | string[];
}

const enc = encodeURIComponent;
const BEGIN_URL = () => '/v1/scopes/orders/operations';
const holderUrl = (action: string, key = F.key) => `/v1/scopes/orders/operations/${enc(key)}/${action}`;

async function send(c: BadCase): Promise<LightMyRequestResponse> {
  const headers: Record<string, string> = {};
  const body = c.body?.();
  let payload: string | Buffer | undefined;
  if (body !== undefined) {
    payload = typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
    if (c.contentType !== null) headers['content-type'] = c.contentType ?? 'application/json';
  }
  return t.app.inject({
    method: c.method,
    url: c.url(),
    headers,
    ...(payload !== undefined ? { payload } : {}),
  });
}

async function world() {
  return {
    rows: await snapshot(t.db),
    events: await t.db.rows(sql`SELECT * FROM idem_events ORDER BY scope, key, version, at, id`),
  };
}

/** Anything that smells of internals: stack frames, SQL, driver or engine messages. */
const LEAKS = [
  /\bat [\w$.<>]+ \(/, // a stack frame
  /\bat (file:\/\/|\/|node:)/,
  /node_modules/,
  /\/work\//,
  /\.ts:\d+/,
  /\b(SELECT|INSERT|UPDATE|DELETE)\b[\s\S]*\b(FROM|INTO|SET|WHERE)\b/,
  /idem_operations|idem_events/,
  /\bSQLSTATE\b|\bsyntax error at\b|\bviolates\b|\brelation "/i,
  /invalid byte sequence|invalid input syntax|unsupported Unicode escape/i,
  /\bpg\b|postgres|pglite|drizzle/i,
  /RangeError|TypeError|ReferenceError|Maximum call stack/,
];

function expectRefused(c: BadCase, r: LightMyRequestResponse): void {
  const raw = r.body;
  expect(r.statusCode, `${c.name}: ${raw.slice(0, 500)}`).toBeGreaterThanOrEqual(400);
  expect(r.statusCode, `${c.name}: ${raw.slice(0, 500)}`).toBeLessThan(500);
  expect(r.headers['content-type'], c.name).toContain('application/problem+json');
  const body = JSON.parse(raw);
  expect(typeof body.code, c.name).toBe('string');
  expect(body.code, c.name).toMatch(/^[A-Z][A-Z0-9_]*$/);
  expect(typeof body.retryable, c.name).toBe('boolean');
  expect(body.retryable, c.name).toBe(false);
  expect(body.status, c.name).toBe(r.statusCode);
  for (const leak of LEAKS) expect(raw, `${c.name} leaks ${leak}`).not.toMatch(leak);
  // A lease id is a secret: a refusal never echoes one.
  expect(raw).not.toContain(F.leaseId);
  if (c.status !== undefined) expect(r.statusCode, `${c.name}: ${raw.slice(0, 500)}`).toBe(c.status);
  if (c.code !== undefined) expect(body.code, c.name).toBe(c.code);
  if (c.field !== undefined) {
    const names = Array.isArray(c.field) ? c.field : [c.field];
    const field = String(body.field);
    expect(
      names.some((n) => field === n || field.startsWith(`${n}.`) || field.startsWith(`${n}/`)),
      `${c.name}: field ${field}, expected ${names.join(' or ')}`,
    ).toBe(true);
  }
}

// ---------------------------------------------------------------------------
// Values

const KiB = 1024;
const deep = (levels: number, leaf: unknown = 1): string => {
  return `${'['.repeat(levels)}${JSON.stringify(leaf)}${']'.repeat(levels)}`;
};
const deepObject = (levels: number): string => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;
const k = () => `bad-input/${randomUUID()}`;
/** A begin body, as JSON text, with `extra` members spliced in verbatim. */
const beginText = (extra: string, key = k()) => `{"key":${JSON.stringify(key)},${extra}}`;
const validBegin = (extra: Record<string, unknown> = {}) => ({ key: k(), request: { a: 1 }, ...extra });
/** The body with `text` in its free-text member: request, result, else the lease id. */
function withText(body: Record<string, unknown>, text: string): Record<string, unknown> {
  if ('request' in body) return { ...body, request: { note: text } };
  if ('status' in body) return { ...body, result: { note: text } };
  return { ...body, leaseId: text };
}

const MALFORMED_JSON: [string, string][] = [
  ['truncated JSON', '{"key":"a","request":'],
  ['an unquoted key', '{key:"a",request:{}}'],
  ['single quotes', "{'key':'a','request':{}}"],
  ['a trailing comma', '{"key":"a","request":{},}'],
  ['two documents', '{"key":"a","request":{}}{"key":"b"}'],
  ['NaN', '{"key":"a","request":NaN}'],
  ['a comment', '{"key":"a", /* x */ "request":{}}'],
  ['a raw control character in a string', '{"key":"a\u0001b","request":{}}'],
  ['a raw NUL byte in a string', '{"key":"a\u0000b","request":{}}'],
  ['a bad escape', '{"key":"a\\xb","request":{}}'],
  ['unbalanced brackets', '{"key":"a","request":[1,2}'],
  ['only whitespace', ' \n\t '],
  ['a BOM and nothing else', '\ufeff'],
  ['1000 unclosed arrays', '['.repeat(1000)],
];

const NOT_AN_OBJECT: [string, string][] = [
  ['null', 'null'],
  ['an array', '[]'],
  ['a string', '"key"'],
  ['a number', '42'],
  ['true', 'true'],
];

/** Invalid UTF-8 sequences inside an otherwise valid JSON string. */
const BAD_UTF8: [string, number[]][] = [
  ['a lone 0xFF byte', [0xff]],
  ['a lone continuation byte', [0x80]],
  ['an overlong "/" (C0 AF)', [0xc0, 0xaf]],
  ['a truncated 3-byte sequence', [0xe2, 0x82]],
  ['an encoded surrogate (ED A0 80)', [0xed, 0xa0, 0x80]],
  ['a code point beyond U+10FFFF (F4 90 80 80)', [0xf4, 0x90, 0x80, 0x80]],
];
const withBytes = (before: string, bytes: number[], after: string) =>
  Buffer.concat([Buffer.from(before, 'utf8'), Buffer.from(bytes), Buffer.from(after, 'utf8')]);

const BAD_KEYS: [string, string][] = [
  ['an empty key', ''],
  ['a 256-character key', 'k'.repeat(256)],
  ['a 10,000-character key', 'k'.repeat(10_000)],
  ['NUL in the key', 'a\u0000b'],
  ['U+0001 in the key', 'a\u0001b'],
  ['a newline in the key', 'a\nb'],
  ['a tab in the key', 'a\tb'],
  ['U+001F in the key', 'a\u001fb'],
  ['DEL (U+007F) in the key', 'a\u007fb'],
  ['a lone high surrogate in the key', 'a\ud800b'],
  ['a lone low surrogate in the key', 'a\udc00b'],
];

const BAD_UUIDS: [string, unknown][] = [
  ['not a uuid', 'not-a-uuid'],
  ['an empty string', ''],
  ['a uuid with a trailing space', `${randomUUID()} `],
  ['a uuid in braces', `{${randomUUID()}}`],
  ['a uuid one character short', randomUUID().slice(0, 35)],
  ['a uuid with a non-hex digit', `g${randomUUID().slice(1)}`],
  ['a SQL injection attempt', "' OR '1'='1"],
  ['a number', 123],
  ['null', null],
  ['true', true],
  ['an array', [randomUUID()]],
  ['an object', { id: randomUUID() }],
];

// ---------------------------------------------------------------------------
// The cases

function bodyCases(endpoint: string, url: () => string, valid: () => Record<string, unknown>): BadCase[] {
  const post = (c: Omit<BadCase, 'method' | 'url'>): BadCase => ({
    method: 'POST',
    url,
    ...c,
    name: `${endpoint}: ${c.name}`,
  });
  const cases: BadCase[] = [];
  for (const [name, text] of MALFORMED_JSON) {
    cases.push(
      post({ name: `malformed JSON (${name})`, body: () => text, status: 400, code: 'INVALID_ARGUMENT' }),
    );
  }
  for (const [name, text] of NOT_AN_OBJECT) {
    cases.push(
      post({ name: `the body is ${name}`, body: () => text, status: 400, code: 'INVALID_ARGUMENT' }),
    );
  }
  for (const [name, bytes] of BAD_UTF8) {
    cases.push(
      post({
        name: `invalid UTF-8 in the body (${name})`,
        body: () => {
          // In a free-text member where the endpoint has one (request, result),
          // so the bytes themselves are the only thing wrong.
          const [before, after] = JSON.stringify(withText(valid(), 'MARK')).split('MARK');
          return withBytes(`${before}a`, bytes, `b${after}`);
        },
        status: 400,
        code: 'INVALID_ARGUMENT',
      }),
    );
  }
  cases.push(
    post({ name: 'an empty body', body: () => '', status: 400, code: 'INVALID_ARGUMENT' }),
    post({ name: 'no body and no content type', status: 400, code: 'INVALID_ARGUMENT' }),
    post({
      name: 'wrong content type (text/plain)',
      body: () => JSON.stringify(valid()),
      contentType: 'text/plain',
    }),
    post({
      name: 'no content type',
      body: () => JSON.stringify(valid()),
      contentType: null,
    }),
    post({
      name: 'wrong content type (form)',
      body: () => new URLSearchParams(valid() as Record<string, string>).toString(),
      contentType: 'application/x-www-form-urlencoded',
    }),
    post({
      name: 'wrong content type (multipart)',
      body: () => '--x\r\nContent-Disposition: form-data; name="key"\r\n\r\na\r\n--x--\r\n',
      contentType: 'multipart/form-data; boundary=x',
    }),
    post({
      name: 'wrong content type (application/xml)',
      body: () => '<key>a</key>',
      contentType: 'application/xml',
    }),
    post({
      name: 'an oversize body (> 512 KiB)',
      body: () => ({ ...valid(), zzz: 'x'.repeat(600 * KiB) }),
      status: 413,
      code: 'PAYLOAD_TOO_LARGE',
    }),
    post({
      name: 'an oversize body of whitespace (512 KiB + 1 byte)',
      body: () => {
        const text = JSON.stringify(valid());
        return `${text}${' '.repeat(512 * KiB + 1 - text.length)}`;
      },
      status: 413,
      code: 'PAYLOAD_TOO_LARGE',
    }),
    post({
      name: 'a 1000-level nested array as the whole body',
      body: () => deep(1000),
      status: 400,
      code: 'INVALID_ARGUMENT',
    }),
    post({
      name: 'a 1000-level nested unknown field',
      body: () => JSON.stringify(valid()).replace(/^\{/, `{"nested":${deepObject(1000)},`),
      status: 400,
      code: 'INVALID_ARGUMENT',
    }),
    post({
      name: 'a 20,000-level nested unknown field',
      body: () => JSON.stringify(valid()).replace(/^\{/, `{"nested":${deep(20_000)},`),
      status: 400,
      code: 'INVALID_ARGUMENT',
    }),
    post({
      name: 'prototype poisoning (__proto__)',
      body: () => JSON.stringify(valid()).replace(/^\{/, '{"__proto__":{"status":"succeeded"},'),
      status: 400,
      code: 'INVALID_ARGUMENT',
    }),
    post({
      name: 'prototype poisoning (constructor.prototype)',
      body: () => JSON.stringify(valid()).replace(/^\{/, '{"constructor":{"prototype":{"status":"x"}},'),
      status: 400,
      code: 'INVALID_ARGUMENT',
    }),
  );
  return cases;
}

function beginCases(): BadCase[] {
  const post = (c: Omit<BadCase, 'method' | 'url'>): BadCase => ({
    method: 'POST',
    url: BEGIN_URL,
    status: 400,
    code: 'INVALID_ARGUMENT',
    ...c,
    name: `begin: ${c.name}`,
  });
  const cases: BadCase[] = [...bodyCases('begin', BEGIN_URL, validBegin)];

  // Missing and wrongly typed fields.
  cases.push(
    post({ name: 'missing key', body: () => ({ request: { a: 1 } }), field: 'key' }),
    post({ name: 'an empty object', body: () => ({}), field: ['key', 'request', 'fingerprint'] }),
    post({
      name: 'neither request nor fingerprint',
      body: () => ({ key: k() }),
      field: ['request', 'fingerprint'],
    }),
    post({
      name: 'both request and fingerprint',
      body: () => ({ key: k(), request: { a: 1 }, fingerprint: 'fp-1' }),
      field: ['request', 'fingerprint'],
    }),
  );
  for (const [name, key] of [
    ['a number', 42],
    ['null', null],
    ['an array', ['a']],
    ['an object', { k: 'a' }],
    ['true', true],
  ] as const) {
    cases.push(post({ name: `key is ${name}`, body: () => ({ key, request: {} }), field: 'key' }));
  }
  for (const [name, key] of BAD_KEYS) {
    cases.push(post({ name: `${name} (in the body)`, body: () => ({ key, request: {} }), field: 'key' }));
  }

  const fields: [string, string, unknown][] = [
    ['fingerprint', 'empty', ''],
    ['fingerprint', '129 characters', 'f'.repeat(129)],
    ['fingerprint', 'non-ASCII', 'empreinte-é'],
    ['fingerprint', 'a tab', 'a\tb'],
    ['fingerprint', 'NUL', 'a\u0000b'],
    ['fingerprint', 'a number', 5],
    ['effect', 'unknown', 'write'],
    ['effect', 'a number', 1],
    ['effect', 'null', null],
    ['effect', 'another case', 'READ'],
    ['leaseMs', 'below 1000', 999],
    ['leaseMs', 'zero', 0],
    ['leaseMs', 'negative', -1],
    ['leaseMs', 'above 3600000', 3_600_001],
    ['leaseMs', 'a fraction', 1500.5],
    ['leaseMs', 'a string', '30000'],
    ['leaseMs', 'null', null],
    ['leaseMs', 'beyond 2^53', 2 ** 53 + 2],
    ['retentionMs', 'below 1 h', 3_599_999],
    ['retentionMs', 'above 30 d', 2_592_000_001],
    ['retentionMs', 'zero', 0],
    ['retentionMs', 'a string', '86400000'],
    ['approvalTimeoutMs', 'below 1000', 999],
    ['approvalTimeoutMs', 'above 30 d', 2_592_000_001],
    ['approvalTimeoutMs', 'negative', -86_400_000],
    ['approvalTimeoutMs', 'a string', '1000'],
    ['dispatch', 'a string', 'true'],
    ['dispatch', 'a number', 1],
    ['requireApproval', 'a string', 'false'],
    ['storeRequest', 'a number', 0],
    ['owner', 'empty', ''],
    ['owner', '201 characters', 'o'.repeat(201)],
    ['owner', 'a number', 7],
    ['owner', 'NUL', 'worker\u00007'],
    ['owner', 'a lone surrogate', 'worker\ud8007'],
    ['metadata', 'an array', ['a']],
    ['metadata', 'a string', 'tool'],
    ['metadata', 'null', null],
    ['metadata', 'NUL in a value', { tool: 'a\u0000b' }],
    ['metadata', 'NUL in a member name', { 'a\u0000b': 1 }],
    ['metadata', 'a lone surrogate', { tool: '\udfff' }],
    ['metadata', 'an integer beyond 2^53', { n: 2 ** 53 + 2 }],
    ['request', 'NUL in a string', { note: 'a\u0000b' }],
    ['request', 'NUL in a member name', { 'a\u0000': 1 }],
    ['request', 'a lone high surrogate', { note: 'x\ud83dy' }],
    ['request', 'a lone low surrogate as a member name', { '\ude00': 1 }],
    ['request', 'a lone surrogate as the whole value', '\ud800'],
    ['request', 'an integer beyond 2^53', { amount: 2 ** 53 + 2 }],
    ['request', 'a negative integer beyond -2^53', { amount: -(2 ** 53) - 2 }],
    ['leaseId', 'not a uuid', 'lease-1'],
    ['leaseId', 'a number', 1],
  ];
  for (const [field, what, value] of fields) {
    const body = () => {
      const b: Record<string, unknown> = { key: k(), request: { a: 1 } };
      if (field === 'fingerprint') delete b.request;
      b[field] = value;
      return b;
    };
    cases.push(post({ name: `${field}: ${what}`, body, field }));
  }
  // Values JSON.stringify cannot write: sent as text.
  cases.push(
    post({
      name: 'request: an integer beyond 2^53 (as written)',
      body: () => beginText('"request":{"amount":9007199254740993}'),
      field: 'request',
    }),
    post({
      name: 'request: 1e400 (not finite)',
      body: () => beginText('"request":{"n":1e400}'),
      field: 'request',
    }),
    post({ name: 'leaseMs: 1e400', body: () => beginText('"request":{},"leaseMs":1e400'), field: 'leaseMs' }),
    post({
      name: 'request: 1000 levels of arrays',
      body: () => beginText(`"request":${deep(1000)}`),
      field: 'request',
    }),
    post({
      name: 'request: 1000 levels of objects',
      body: () => beginText(`"request":${deepObject(1000)}`),
      field: 'request',
    }),
    post({
      name: 'metadata: 1000 levels',
      body: () => beginText(`"request":{},"metadata":{"m":${deep(1000)}}`),
      field: 'metadata',
    }),
    post({
      name: 'request: a lone surrogate escape',
      body: () => beginText('"request":{"s":"\\udc00"}'),
      field: 'request',
    }),
    post({
      name: 'request: a NUL escape',
      body: () => beginText('"request":{"s":"\\u0000"}'),
      field: 'request',
    }),
  );

  // Mass assignment: the client never sets server-owned fields.
  for (const [field, value] of [
    ['status', 'succeeded'],
    ['attempt', 7],
    ['lease', { id: randomUUID(), expiresAt: '2099-01-01T00:00:00Z' }],
    ['result', { paid: true }],
    ['createdAt', '2000-01-01T00:00:00Z'],
    ['updatedAt', '2000-01-01T00:00:00Z'],
    ['completedAt', '2000-01-01T00:00:00Z'],
    ['retainedUntil', '2099-01-01T00:00:00Z'],
    ['id', randomUUID()],
    ['scope', 'other-tenant'],
    ['version', 99],
    ['approval', { state: 'approved' }],
    ['resolution', { by: 'me', note: 'x' }],
    ['dispatchedAt', '2000-01-01T00:00:00Z'],
  ] as const) {
    cases.push(
      post({ name: `mass assignment of ${field}`, body: () => validBegin({ [field]: value }), field }),
    );
  }

  // Limits (section 4): the canonical request, metadata.
  cases.push(
    post({
      name: 'request canonical form > 64 KiB',
      body: () => validBegin({ request: { s: 'x'.repeat(64 * KiB) } }),
      status: 413,
      code: 'PAYLOAD_TOO_LARGE',
    }),
    post({
      name: 'request canonical form of many small members > 64 KiB',
      body: () =>
        validBegin({ request: Object.fromEntries(Array.from({ length: 9000 }, (_, i) => [`k${i}`, i])) }),
      status: 413,
      code: 'PAYLOAD_TOO_LARGE',
    }),
    post({
      name: 'metadata > 16 KiB',
      body: () => validBegin({ metadata: { preview: 'x'.repeat(16 * KiB) } }),
      status: 413,
      code: 'PAYLOAD_TOO_LARGE',
    }),
  );

  // Bad scopes in the path.
  for (const [name, scope] of [
    ['with an encoded /', enc('a/b')],
    ['129 characters', 's'.repeat(129)],
    ['starting with a dot', '.orders'],
    ['starting with a dash', '-orders'],
    ['with a space', enc('or ders')],
    ['non-ASCII', enc('ordérs')],
    ['with NUL', '%00orders'],
    ['with a newline', 'orders%0A'],
    ['10,000 characters', 's'.repeat(10_000)],
    ['empty', ''],
  ] as const) {
    cases.push({
      name: `begin: a scope ${name}`,
      method: 'POST',
      url: () => `/v1/scopes/${scope}/operations`,
      body: () => validBegin(),
    });
  }
  cases.push({
    name: 'begin: a scope with a raw /',
    method: 'POST',
    url: () => '/v1/scopes/a/b/operations',
    body: () => validBegin(),
  });
  return cases;
}

const HOLDER_ACTIONS = ['dispatch', 'heartbeat', 'complete', 'release', 'unknown'] as const;
type Action = (typeof HOLDER_ACTIONS)[number];

function validHolder(action: Action): Record<string, unknown> {
  if (action === 'complete') return { leaseId: F.leaseId, status: 'succeeded', result: { ok: 1 } };
  if (action === 'heartbeat') return { leaseId: F.leaseId, leaseMs: 60_000 };
  return { leaseId: F.leaseId };
}

function holderCases(action: Action): BadCase[] {
  const url = () => holderUrl(action);
  const post = (c: Omit<BadCase, 'method' | 'url'>): BadCase => ({
    method: 'POST',
    url,
    status: 400,
    code: 'INVALID_ARGUMENT',
    ...c,
    name: `${action}: ${c.name}`,
  });
  const valid = () => validHolder(action);
  const cases: BadCase[] = [...bodyCases(action, url, valid)];
  cases.push(
    post({ name: 'missing leaseId', body: () => ({ ...valid(), leaseId: undefined }), field: 'leaseId' }),
  );
  for (const [name, value] of BAD_UUIDS) {
    cases.push(
      post({ name: `leaseId is ${name}`, body: () => ({ ...valid(), leaseId: value }), field: 'leaseId' }),
    );
  }
  for (const [field, value] of [
    ['status', 'succeeded'],
    ['attempt', 2],
    ['expiresAt', '2099-01-01T00:00:00Z'],
    ['lease', { id: F.leaseId }],
    ['dispatchedAt', '2000-01-01T00:00:00Z'],
    ['completedAt', '2000-01-01T00:00:00Z'],
    ['createdAt', '2000-01-01T00:00:00Z'],
    ['key', 'another'],
    ['result', { x: 1 }],
    ['leaseMs', 60_000],
  ] as const) {
    // Members the endpoint does take are not unknown to it.
    if (field in valid()) continue;
    if (action === 'complete' && (field === 'status' || field === 'result')) continue;
    cases.push(post({ name: `unknown field ${field}`, body: () => ({ ...valid(), [field]: value }), field }));
  }
  if (action === 'heartbeat') {
    for (const [what, value] of [
      ['below 1000', 999],
      ['above 3600000', 3_600_001],
      ['zero', 0],
      ['a fraction', 2000.5],
      ['a string', '60000'],
      ['null', null],
      ['beyond 2^53', 2 ** 53 + 2],
    ] as const) {
      cases.push(
        post({ name: `leaseMs ${what}`, body: () => ({ ...valid(), leaseMs: value }), field: 'leaseMs' }),
      );
    }
  }
  if (action === 'complete') {
    cases.push(
      post({ name: 'missing status', body: () => ({ leaseId: F.leaseId, result: 1 }), field: 'status' }),
      post({
        name: 'result > 256 KiB',
        body: () => ({ ...valid(), result: { s: 'x'.repeat(256 * KiB) } }),
        status: 413,
        code: 'PAYLOAD_TOO_LARGE',
      }),
      post({
        name: 'result: 1000 levels',
        body: () => `{"leaseId":"${F.leaseId}","status":"succeeded","result":${deep(1000)}}`,
        field: 'result',
      }),
      post({
        name: 'result: an integer beyond 2^53',
        body: () => `{"leaseId":"${F.leaseId}","status":"succeeded","result":{"n":9007199254740993}}`,
        field: 'result',
      }),
      post({
        name: 'result: NUL in a string',
        body: () => ({ ...valid(), result: 'a\u0000b' }),
        field: 'result',
      }),
      post({
        name: 'result: NUL in a member name',
        body: () => ({ ...valid(), result: { '\u0000': 1 } }),
        field: 'result',
      }),
      post({
        name: 'result: a lone surrogate',
        body: () => ({ ...valid(), result: { e: '\ud800' } }),
        field: 'result',
      }),
    );
    for (const [what, value] of [
      ['ready', 'ready'],
      ['in_progress', 'in_progress'],
      ['outcome_unknown', 'outcome_unknown'],
      ['rejected', 'rejected'],
      ['SUCCEEDED', 'SUCCEEDED'],
      ['a number', 1],
      ['null', null],
    ] as const) {
      cases.push(
        post({ name: `status ${what}`, body: () => ({ ...valid(), status: value }), field: 'status' }),
      );
    }
  }
  return cases;
}

/** Bad keys, scopes and ids in the URL, for every endpoint that has one. */
function urlCases(): BadCase[] {
  const cases: BadCase[] = [];
  const keyEndpoints: [
    string,
    Method,
    (key: string, scope?: string) => string,
    (() => Payload) | undefined,
  ][] = [
    ['get by key', 'GET', (key, scope = 'orders') => `/v1/scopes/${scope}/operations/${key}`, undefined],
    ['events', 'GET', (key, scope = 'orders') => `/v1/scopes/${scope}/operations/${key}/events`, undefined],
    ...HOLDER_ACTIONS.map((a): [string, Method, (key: string, scope?: string) => string, () => Payload] => [
      a,
      'POST',
      (key, scope = 'orders') => `/v1/scopes/${scope}/operations/${key}/${a}`,
      () => validHolder(a),
    ]),
  ];
  const keys: [string, string][] = [
    ...BAD_KEYS.filter(([, key]) => key !== '' && key.isWellFormed()).map(([name, key]): [string, string] => [
      name,
      enc(key),
    ]),
    ['an encoded lone surrogate (ED A0 80)', '%ED%A0%80'],
    ['an invalid percent escape', 'a%ZZb'],
    ['a truncated percent escape', 'a%E2%82'],
    ['a bare %', 'a%'],
    ['an overlong encoding', '%C0%AF'],
  ];
  const scopes: [string, string][] = [
    ['with an encoded /', enc('a/b')],
    ['129 characters', 's'.repeat(129)],
    ['starting with a dot', '.orders'],
    ['with NUL', 'orders%00'],
    ['10,000 characters', 's'.repeat(10_000)],
  ];
  for (const [endpoint, method, url, body] of keyEndpoints) {
    for (const [name, key] of keys) {
      cases.push({ name: `${endpoint}: ${name} in the URL`, method, url: () => url(key), body });
    }
    for (const [name, scope] of scopes) {
      cases.push({ name: `${endpoint}: a scope ${name}`, method, url: () => url(enc(F.key), scope), body });
    }
  }
  for (const [name, id] of BAD_UUIDS) {
    if (typeof id !== 'string' || id === '') continue;
    cases.push({ name: `get by id: ${name}`, method: 'GET', url: () => `/v1/operations/${enc(id)}` });
  }
  cases.push(
    {
      name: 'get by id: 10,000 characters',
      method: 'GET',
      url: () => `/v1/operations/${'a'.repeat(10_000)}`,
    },
    { name: 'get by id: NUL', method: 'GET', url: () => `/v1/operations/${F.id.slice(0, 35)}%00` },
    {
      name: 'get by id: invalid percent escape',
      method: 'GET',
      url: () => `/v1/operations/%ZZ${F.id.slice(3)}`,
    },
    { name: 'get by id: a uuid with a path after it', method: 'GET', url: () => `/v1/operations/${F.id}/x` },
  );
  // Methods the endpoints do not take.
  cases.push(
    { name: 'PUT on begin', method: 'PUT', url: BEGIN_URL, body: () => validBegin() },
    {
      name: 'DELETE an operation',
      method: 'DELETE',
      url: () => `/v1/scopes/orders/operations/${enc(F.key)}`,
    },
    {
      name: 'PATCH an operation',
      method: 'PATCH',
      url: () => `/v1/scopes/orders/operations/${enc(F.key)}`,
      body: () => ({ status: 'succeeded' }),
    },
    { name: 'DELETE by id', method: 'DELETE', url: () => `/v1/operations/${F.id}` },
    {
      name: 'POST to events',
      method: 'POST',
      url: () => `/v1/scopes/orders/operations/${enc(F.key)}/events`,
      body: () => ({}),
    },
    { name: 'GET complete', method: 'GET', url: () => holderUrl('complete') },
  );
  return cases;
}

const ALL: BadCase[] = [...beginCases(), ...HOLDER_ACTIONS.flatMap(holderCases), ...urlCases()];

describe('B1: bad input is refused with a 4xx problem and writes nothing', () => {
  it('has distinct case names', () => {
    const names = ALL.map((c) => c.name);
    expect(names.filter((n, i) => names.indexOf(n) !== i)).toEqual([]);
  });

  for (const c of ALL) {
    it(c.name, async () => {
      const before = await world();
      const r = await send(c);
      expectRefused(c, r);
      const after = await world();
      expect(after.rows).toEqual(before.rows);
      expect(after.events).toEqual(before.events);
    });
  }

  it('the service is still up and the fixture lease still works', async () => {
    const r = await api.heartbeat(F.key, F.leaseId, 3_600_000);
    expect(r.status, r.raw).toBe(200);
    const b = await api.begin(validBegin());
    expect(b.status, b.raw).toBe(201);
  });
});

describe('limits are where the contract puts them (the valid side of each boundary)', () => {
  it('a 255-character key is accepted, in the body and in the URL', async () => {
    const key = `${randomUUID()}${'k'.repeat(255 - 36)}`;
    expect((await api.begin({ key, request: {} })).status).toBe(201);
    expect((await api.get(key)).status).toBe(200);
  });

  it('a key of 255 characters outside the BMP (510 UTF-16 units) is accepted', async () => {
    const key = '\u{1F600}'.repeat(255);
    expect([...key]).toHaveLength(255);
    const r = await api.begin({ key, request: {} });
    expect(r.status, r.raw).toBe(201);
    expect((await api.get(key)).body.operation.key).toBe(key);
  });

  it('a request whose canonical form is exactly 64 KiB is accepted; one byte more is 413', async () => {
    // {"s":"..."} is 8 bytes around the string.
    const ok = await api.begin({ key: k(), request: { s: 'x'.repeat(64 * KiB - 8) } });
    expect(ok.status, ok.raw.slice(0, 300)).toBe(201);
    const r = await api.begin({ key: k(), request: { s: 'x'.repeat(64 * KiB - 7) } });
    expect(r.status).toBe(413);
    expect(r.body.code).toBe('PAYLOAD_TOO_LARGE');
  });

  it('the canonical form is what counts: a padded request under 64 KiB canonical is accepted', async () => {
    const pad = ' '.repeat(70 * KiB);
    const text = `{"key":"${k()}","request":{${pad}"a"${pad}:${pad}1${pad}}}`;
    const r = await api.call('POST', '/v1/scopes/orders/operations', text);
    expect(r.status, r.raw.slice(0, 300)).toBe(201);
  });

  it('metadata of exactly 16 KiB is accepted; one byte more is 413', async () => {
    const ok = await api.begin({ key: k(), request: {}, metadata: { s: 'x'.repeat(16 * KiB - 8) } });
    expect(ok.status, ok.raw.slice(0, 300)).toBe(201);
    const r = await api.begin({ key: k(), request: {}, metadata: { s: 'x'.repeat(16 * KiB - 7) } });
    expect(r.status).toBe(413);
  });

  it('a result of exactly 256 KiB is accepted; one byte more is 413', async () => {
    const a = await api.begin({ key: k(), request: {} });
    const tooBig = await api.complete(
      a.body.operation.key,
      a.body.lease.id,
      'succeeded',
      'x'.repeat(256 * KiB - 1),
    );
    expect(tooBig.status).toBe(413);
    expect((await api.get(a.body.operation.key)).body.operation.status).toBe('in_progress');
    // A JSON string's canonical form is the characters plus two quotes.
    const ok = await api.complete(
      a.body.operation.key,
      a.body.lease.id,
      'succeeded',
      'x'.repeat(256 * KiB - 2),
    );
    expect(ok.status, ok.raw.slice(0, 300)).toBe(200);
  });

  it('a body of exactly 512 KiB is accepted', async () => {
    const text = JSON.stringify({ key: k(), request: { a: 1 } });
    const r = await api.call(
      'POST',
      '/v1/scopes/orders/operations',
      `${text}${' '.repeat(512 * KiB - text.length)}`,
    );
    expect(r.status, r.raw.slice(0, 300)).toBe(201);
  });

  it('range ends of leaseMs, retentionMs and approvalTimeoutMs are accepted', async () => {
    for (const extra of [
      { leaseMs: 1000 },
      { leaseMs: 3_600_000 },
      { retentionMs: 3_600_000 },
      { retentionMs: 2_592_000_000 },
      { requireApproval: true, approvalTimeoutMs: 1000 },
      { requireApproval: true, approvalTimeoutMs: 2_592_000_000 },
    ]) {
      const r = await api.begin(validBegin(extra));
      expect(r.status, `${JSON.stringify(extra)}: ${r.raw}`).toBeLessThan(300);
    }
  });

  it('integers up to 2^53 - 1, a 128-character fingerprint and a 128-character scope are accepted', async () => {
    expect((await api.begin(validBegin({ request: { n: 2 ** 53 - 1, m: -(2 ** 53 - 1) } }))).status).toBe(
      201,
    );
    expect((await api.begin({ key: k(), fingerprint: 'f'.repeat(128) })).status).toBe(201);
    const scope = `S${'s'.repeat(127)}`;
    const r = await client(t.app, scope).begin(validBegin());
    expect(r.status, r.raw).toBe(201);
    expect(r.body.operation.scope).toBe(scope);
  });

  // "All bodies are JSON": a media type parameter does not make JSON something else.
  for (const contentType of [
    'application/json; charset=utf-8',
    'application/json;charset=UTF-8',
    'application/merge-patch+json',
    'Application/JSON',
  ]) {
    it(`content type ${contentType} is JSON`, async () => {
      const r = await t.app.inject({
        method: 'POST',
        url: BEGIN_URL(),
        headers: { 'content-type': contentType },
        payload: JSON.stringify(validBegin()),
      });
      expect(r.statusCode, r.body).toBe(201);
    });
  }
});
