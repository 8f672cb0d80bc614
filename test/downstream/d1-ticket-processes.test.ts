/**
 * Drill D1 (seed 002, docs/drills.md) with the ticket service as a real process on
 * idem/fastify: over the remote ledger (tickets in a file) and on idem/pg
 * (tickets in a table committed with the stored response). SIGKILL before
 * the write, after it and after the commit, a restart of every process;
 * each ends with exactly one ticket and its stored result readable.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Ticket } from '../../examples/ticket-service/ticket-store.js';
import { LedgerClient } from '../../src/client/index.js';
import { SETUP_TIMEOUT_MS } from '../client/support.js';
import { onPostgres } from '../support/engine.js';
import { type RunningService, startService } from '../support/service.js';
import { tempDir } from '../support/temp-dir.js';
import { post, type Sent } from './middleware-drills.js';
import { type ProcessFixture, processFixture } from './process-support.js';

const pgOnly = onPostgres();
let f: ProcessFixture;
beforeAll(async () => {
  if (pgOnly) f = await processFixture();
}, SETUP_TIMEOUT_MS);
afterEach(async () => {
  await f?.killAll();
});
afterAll(async () => {
  await f?.close();
});

const SCOPE = 'tickets';
const input = { title: 'check the deploy config', body: 'found in D2' };
const key = () => `op-${randomUUID()}`;

/** POST /tickets until the answer is not "in progress" (a crashed holder's lease runs out). */
async function settle(url: string, k: string, body: unknown = input): Promise<Sent> {
  for (let i = 0; ; i++) {
    const r = await post(url, '/tickets', body, k);
    if (r.status !== 409 || r.json.code !== 'OPERATION_IN_PROGRESS' || i > 200) return r;
    await new Promise((res) => setTimeout(res, 100));
  }
}

describe.skipIf(!pgOnly)(
  'D1 over the remote ledger (idem/fastify + LedgerClient)',
  { timeout: 180_000 },
  () => {
    let ledger: RunningService;
    let client: LedgerClient;
    // Made in the hook, not while the file is collected: a skipped suite runs no hooks, so a
    // folder made at collection would outlive it.
    let file: string;
    beforeAll(async () => {
      file = join(tempDir('idem-tickets-'), 'tickets.jsonl');
      ledger = await startService({ testDb: f.testDb });
      client = new LedgerClient({ baseUrl: ledger.url });
    }, SETUP_TIMEOUT_MS);
    afterAll(async () => {
      await ledger?.close();
    });
    const tickets = (env: Record<string, string> = {}) =>
      f.start('examples/ticket-service/server.ts', 'ticket-service', {
        LEDGER_URL: ledger.url,
        TICKETS_FILE: file,
        TICKET_LEASE_MS: '1000',
        ...env,
      });
    const ticketsOf = (k: string): Ticket[] =>
      readFileSync(file, 'utf8')
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l) as Ticket)
        .filter((t) => t.operationId === k);

    it('crash after the write: the lease runs out into outcome_unknown, 409 OUTCOME_UNKNOWN, never rerun; resolved, it replays', async () => {
      const k = key();
      const first = await tickets({ TICKET_FAULTS: JSON.stringify({ crashAfterWrite: [k] }) });
      await expect(post(first.url, '/tickets', input, k)).rejects.toThrow();
      expect(ticketsOf(k)).toHaveLength(1);

      const second = await tickets();
      for (let i = 0; i < 2; i++) {
        const r = await settle(second.url, k);
        expect(r.status).toBe(409);
        expect(r.json).toMatchObject({ code: 'OUTCOME_UNKNOWN', retryable: false });
      }
      expect(ticketsOf(k)).toHaveLength(1);
      // The operator (or a reconciler) checks the service: the ticket exists.
      const [ticket] = ticketsOf(k);
      await client.resolve(SCOPE, k, {
        status: 'succeeded',
        result: ticket,
        note: 'found in the ticket file',
      });
      const replay = await post(second.url, '/tickets', input, k);
      expect(replay).toMatchObject({ status: 200, json: ticket });
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(await (await fetch(`${second.url}/operations/${k}`)).json()).toEqual({
        status: 'succeeded',
        result: ticket,
      });
      expect(ticketsOf(k)).toHaveLength(1);
    });

    it('crash before the write: outcome_unknown too (the ledger cannot know); resolved to ready, the retry makes one ticket', async () => {
      const k = key();
      const first = await tickets({ TICKET_FAULTS: JSON.stringify({ crashBeforeWrite: [k] }) });
      await expect(post(first.url, '/tickets', input, k)).rejects.toThrow();
      const second = await tickets();
      expect((await settle(second.url, k)).json).toMatchObject({ code: 'OUTCOME_UNKNOWN' });
      expect(ticketsOf(k)).toHaveLength(0);
      await client.resolve(SCOPE, k, { status: 'ready', note: 'no ticket in the file: it never ran' });
      const created = await post(second.url, '/tickets', input, k);
      expect(created.status).toBe(201);
      expect(ticketsOf(k)).toEqual([created.json]);
    });

    it('crash after the commit, before the answer: the retry replays the stored 201, one ticket', async () => {
      const k = key();
      const first = await tickets({ TICKET_FAULTS: JSON.stringify({ crashAfterCommit: [k] }) });
      await expect(post(first.url, '/tickets', input, k)).rejects.toThrow();
      const second = await tickets();
      const again = await post(second.url, '/tickets', input, k);
      expect(again.status).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.headers.get('location')).toBe(`/tickets/${again.json.id}`);
      expect(ticketsOf(k)).toEqual([again.json]);
    });

    it('a restart of every process: the stored response still replays and the ticket is readable', async () => {
      const k = key();
      const before = await tickets();
      const created = await post(before.url, '/tickets', input, k);
      expect(created.status).toBe(201);
      await before.child.stop();
      await ledger.close();
      ledger = await startService({ testDb: f.testDb });
      const after = await tickets();
      const again = await post(after.url, '/tickets', input, k);
      expect(again.bytes.equals(created.bytes)).toBe(true);
      expect(await (await fetch(`${after.url}/tickets/${created.json.id}`)).json()).toEqual(created.json);
      expect(ticketsOf(k)).toHaveLength(1);
    });
  },
);

