/**
 * `transactional: true` routes with a PgLedger, through both adapters: the
 * handler writes on `request.idempotency.tx`, and those writes commit with
 * the stored response, or roll back with the operation.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotency as expressIdempotency } from '../../src/downstream/express.js';
import fastifyIdempotency from '../../src/downstream/fastify.js';
import type { TxClient } from '../../src/pg/index.js';
import { onPostgres } from '../support/engine.js';
import { post } from './middleware-drills.js';
import { type PgLedgerFixture, pgLedgerFixture } from './support.js';

let f: PgLedgerFixture;
const SCOPE = 'tx-drills';
// `code` is unique only at commit (deferred): a handler can write a row that makes COMMIT fail.
const TABLE = `CREATE TABLE IF NOT EXISTS tx_tickets (
  id text PRIMARY KEY, key text NOT NULL, title text NOT NULL, code text,
  CONSTRAINT tx_tickets_code UNIQUE (code) DEFERRABLE INITIALLY DEFERRED)`;

type Body = { title: string; status?: number; fail?: 'throw' | 'commit' };

/** The handler both adapters run: one row, then the answer the body asks for. */
async function createTicket(tx: TxClient, key: string, body: Body) {
  const id = `T-${randomUUID().slice(0, 8)}`;
  const code = body.fail === 'commit' ? 'taken' : null;
  await tx.query('INSERT INTO tx_tickets (id, key, title, code) VALUES ($1, $2, $3, $4)', [
    id,
    key,
    body.title,
    code,
  ]);
  if (body.fail === 'throw') throw new Error('failed after the write');
  return { status: body.status ?? 201, ticket: { id, title: body.title } };
}

const route = { required: true, effect: 'non_idempotent_write', transactional: true } as const;

async function fastifyApp() {
  const app = Fastify({ logger: false, forceCloseConnections: true });
  await app.register(fastifyIdempotency, { ledger: f.ledger, scope: SCOPE });
  app.post<{ Body: Body }>('/tickets', { config: { idempotency: route } }, async (req, reply) => {
    const { status, ticket } = await createTicket(req.idempotency!.tx!, req.idempotency!.key, req.body);
    return reply.code(status).header('location', `/tickets/${ticket.id}`).send(ticket);
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, close: () => app.close() };
}

async function expressApp() {
  const idem = expressIdempotency({ ledger: f.ledger, scope: SCOPE, logger: silent });
  const app = express();
  app.use(express.json());
  app.post('/tickets', idem.route(route), async (req, res) => {
    const { status, ticket } = await createTicket(req.idempotency!.tx!, req.idempotency!.key, req.body);
    res.status(status).location(`/tickets/${ticket.id}`).json(ticket);
  });
  app.use((_e: unknown, _q: express.Request, res: express.Response, _n: express.NextFunction) => {
    res.status(500).json({ code: 'INTERNAL' });
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise<void>((r) => server.once('listening', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
const silent = { info() {}, warn() {}, error() {} };

beforeAll(async () => {
  f = await pgLedgerFixture('ticket-service');
  await f.query(TABLE);
  await f.query(`INSERT INTO tx_tickets (id, key, title, code) VALUES ('T-seed', 'seed', 'seed', 'taken')`);
});
afterAll(() => f.close());

const rowsOf = async (key: string) =>
  (await f.query<{ n: number }>('SELECT count(*)::int AS n FROM tx_tickets WHERE key = $1', [key]))[0]!.n;
const opStatus = async (key: string) =>
  (
    await f.query<{ status: string }>('SELECT status FROM idem_operations WHERE scope = $1 AND key = $2', [
      SCOPE,
      key,
    ])
  )[0]?.status;

describe.each([
  ['fastify', fastifyApp],
  ['express', expressApp],
] as const)('%s, transactional route on a PgLedger', (_name, start) => {
  let app: { url: string; close(): Promise<unknown> };
  beforeAll(async () => {
    app = await start();
  });
  afterAll(() => app.close());
  const k = () => `tx-${randomUUID()}`;

  it('the row and the stored response commit together; the retry replays it byte for byte', async () => {
    const key = k();
    const first = await post(app.url, '/tickets', { title: 'a' }, key);
    expect(first.status).toBe(201);
    expect(await rowsOf(key)).toBe(1);
    expect(await opStatus(key)).toBe('succeeded');
    const again = await post(app.url, '/tickets', { title: 'a' }, key);
    expect(again.bytes.equals(first.bytes)).toBe(true);
    expect(again.headers.get('location')).toBe(first.headers.get('location'));
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await rowsOf(key)).toBe(1);
  });

  it('a throw after the write rolls both back: no row, no operation; the retry runs once', async () => {
    const key = k();
    expect((await post(app.url, '/tickets', { title: 'b', fail: 'throw' }, key)).status).toBe(500);
    expect(await rowsOf(key)).toBe(0);
    expect(await opStatus(key)).toBeUndefined();
    // Another body is no KEY_REUSED now: the failed attempt left nothing behind.
    expect((await post(app.url, '/tickets', { title: 'b' }, key)).status).toBe(201);
    expect(await rowsOf(key)).toBe(1);
  });

  it('a 4xx commits as failed and is replayed', async () => {
    const key = k();
    const first = await post(app.url, '/tickets', { title: 'c', status: 409 }, key);
    expect(first.status).toBe(409);
    expect(await opStatus(key)).toBe('failed');
    const again = await post(app.url, '/tickets', { title: 'c', status: 409 }, key);
    expect(again).toMatchObject({ status: 409 });
    expect(again.bytes.equals(first.bytes)).toBe(true);
    expect(await rowsOf(key)).toBe(1);
  });

  it('a COMMIT that fails answers 503 instead of the handler 201: nothing of it exists, the retry runs', async () => {
    const key = k();
    const r = await post(app.url, '/tickets', { title: 'd', fail: 'commit' }, key);
    expect(r.status).toBe(503);
    expect(r.json).toMatchObject({ code: 'UNAVAILABLE', retryable: true });
    expect(r.headers.get('location')).toBeNull();
    expect(await rowsOf(key)).toBe(0);
    expect(await opStatus(key)).toBeUndefined();
    expect((await post(app.url, '/tickets', { title: 'd' }, key)).status).toBe(201);
  });

  it('two at once: one runs, the other replays it (it waits on the key if they overlap); one row', async ({
    skip,
  }) => {
    if (!onPostgres()) skip('PGlite runs one transaction at a time');
    const key = k();
    const [a, b] = await Promise.all([
      post(app.url, '/tickets', { title: 'e' }, key),
      post(app.url, '/tickets', { title: 'e' }, key),
    ]);
    expect([a.status, b.status]).toEqual([201, 201]);
    expect(a.bytes.equals(b.bytes)).toBe(true);
    expect([a, b].filter((x) => x.headers.get('idempotent-replayed') === 'true')).toHaveLength(1);
    expect(await rowsOf(key)).toBe(1);
  });
});
