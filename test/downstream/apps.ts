/**
 * The drill service, written twice: once on `idem/fastify`, once on
 * `idem/express`, with the same routes, so one table of drills runs against
 * both adapters. Effects are counted here, at the service.
 *
 *   POST /tickets   required key, non_idempotent_write; 201 + Location + Set-Cookie
 *   POST /refresh   optional key, idempotent_write: a 503 releases the operation
 *   POST /slow      leaseMs 1000, waits on a gate: must be heartbeated to survive
 *   POST /echo      optional key: answers request.idempotency
 *   GET  /tickets/:id   never intercepted
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import express from 'express';
import Fastify from 'fastify';
import type { LedgerClient } from '../../src/client/index.js';
import { idempotency as expressIdempotency } from '../../src/downstream/express.js';
import fastifyIdempotency, { notApplied } from '../../src/downstream/fastify.js';
import type { DownstreamLog } from '../../src/downstream/options.js';
import type { PgLedger } from '../../src/pg/index.js';

export interface DrillTicket {
  id: string;
  key: string;
  title: string;
}

/** What the drills steer and count, by idempotency key. */
export class DrillState {
  readonly tickets: DrillTicket[] = [];
  /** Handler runs per key, of any route. */
  readonly runs = new Map<string, number>();
  readonly gate = new Map<string, Promise<void>>();
  /** Milliseconds the ticket handler takes, for real (ungated) races. */
  handlerDelayMs = 0;
  readonly throwAfterWrite = new Set<string>();
  /** The handler throws an error marked `notApplied` before writing. */
  readonly throwNotApplied = new Set<string>();
  readonly fail503 = new Set<string>();
  readonly loseResponse = new Set<string>();
  /** Every log line the adapter wrote. */
  readonly logs: string[] = [];

  ran(key: string | undefined): void {
    if (key) this.runs.set(key, (this.runs.get(key) ?? 0) + 1);
  }
  ticketsOf(key: string): DrillTicket[] {
    return this.tickets.filter((t) => t.key === key);
  }
  logger(): DownstreamLog {
    const push = (level: string) => (obj: object, msg: string) =>
      this.logs.push(JSON.stringify({ level, msg, ...obj }));
    return { info: push('info'), warn: push('warn'), error: push('error') };
  }
}

export interface DrillApp {
  name: 'fastify' | 'express';
  url: string;
  state: DrillState;
  close(): Promise<void>;
}

export interface DrillAppOptions {
  ledger: LedgerClient | PgLedger;
  failOpen?: boolean;
  scope?: string;
}

export type DrillAppFactory = (o: DrillAppOptions) => Promise<DrillApp>;

function newTicket(state: DrillState, key: string, title: string): DrillTicket {
  const t = { id: `T-${randomUUID().slice(0, 8)}`, key, title };
  state.tickets.push(t);
  return t;
}

