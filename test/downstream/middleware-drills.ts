/**
 * The drills of issue 10's table, as one suite run against each adapter
 * (fastify, express) over the real ledger service on real HTTP, counting
 * tickets at the service.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fingerprintOf } from '../../src/downstream/core.js';
import { type Ledger, SETUP_TIMEOUT_MS, startLedger } from '../client/support.js';
import type { DrillApp, DrillAppFactory } from './apps.js';

export interface Sent {
  status: number;
  headers: Headers;
  bytes: Buffer;
  json: Record<string, unknown>;
}

export async function post(
  url: string,
  path: string,
  body: unknown,
  key?: string,
  raw?: string,
): Promise<Sent> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (key !== undefined) headers['idempotency-key'] = key;
  const res = await fetch(`${url}${path}`, { method: 'POST', headers, body: raw ?? JSON.stringify(body) });
  const bytes = Buffer.from(await res.arrayBuffer());
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(bytes.toString('utf8'));
  } catch {}
  return { status: res.status, headers: res.headers, bytes, json };
}

const k = () => `drill-${randomUUID()}`;

/** Resolves once the ledger shows the operation in progress (the first request holds it). */
async function held(L: Ledger, scope: string, key: string): Promise<void> {
  for (let i = 0; i < 400; i++) {
    const op = await L.ledger.get(scope, key).catch(() => undefined);
    if (op?.status === 'in_progress') return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`${key} never got in progress`);
}

function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => {
    open = r;
  });
  return { wait, open };
}

