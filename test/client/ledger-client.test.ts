import { describe, expect, it } from 'vitest';
import { LedgerClient, LedgerError } from '../../src/client/index.js';
import { fetchFailed, operationDoc, type Scripted, scriptedFetch } from './fake-fetch.js';

const KEY = 'session-42/turn-3/call 7%ü?#';
const ENCODED = 'session-42%2Fturn-3%2Fcall%207%25%C3%BC%3F%23';
const LEASE = '11111111-1111-4111-8111-111111111111';

function client(script: Scripted[], extra: { apiKey?: string; validate?: boolean } = {}) {
  const { fetch, seen } = scriptedFetch(script);
  const delays: number[] = [];
  const ledger = new LedgerClient({
    baseUrl: 'http://ledger.test/',
    fetch,
    ...(extra.apiKey ? { apiKey: extra.apiKey } : {}),
    validateResponses: extra.validate ?? false,
    retry: {
      attempts: 4,
      baseMs: 100,
      capMs: 1000,
      random: () => 0.5,
      sleep: async (ms) => {
        delays.push(ms);
      },
    },
  });
  return { ledger, seen, delays };
}

const opResponse = (o: Record<string, unknown> = {}) => ({
  status: 200,
  body: { operation: operationDoc(o) },
});

describe('LedgerClient paths', () => {
  it('percent-encodes the key as one path segment on every per-key endpoint', async () => {
    const calls: [string, (l: LedgerClient) => Promise<unknown>][] = [
      ['', (l) => l.get('agents', KEY)],
      ['/dispatch', (l) => l.dispatch('agents', KEY, LEASE)],
      ['/heartbeat', (l) => l.heartbeat('agents', KEY, LEASE, 5000)],
      ['/complete', (l) => l.complete('agents', KEY, { leaseId: LEASE, status: 'succeeded', result: 1 })],
      ['/release', (l) => l.release('agents', KEY, LEASE)],
      ['/unknown', (l) => l.unknown('agents', KEY, LEASE)],
      ['/approve', (l) => l.approve('agents', KEY, {})],
      ['/reject', (l) => l.reject('agents', KEY, { note: 'no' })],
      ['/resolve', (l) => l.resolve('agents', KEY, { status: 'failed', note: 'n', expectedAttempt: 1 })],
    ];
    for (const [suffix, call] of calls) {
      const { ledger, seen } = client([opResponse()]);
      await call(ledger);
      expect(seen[0]?.url.pathname).toBe(`/v1/scopes/agents/operations/${ENCODED}${suffix}`);
      expect(seen[0]?.method).toBe(suffix === '' ? 'GET' : 'POST');
    }
    const { ledger, seen } = client([{ status: 200, body: { events: [] } }]);
    await ledger.events('agents', KEY);
    expect(seen[0]?.url.pathname).toBe(`/v1/scopes/agents/operations/${ENCODED}/events`);
  });

  it('sends lease-holder bodies as the contract names them', async () => {
    const { ledger, seen } = client([opResponse(), opResponse()]);
    await ledger.heartbeat('agents', 'k', LEASE, 5000);
    await ledger.complete('agents', 'k', { leaseId: LEASE, status: 'failed', result: { code: 'X' } });
    expect(seen.map((s) => s.body)).toEqual([
      { leaseId: LEASE, leaseMs: 5000 },
      { leaseId: LEASE, status: 'failed', result: { code: 'X' } },
    ]);
    expect(seen[0]?.headers.get('content-type')).toBe('application/json');
  });

  it('lists with query parameters and follows cursors', async () => {
    const { ledger, seen } = client([
      { status: 200, body: { items: [operationDoc({ key: 'a' })], nextCursor: 'c1' } },
      { status: 200, body: { items: [operationDoc({ key: 'b' })], nextCursor: null } },
    ]);
    const keys: string[] = [];
    for await (const op of ledger.listAll({ scope: 'agents', status: 'outcome_unknown', limit: 1 }))
      keys.push(op.key);
    expect(keys).toEqual(['a', 'b']);
    expect(seen[0]?.url.search).toBe('?scope=agents&status=outcome_unknown&limit=1');
    expect(seen[1]?.url.searchParams.get('cursor')).toBe('c1');
  });

  it('sends the API key as a bearer token', async () => {
    const { ledger, seen } = client([{ status: 200, body: { scopes: [] } }], { apiKey: 's3cret' });
    await ledger.stats();
    expect(seen[0]?.url.pathname).toBe('/v1/stats');
    expect(seen[0]?.headers.get('authorization')).toBe('Bearer s3cret');
  });
});