export const startFastifyDrillApp: DrillAppFactory = async (o) => {
  const state = new DrillState();
  const stream = new Writable({
    write(chunk, _e, done) {
      for (const l of String(chunk).split('\n')) if (l.trim()) state.logs.push(l);
      done();
    },
  });
  const app = Fastify({ logger: { level: 'info', stream }, forceCloseConnections: true });
  await app.register(fastifyIdempotency, {
    ledger: o.ledger,
    scope: o.scope ?? 'drills',
    failOpen: o.failOpen,
  });
  app.addHook('onSend', async (req, reply, payload) => {
    if (req.idempotency && state.loseResponse.delete(req.idempotency.key)) reply.raw.socket?.destroy();
    return payload;
  });
  app.post<{ Body: { title: string } }>(
    '/tickets',
    { config: { idempotency: { required: true, effect: 'non_idempotent_write' } } },
    async (req, reply) => {
      // Unguarded under failOpen: no request.idempotency, the header is all there is.
      const key = req.idempotency?.key ?? String(req.headers['idempotency-key']);
      state.ran(key);
      await state.gate.get(key);
      if (state.handlerDelayMs) await new Promise((r) => setTimeout(r, state.handlerDelayMs));
      if (state.throwNotApplied.has(key)) throw notApplied(new Error('refused before writing'));
      const t = newTicket(state, key, req.body.title);
      if (state.throwAfterWrite.has(key)) throw new Error('failed after the write');
      return reply
        .code(201)
        .header('location', `/tickets/${t.id}`)
        .header('set-cookie', 'session=secret')
        .send(t);
    },
  );
  app.post('/refresh', { config: { idempotency: { effect: 'idempotent_write' } } }, async (req, reply) => {
    state.ran(req.idempotency?.key);
    if (req.idempotency && state.fail503.delete(req.idempotency.key))
      return reply.code(503).send({ down: true });
    return { refreshed: true, attempt: req.idempotency?.attempt, recovered: req.idempotency?.recovered };
  });
  app.post(
    '/slow',
    { config: { idempotency: { leaseMs: 1000, effect: 'non_idempotent_write' } } },
    async (req) => {
      state.ran(req.idempotency?.key);
      await state.gate.get(req.idempotency!.key);
      return { slow: 'done' };
    },
  );
  app.post('/echo', async (req) => ({ idempotency: req.idempotency ?? null }));
  app.put('/things/:id', { config: { idempotency: { effect: 'idempotent_write' } } }, async (req) => {
    state.ran(req.idempotency?.key);
    return { put: true };
  });
  app.get<{ Params: { id: string } }>('/tickets/:id', async (req, reply) => {
    state.ran(req.headers['idempotency-key'] as string | undefined);
    const t = state.tickets.find((x) => x.id === req.params.id);
    return t ?? reply.code(404).send({ code: 'NOT_FOUND' });
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  return { name: 'fastify', url: `http://127.0.0.1:${port}`, state, close: () => app.close() };
};

export const startExpressDrillApp: DrillAppFactory = async (o) => {
  const state = new DrillState();
  const idem = expressIdempotency({
    ledger: o.ledger,
    scope: o.scope ?? 'drills',
    failOpen: o.failOpen,
    logger: state.logger(),
  });
  const app = express();
  app.use(express.json());
  app.use((req, res, next) => {
    // The middleware sends through this `end` once the response is stored: drop the socket instead.
    const key = req.headers['idempotency-key'];
    if (typeof key === 'string' && state.loseResponse.delete(key)) {
      res.end = (() => {
        res.socket?.destroy();
        return res;
      }) as unknown as express.Response['end'];
    }
    next();
  });
  app.post('/tickets', idem.route({ required: true, effect: 'non_idempotent_write' }), async (req, res) => {
    const key = req.idempotency?.key ?? String(req.headers['idempotency-key']);
    state.ran(key);
    await state.gate.get(key);
    if (state.handlerDelayMs) await new Promise((r) => setTimeout(r, state.handlerDelayMs));
    if (state.throwNotApplied.has(key)) throw notApplied(new Error('refused before writing'));
    const t = newTicket(state, key, req.body.title);
    if (state.throwAfterWrite.has(key)) throw new Error('failed after the write');
    res.status(201).location(`/tickets/${t.id}`).setHeader('set-cookie', 'session=secret');
    res.json(t);
  });
  app.post('/refresh', idem.route({ effect: 'idempotent_write' }), (req, res) => {
    state.ran(req.idempotency?.key);
    if (req.idempotency && state.fail503.delete(req.idempotency.key)) {
      res.status(503).json({ down: true });
      return;
    }
    res.json({ refreshed: true, attempt: req.idempotency?.attempt, recovered: req.idempotency?.recovered });
  });
  app.post('/slow', idem.route({ leaseMs: 1000, effect: 'non_idempotent_write' }), async (req, res) => {
    state.ran(req.idempotency?.key);
    await state.gate.get(req.idempotency!.key);
    res.json({ slow: 'done' });
  });
  app.put('/things/:id', idem.route({ effect: 'idempotent_write' }), (req, res) => {
    state.ran(req.idempotency?.key);
    res.json({ put: true });
  });
  app.post('/echo', idem, (req, res) => {
    res.json({ idempotency: req.idempotency ?? null });
  });
  app.get('/tickets/:id', idem, (req, res) => {
    state.ran(req.headers['idempotency-key'] as string | undefined);
    const t = state.tickets.find((x) => x.id === req.params.id);
    if (t) res.json(t);
    else res.status(404).json({ code: 'NOT_FOUND' });
  });
  app.use(idem.errors);
  app.use((_err: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    res.status(500).json({ code: 'INTERNAL' });
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise<void>((r) => server.once('listening', () => r()));
  const { port } = server.address() as AddressInfo;
  return {
    name: 'express',
    url: `http://127.0.0.1:${port}`,
    state,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
};