export function describeMiddlewareDrills(name: string, start: DrillAppFactory): void {
  let L: Ledger;
  let svc: DrillApp;
  const SCOPE = 'drills';
  beforeAll(async () => {
    L = await startLedger();
    svc = await start({ ledger: L.ledger, scope: SCOPE });
  }, SETUP_TIMEOUT_MS);
  afterAll(async () => {
    await svc?.close();
    await L?.close();
  });

  describe(`${name}: the drills of issue 10`, () => {
    it('retry after completion: the stored response byte for byte, Location kept, Set-Cookie never, Idempotent-Replayed', async () => {
      const key = k();
      const first = await post(svc.url, '/tickets', { title: 'printer' }, key);
      expect(first.status).toBe(201);
      expect(first.headers.get('set-cookie')).toBe('session=secret');
      const again = await post(svc.url, '/tickets', { title: 'printer' }, key);
      expect(again.status).toBe(201);
      expect(again.bytes.equals(first.bytes)).toBe(true);
      expect(again.headers.get('location')).toBe(first.headers.get('location'));
      expect(again.headers.get('content-type')).toBe(first.headers.get('content-type'));
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.headers.get('set-cookie')).toBeNull();
      expect(first.headers.get('idempotent-replayed')).toBeNull();
      expect(svc.state.ticketsOf(key)).toHaveLength(1);
      expect(svc.state.runs.get(key)).toBe(1);
    });

    it('response lost, same key again: one ticket, the replay is the stored ticket', async () => {
      const key = k();
      svc.state.loseResponse.add(key);
      await expect(post(svc.url, '/tickets', { title: 'lost' }, key)).rejects.toThrow();
      const again = await post(svc.url, '/tickets', { title: 'lost' }, key);
      expect(again.status).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(svc.state.ticketsOf(key)).toEqual([again.json]);
      expect(again.headers.get('location')).toBe(`/tickets/${again.json.id}`);
      expect((await L.ledger.get(SCOPE, key)).status).toBe('succeeded');
    });

    it('same key, other body: 422 KEY_REUSED, the handler does not run, and the original still replays', async () => {
      const key = k();
      const first = await post(svc.url, '/tickets', { title: 'A' }, key);
      const other = await post(svc.url, '/tickets', { title: 'B' }, key);
      expect(other.status).toBe(422);
      expect(other.headers.get('content-type')).toContain('application/problem+json');
      expect(other.json).toMatchObject({ code: 'KEY_REUSED', retryable: false, status: 422 });
      const again = await post(svc.url, '/tickets', { title: 'A' }, key);
      expect(again.bytes.equals(first.bytes)).toBe(true);
      expect(svc.state.ticketsOf(key).map((t) => t.title)).toEqual(['A']);
      expect(svc.state.runs.get(key)).toBe(1);
    });

    it('same JSON with its keys reordered: a replay (RFC 8785 fingerprint)', async () => {
      const key = k();
      const first = await post(svc.url, '/tickets', undefined, key, '{"title":"x","note":{"a":1,"b":2}}');
      const again = await post(
        svc.url,
        '/tickets',
        undefined,
        key,
        '{ "note": {"b":2, "a":1}, "title": "x" }',
      );
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.bytes.equals(first.bytes)).toBe(true);
      expect(svc.state.ticketsOf(key)).toHaveLength(1);
    });

    it('two at once: the second gets 409 OPERATION_IN_PROGRESS with Retry-After; one ticket', async () => {
      const key = k();
      const g = gate();
      svc.state.gate.set(key, g.wait);
      const first = post(svc.url, '/tickets', { title: 'race' }, key);
      await held(L, SCOPE, key);
      const second = await post(svc.url, '/tickets', { title: 'race' }, key);
      expect(second.status).toBe(409);
      expect(second.json).toMatchObject({ code: 'OPERATION_IN_PROGRESS', retryable: true });
      expect(Number(second.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      g.open();
      expect((await first).status).toBe(201);
      expect(svc.state.ticketsOf(key)).toHaveLength(1);
      expect(svc.state.runs.get(key)).toBe(1);
    });

    it('20 pairs sent at the same moment, 500 ms handler: never two tickets for one key', async () => {
      svc.state.handlerDelayMs = 500;
      try {
        const keys = Array.from({ length: 20 }, () => k());
        const answers = await Promise.all(
          keys.flatMap((key) => [
            post(svc.url, '/tickets', { title: 'pair' }, key),
            post(svc.url, '/tickets', { title: 'pair' }, key),
          ]),
        );
        for (const key of keys) expect(svc.state.ticketsOf(key)).toHaveLength(1);
        // Each loser was told to wait, or (when it came after) got the replay.
        for (const a of answers.filter((x) => x.status !== 201)) {
          expect(a.status).toBe(409);
          expect(a.json.code).toBe('OPERATION_IN_PROGRESS');
          expect(a.headers.get('retry-after')).not.toBeNull();
        }
      } finally {
        svc.state.handlerDelayMs = 0;
      }
    });

    it('write, then throw: one ticket, outcome_unknown, 409 OUTCOME_UNKNOWN (retryable false), never rerun', async () => {
      const key = k();
      svc.state.throwAfterWrite.add(key);
      const first = await post(svc.url, '/tickets', { title: 'boom' }, key);
      expect(first.status).toBe(500);
      svc.state.throwAfterWrite.delete(key);
      for (let i = 0; i < 2; i++) {
        const again = await post(svc.url, '/tickets', { title: 'boom' }, key);
        expect(again.status).toBe(409);
        expect(again.json).toMatchObject({ code: 'OUTCOME_UNKNOWN', retryable: false });
      }
      expect((await L.ledger.get(SCOPE, key)).status).toBe('outcome_unknown');
      expect(svc.state.ticketsOf(key)).toHaveLength(1);
      expect(svc.state.runs.get(key)).toBe(1);
    });

    it('an error marked notApplied releases the operation: the retry runs, one ticket', async () => {
      const key = k();
      svc.state.throwNotApplied.add(key);
      expect((await post(svc.url, '/tickets', { title: 'n' }, key)).status).toBe(500);
      expect((await L.ledger.get(SCOPE, key)).status).toBe('ready');
      svc.state.throwNotApplied.delete(key);
      expect((await post(svc.url, '/tickets', { title: 'n' }, key)).status).toBe(201);
      expect(svc.state.ticketsOf(key)).toHaveLength(1);
    });

    it('a 5xx of an idempotent_write route releases: the retry runs again and is stored', async () => {
      const key = k();
      svc.state.fail503.add(key);
      expect((await post(svc.url, '/refresh', {}, key)).status).toBe(503);
      expect((await L.ledger.get(SCOPE, key)).status).toBe('ready');
      const second = await post(svc.url, '/refresh', {}, key);
      expect(second).toMatchObject({ status: 200, json: { refreshed: true } });
      expect((await post(svc.url, '/refresh', {}, key)).headers.get('idempotent-replayed')).toBe('true');
      expect(svc.state.runs.get(key)).toBe(2);
    });

    it('an idempotent_write whose holder died: once its lease runs out the next request runs it, recovered', async () => {
      const key = k();
      // What a crashed replica of this service left: a dispatched lease on the same fingerprint.
      const fingerprint = fingerprintOf({ method: 'POST', route: '/refresh', body: {} });
      await L.ledger.begin(SCOPE, {
        key,
        fingerprint,
        effect: 'idempotent_write',
        leaseMs: 1000,
        dispatch: true,
      });
      let r = await post(svc.url, '/refresh', {}, key);
      for (let i = 0; r.status === 409 && r.json.code === 'OPERATION_IN_PROGRESS' && i < 200; i++) {
        await new Promise((res) => setTimeout(res, 50));
        r = await post(svc.url, '/refresh', {}, key);
      }
      expect(r).toMatchObject({ status: 200, json: { refreshed: true, attempt: 2, recovered: true } });
      expect(svc.state.runs.get(key)).toBe(1);
    });

    it('no key on a required route: 400 IDEMPOTENCY_KEY_MISSING; on an optional route it runs unguarded', async () => {
      const before = svc.state.tickets.length;
      const r = await post(svc.url, '/tickets', { title: 'nokey' });
      expect(r.status).toBe(400);
      expect(r.json).toMatchObject({ code: 'IDEMPOTENCY_KEY_MISSING', retryable: false });
      expect(svc.state.tickets.length).toBe(before);
      expect((await post(svc.url, '/echo', {})).json).toEqual({ idempotency: null });
    });

    it.each([
      ['an unterminated sf-string', '"abc'],
      ['two keys', 'a, b'],
      ['256 characters', 'x'.repeat(256)],
      ['an empty sf-string', '""'],
    ])('a malformed key (%s): 400 IDEMPOTENCY_KEY_INVALID, nothing runs', async (_what, bad) => {
      const before = svc.state.tickets.length;
      const r = await post(svc.url, '/tickets', { title: 'bad' }, bad);
      expect(r.status).toBe(400);
      expect(r.json).toMatchObject({ code: 'IDEMPOTENCY_KEY_INVALID' });
      expect(svc.state.tickets.length).toBe(before);
    });

    it('an sf-string key names the operation by its content; request.idempotency is what the handler sees', async () => {
      const inner = k();
      const r = await post(svc.url, '/echo', { a: 1 }, `"${inner}"`);
      expect(r.json.idempotency).toMatchObject({ key: inner, scope: SCOPE, attempt: 1, recovered: false });
      const op = await L.ledger.get(SCOPE, inner);
      expect((r.json.idempotency as { operationId: string }).operationId).toBe(op.id);
      expect(op.metadata).toEqual({ method: 'POST', route: '/echo' });
    });

    it('a method outside the defaults (PUT) is intercepted where the route configures idempotency; route pattern fingerprinted', async () => {
      const key = k();
      const send = () =>
        fetch(`${svc.url}/things/42`, {
          method: 'PUT',
          headers: { 'content-type': 'application/json', 'idempotency-key': key },
          body: '{}',
        });
      expect((await send()).headers.get('idempotent-replayed')).toBeNull();
      expect((await send()).headers.get('idempotent-replayed')).toBe('true');
      expect(svc.state.runs.get(key)).toBe(1);
      expect((await L.ledger.get(SCOPE, key)).metadata).toEqual({ method: 'PUT', route: '/things/:id' });
    });

    it('GET is never intercepted, even with a key', async () => {
      const key = k();
      const res = await fetch(`${svc.url}/tickets/none`, { headers: { 'idempotency-key': key } });
      expect(res.status).toBe(404);
      expect(svc.state.runs.get(key)).toBe(1);
      await expect(L.ledger.get(SCOPE, key)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    });

    it('a handler running past a third of its lease heartbeats it, and completes', async () => {
      const key = k();
      const g = gate();
      svc.state.gate.set(key, g.wait);
      const pending = post(svc.url, '/slow', {}, key);
      await held(L, SCOPE, key);
      const firstExpiry = (await L.ledger.get(SCOPE, key)).lease?.expiresAt as string;
      for (let i = 0; ; i++) {
        const op = await L.ledger.get(SCOPE, key);
        if (op.lease && op.lease.expiresAt > firstExpiry) break;
        if (i > 400) throw new Error('never heartbeated');
        await new Promise((r) => setTimeout(r, 25));
      }
      g.open();
      expect((await pending).status).toBe(200);
      expect((await L.ledger.get(SCOPE, key)).status).toBe('succeeded');
    });

    it('logs name the key but never contain a stored body', async () => {
      const key = k();
      const secret = `body-secret-${randomUUID()}`;
      await post(svc.url, '/tickets', { title: secret }, key);
      await post(svc.url, '/tickets', { title: secret }, key);
      const mine = svc.state.logs.filter((l) => l.includes(key));
      expect(mine.length).toBeGreaterThan(0);
      expect(svc.state.logs.some((l) => l.includes(secret))).toBe(false);
    });
  });

  describe(`${name}: the ledger cannot be reached`, () => {
    let down: DrillApp;
    let open: DrillApp;
    beforeAll(async () => {
      // A port nothing listens on; the client gives up at once.
      const dead = L.client({ baseUrl: 'http://127.0.0.1:9', retry: { attempts: 1 } });
      down = await start({ ledger: dead, scope: SCOPE });
      open = await start({ ledger: dead, scope: SCOPE, failOpen: true });
    }, SETUP_TIMEOUT_MS);
    afterAll(async () => {
      await down?.close();
      await open?.close();
    });

    it('fail closed: 503 UNAVAILABLE, the handler does not run', async () => {
      const key = k();
      const r = await post(down.url, '/tickets', { title: 'x' }, key);
      expect(r.status).toBe(503);
      expect(r.json).toMatchObject({ code: 'UNAVAILABLE', retryable: true });
      expect(down.state.runs.get(key)).toBeUndefined();
    });

    it('failOpen: true runs the handler unguarded, and says so in the log', async () => {
      const key = k();
      const r = await post(open.url, '/tickets', { title: 'x' }, key);
      expect(r.status).toBe(201);
      expect(open.state.ticketsOf(key)).toHaveLength(1);
      expect(open.state.logs.some((l) => l.includes(key) && l.includes('failOpen'))).toBe(true);
    });
  });
}
