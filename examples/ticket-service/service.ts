/**
 * The ticket service of seed 002 on `idem/fastify`: registering the plugin
 * and marking the route is all it takes for a retried `POST /tickets` with
 * the same `Idempotency-Key` to make one ticket and replay the stored answer
 * (status, body bytes, `Location`) with `Idempotent-Replayed: true`.
 *
 * With a `LedgerClient` the ledger is the remote service and tickets live
 * here (memory, or a file for the crash drills). With a `PgLedger` the route
 * is transactional: the ticket row commits with the stored response.
 */
import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import { isLedgerError, type LedgerClient } from '../../src/client/index.js';
import idempotency from '../../src/downstream/fastify.js';
import { storedJson } from '../../src/downstream/stored-response.js';
import { PgLedger } from '../../src/pg/index.js';
import { MemoryTicketStore, type PgTicketStore, type Ticket } from './ticket-store.js';

export type { Ticket } from './ticket-store.js';

/** Faults a drill can inject, by operation id. */
export interface TicketFaults {
  /** Create and store, then drop the connection without answering. */
  loseResponse: Set<string>;
  /** Create and store, then never answer. */
  hold: Set<string>;
  /** Create the ticket, then throw: the outcome is unknown. */
  throwAfterWrite: Set<string>;
  /** The handler waits for this before writing (so a twin really overlaps). */
  gate: Map<string, Promise<void>>;
  /** SIGKILL the process: before the write, after it (before the commit), after the commit. */
  crashBeforeWrite: Set<string>;
  crashAfterWrite: Set<string>;
  crashAfterCommit: Set<string>;
}

export interface TicketServiceOptions {
  ledger: LedgerClient | PgLedger;
  /** Default: tickets in memory. Required with a PgLedger: a `PgTicketStore`. */
  store?: MemoryTicketStore | PgTicketStore;
  scope?: string;
  port?: number;
  /** The lease of a create; short in drills so a crashed holder's lapse is seen soon. Default 30 s. */
  leaseMs?: number;
  faults?: Partial<TicketFaults>;
}

/** A running ticket service. */
export interface TicketService {
  url: string;
  app: FastifyInstance;
  /** Tickets of the memory store (empty with a PgTicketStore: count the table). */
  tickets: Map<string, Ticket>;
  /** Every POST /tickets that arrived, with its operation id. */
  requests: string[];
  faults: TicketFaults;
  close(): Promise<void>;
}

const die = () => process.kill(process.pid, 'SIGKILL');

/** Builds and starts the service on a free port of 127.0.0.1. */
export async function startTicketService(options: TicketServiceOptions): Promise<TicketService> {
  const scope = options.scope ?? 'tickets';
  const store = options.store ?? new MemoryTicketStore();
  const transactional = options.ledger instanceof PgLedger;
  if (transactional && store instanceof MemoryTicketStore)
    throw new Error('a PgLedger needs a PgTicketStore');
  const faults: TicketFaults = {
    loseResponse: new Set(),
    hold: new Set(),
    throwAfterWrite: new Set(),
    gate: new Map(),
    crashBeforeWrite: new Set(),
    crashAfterWrite: new Set(),
    crashAfterCommit: new Set(),
    ...options.faults,
  };
  const requests: string[] = [];
  const app = Fastify({ logger: false, forceCloseConnections: true });

  app.addHook('onRequest', async (req) => {
    const key = req.headers['idempotency-key'];
    if (req.method === 'POST' && req.url === '/tickets' && typeof key === 'string') requests.push(key);
  });
  await app.register(idempotency, { ledger: options.ledger, scope, owner: 'ticket-service' });
  // Registered after the plugin, so these run once the response is stored (and committed).
  app.addHook('onSend', async (req, reply, payload) => {
    const key = req.idempotency?.key;
    if (!key) return payload;
    if (faults.crashAfterCommit.has(key)) die();
    if (faults.hold.has(key)) return new Promise(() => {});
    if (faults.loseResponse.delete(key)) reply.raw.socket?.destroy();
    return payload;
  });

  app.post<{ Body: { title: string; body: string } }>(
    '/tickets',
    {
      schema: {
        body: {
          type: 'object',
          required: ['title', 'body'],
          additionalProperties: false,
          properties: { title: { type: 'string', minLength: 1 }, body: { type: 'string' } },
        },
      },
      // Creating a ticket twice makes two tickets: a crash mid-way is an unknown outcome.
      config: {
        idempotency: {
          required: true,
          effect: 'non_idempotent_write',
          transactional,
          ...(options.leaseMs ? { leaseMs: options.leaseMs } : {}),
        },
      },
    },
    async (req, reply) => {
      const idem = req.idempotency!;
      await faults.gate.get(idem.key);
      if (faults.crashBeforeWrite.has(idem.key)) die();
      const ticket: Ticket = {
        id: `T-${randomUUID().slice(0, 8)}`,
        title: req.body.title,
        body: req.body.body,
        operationId: idem.key,
      };
      await store.create(ticket, idem.tx!);
      if (faults.crashAfterWrite.has(idem.key)) die();
      if (faults.throwAfterWrite.has(idem.key))
        throw new Error('the ticket was written, then the service failed');
      return reply.code(201).header('location', `/tickets/${ticket.id}`).send(ticket);
    },
  );

  app.get<{ Params: { id: string } }>('/tickets/:id', async (req, reply) => {
    const ticket = await store.get(req.params.id);
    return ticket ?? reply.code(404).send({ code: 'NOT_FOUND' });
  });

  // Status query by the original operation id: the right question after a timeout.
  app.get<{ Params: { id: string } }>('/operations/:id', async (req, reply) => {
    const op = await readOperation(options.ledger, scope, req.params.id);
    if (!op) return reply.code(404).send({ code: 'NOT_FOUND' });
    return { status: op.status, result: storedJson(op.result) };
  });

  await app.listen({ host: '127.0.0.1', port: options.port ?? 0 });
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  return {
    url: `http://127.0.0.1:${addr.port}`,
    app,
    tickets: store instanceof MemoryTicketStore ? store.tickets : new Map(),
    requests,
    faults,
    close: () => app.close(),
  };
}

async function readOperation(ledger: LedgerClient | PgLedger, scope: string, key: string) {
  if (ledger instanceof PgLedger) return ledger.get(scope, key);
  try {
    return await ledger.get(scope, key);
  } catch (err) {
    if (isLedgerError(err, 'NOT_FOUND')) return undefined;
    throw err;
  }
}