describe.skipIf(!pgOnly)(
  'D1 on idem/pg (idem/fastify + PgLedger, transactional)',
  { timeout: 180_000 },
  () => {
    const tickets = (faults: Record<string, string[]> = {}) =>
      f.start('examples/ticket-service/server.ts', 'ticket-service', {
        TICKETS_DATABASE_URL: f.url,
        TICKET_FAULTS: JSON.stringify(faults),
      });
    const ticketsOf = (k: string) =>
      f.query<{ id: string; title: string }>('SELECT id, title FROM tickets WHERE operation_id = $1', [k]);
    const opOf = async (k: string) =>
      (
        await f.query<{ status: string }>(
          'SELECT status FROM idem_operations WHERE scope = $1 AND key = $2',
          [SCOPE, k],
        )
      )[0]?.status;

    it('crash after the write, before the commit: neither exists; the retry makes one ticket', async () => {
      const k = key();
      const first = await tickets({ crashAfterWrite: [k] });
      await expect(post(first.url, '/tickets', input, k)).rejects.toThrow();
      expect(await ticketsOf(k)).toHaveLength(0);
      expect(await opOf(k)).toBeUndefined();
      const second = await tickets();
      const created = await post(second.url, '/tickets', input, k);
      expect(created.status).toBe(201);
      expect(created.headers.get('idempotent-replayed')).toBeNull();
      expect((await ticketsOf(k)).map((t) => t.id)).toEqual([created.json.id]);
    });

    it('crash after the commit: both exist; the retry replays the stored 201; then twins and reuse on the same process', async () => {
      const k = key();
      const first = await tickets({ crashAfterCommit: [k] });
      await expect(post(first.url, '/tickets', input, k)).rejects.toThrow();
      expect(await ticketsOf(k)).toHaveLength(1);
      expect(await opOf(k)).toBe('succeeded');
      const second = await tickets();
      const again = await post(second.url, '/tickets', input, k);
      expect(again.status).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect((await ticketsOf(k)).map((t) => t.id)).toEqual([again.json.id]);

      const twin = key();
      const [a, b] = await Promise.all([
        post(second.url, '/tickets', input, twin),
        post(second.url, '/tickets', input, twin),
      ]);
      expect([a.status, b.status]).toEqual([201, 201]);
      expect(a.bytes.equals(b.bytes)).toBe(true);
      expect(await ticketsOf(twin)).toHaveLength(1);
      const reused = await post(second.url, '/tickets', { title: 'other', body: 'x' }, twin);
      expect(reused).toMatchObject({ status: 422, json: { code: 'KEY_REUSED' } });
      expect(await ticketsOf(twin)).toHaveLength(1);
    });

    it('a restart of every process: the replay and the ledger API both show the stored result', async () => {
      const k = key();
      const before = await tickets();
      const created = await post(before.url, '/tickets', input, k);
      await before.child.stop();
      const after = await tickets();
      const again = await post(after.url, '/tickets', input, k);
      expect(again.bytes.equals(created.bytes)).toBe(true);
      const ledger = await startService({ testDb: f.testDb });
      try {
        const op = (await (await fetch(`${ledger.url}/v1/scopes/${SCOPE}/operations/${k}`)).json()) as {
          operation: { status: string; metadata: unknown };
        };
        expect(op.operation).toMatchObject({
          status: 'succeeded',
          metadata: { method: 'POST', route: '/tickets' },
        });
      } finally {
        await ledger.close();
      }
      expect(await ticketsOf(k)).toHaveLength(1);
    });
  },
);