describe('LedgerClient begin', () => {
  it('generates a leaseId and sends the same one again after a lost answer', async () => {
    const { ledger, seen, delays } = client([
      { throw: fetchFailed('ECONNRESET') },
      { status: 502, raw: '<html>bad gateway</html>', headers: { 'content-type': 'text/html' } },
      {
        status: 201,
        body: { outcome: 'acquired', operation: operationDoc(), lease: { id: 'x', attempt: 1 } },
      },
    ]);
    const res = await ledger.begin('agents', { key: 'k', request: { a: 1 } });
    expect(res.outcome).toBe('acquired');
    expect(res.httpStatus).toBe(201);
    expect(seen).toHaveLength(3);
    const ids = seen.map((s) => (s.body as { leaseId: string }).leaseId);
    expect(ids[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set(ids).size).toBe(1);
    expect(res.leaseId).toBe(ids[0]);
    expect(delays).toEqual([50, 100]);
  });

  it('answers pending_approval with Retry-After', async () => {
    const { ledger } = client([
      {
        status: 202,
        body: { outcome: 'pending_approval', operation: operationDoc() },
        headers: { 'retry-after': '7' },
      },
    ]);
    const res = await ledger.begin('agents', { key: 'k', request: {}, requireApproval: true });
    expect(res.outcome).toBe('pending_approval');
    expect(res.retryAfterMs).toBe(7000);
  });

  it('turns a problem into a LedgerError and does not retry a 409', async () => {
    const op = operationDoc({ status: 'in_progress' });
    const { ledger, seen } = client([
      {
        status: 409,
        body: {
          type: 'about:blank',
          title: 'busy',
          status: 409,
          code: 'OPERATION_IN_PROGRESS',
          retryable: true,
          operation: op,
        },
        headers: { 'retry-after': '3' },
      },
    ]);
    const err = await ledger.begin('agents', { key: 'k', request: {} }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LedgerError);
    expect(err).toMatchObject({
      status: 409,
      code: 'OPERATION_IN_PROGRESS',
      retryable: true,
      retryAfterMs: 3000,
    });
    expect((err as LedgerError).operation?.id).toBe(op.id);
    expect(seen).toHaveLength(1);
  });

  it('reports the offending field of INVALID_ARGUMENT', async () => {
    const { ledger } = client([
      {
        status: 400,
        body: {
          type: 'x',
          title: 'bad',
          status: 400,
          code: 'INVALID_ARGUMENT',
          retryable: false,
          field: 'key',
        },
      },
    ]);
    await expect(ledger.begin('agents', { key: 'k', request: {} })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      field: 'key',
      retryable: false,
    });
  });
});

describe('LedgerClient retry rule', () => {
  it('retries 503 with capped full-jitter backoff, then gives up after the attempt limit', async () => {
    const unavailable: Scripted = {
      status: 503,
      body: { type: 'x', title: 'down', status: 503, code: 'UNAVAILABLE', retryable: true },
    };
    const { ledger, seen, delays } = client([unavailable, unavailable, unavailable, unavailable]);
    await expect(ledger.get('agents', 'k')).rejects.toMatchObject({ code: 'UNAVAILABLE', status: 503 });
    expect(seen).toHaveLength(4);
    // random() = 0.5 of ceilings 100, 200, 400 (cap 1000).
    expect(delays).toEqual([50, 100, 200]);
  });

  it('uses Retry-After as a floor of the delay, within the cap', async () => {
    const { ledger, delays } = client([
      { status: 503, body: { code: 'UNAVAILABLE', retryable: true }, headers: { 'retry-after': '0' } },
      { status: 503, body: { code: 'UNAVAILABLE', retryable: true }, headers: { 'retry-after': '60' } },
      opResponse(),
    ]);
    await ledger.get('agents', 'k');
    expect(delays).toEqual([50, 1000]);
  });

  it('retries 503 even for operator calls: the contract promises nothing was written', async () => {
    const { ledger, seen } = client([
      { status: 503, body: { code: 'UNAVAILABLE', retryable: true } },
      opResponse(),
    ]);
    await ledger.approve('agents', 'k');
    expect(seen).toHaveLength(2);
  });

  it.each(['approve', 'reject', 'resolve'] as const)(
    'does not repeat %s after a connection reset (it may have been applied)',
    async (action) => {
      const { ledger, seen } = client([{ throw: fetchFailed('ECONNRESET') }, opResponse()]);
      const call =
        action === 'resolve'
          ? ledger.resolve('agents', 'k', { status: 'succeeded', note: 'n' })
          : ledger[action]('agents', 'k', {});
      const err = await call.catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'TRANSPORT', status: 0, maybeApplied: true });
      expect(seen).toHaveLength(1);
    },
  );

  it('repeats an operator call whose connection was refused (it never left)', async () => {
    const { ledger, seen } = client([{ throw: fetchFailed('ECONNREFUSED') }, opResponse()]);
    await ledger.resolve('agents', 'k', { status: 'failed', note: 'n', expectedAttempt: 2 });
    expect(seen).toHaveLength(2);
    expect(seen[1]?.body).toEqual(seen[0]?.body);
  });

  it.each(['dispatch', 'heartbeat', 'release', 'unknown'] as const)(
    'repeats %s with the same lease after a lost answer',
    async (action) => {
      const { ledger, seen } = client([{ throw: fetchFailed('ECONNRESET') }, opResponse()]);
      await ledger[action]('agents', 'k', LEASE);
      expect(seen).toHaveLength(2);
      expect(seen[1]?.body).toEqual(seen[0]?.body);
    },
  );

  it('stops at once when the caller cancels', async () => {
    const controller = new AbortController();
    const { fetch } = scriptedFetch([]);
    const ledger = new LedgerClient({
      baseUrl: 'http://ledger.test',
      fetch: (async (input: string | URL | Request, init?: RequestInit) => {
        controller.abort(new Error('stop'));
        return fetch(input, init);
      }) as typeof fetch,
      retry: { sleep: async () => {} },
    });
    await expect(ledger.get('agents', 'k', { signal: controller.signal })).rejects.toThrow('stop');
  });

  it('refuses a 2xx body that is not JSON or not the contract shape', async () => {
    const { ledger } = client([{ status: 200, raw: 'ok', headers: { 'content-type': 'text/plain' } }]);
    await expect(ledger.get('agents', 'k')).rejects.toMatchObject({ code: 'BAD_RESPONSE' });
    const strict = client([{ status: 200, body: { operation: { id: 'x' } } }], { validate: true });
    await expect(strict.ledger.get('agents', 'k')).rejects.toMatchObject({ code: 'BAD_RESPONSE' });
  });
});
