/**
 * A ticket service that uses the ledger before writing (seed 002): the
 * client names each create with an operation id (`Idempotency-Key`), and the
 * ledger decides, atomically, whether this request creates the ticket,
 * replays the stored one, waits for a twin in flight, or refuses a reused id.
 */
import { randomUUID } from 'node:crypto';
import { isLedgerError, type LedgerClient } from '../../src/client/index.js';
import { type Listening, listen, lose, problem, readJson, send } from '../shared/http.js';

/** A ticket. */
export interface Ticket {
  id: string;
  title: string;
  body: string;
  operationId: string;
}

/** Faults a drill can inject, by operation id. */
export interface TicketFaults {
  /** Create the ticket, then drop the connection without answering. */
  loseResponse: Set<string>;
  /** Create the ticket, then never answer (the caller's worker will be killed). */
  hold: Set<string>;
}

/** A running ticket service. */
export interface TicketService extends Listening {
  /** Every ticket ever created: the effect count of the drills. */
  tickets: Map<string, Ticket>;
  /** Every POST /tickets that arrived, with its operation id. */
  requests: string[];
  faults: TicketFaults;
}

/** Starts the service on a free port of 127.0.0.1. */
export async function startTicketService(options: { ledger: LedgerClient; scope?: string; port?: number }) {
  const { ledger } = options;
  const scope = options.scope ?? 'tickets';
  const tickets = new Map<string, Ticket>();
  const requests: string[] = [];
  const faults: TicketFaults = { loseResponse: new Set(), hold: new Set() };

  const listening = await listen(async (req, res, url) => {
    if (req.method === 'POST' && url.pathname === '/tickets') {
      const opId = req.headers['idempotency-key'];
      if (typeof opId !== 'string' || opId === '') {
        return problem(res, 400, 'INVALID_ARGUMENT', 'the Idempotency-Key header (operation id) is required');
      }
      requests.push(opId);
      const input = (await readJson(req)) as { title?: unknown; body?: unknown } | undefined;
      if (typeof input?.title !== 'string' || typeof input.body !== 'string') {
        return problem(res, 400, 'INVALID_ARGUMENT', 'title and body are strings');
      }
      let begun: Awaited<ReturnType<LedgerClient['begin']>>;
      try {
        // Creating a ticket twice makes two tickets: at most once, and
        // dispatched only after validation so a crash before it is "never ran".
        begun = await ledger.begin(scope, {
          key: opId,
          request: { title: input.title, body: input.body },
          effect: 'non_idempotent_write',
          dispatch: false,
          owner: 'ticket-service',
        });
      } catch (err) {
        if (isLedgerError(err, 'KEY_REUSED')) {
          return problem(res, 422, 'KEY_REUSED', 'this operation id was used for a different ticket');
        }
        if (isLedgerError(err, 'OPERATION_IN_PROGRESS')) {
          const wait = String(Math.max(1, Math.ceil((err.retryAfterMs ?? 1000) / 1000)));
          return problem(res, 409, 'OPERATION_IN_PROGRESS', 'this ticket is being created', {
            'retry-after': wait,
          });
        }
        if (isLedgerError(err, 'OUTCOME_UNKNOWN')) {
          return problem(
            res,
            409,
            'OUTCOME_UNKNOWN',
            'nobody knows whether this ticket was created; ask support',
          );
        }
        return problem(res, 503, 'UNAVAILABLE', 'try again later', { 'retry-after': '1' });
      }
      if (begun.outcome === 'replayed') {
        return send(res, 200, begun.operation.result, { 'idempotent-replayed': 'true' });
      }
      if (begun.outcome !== 'acquired')
        return problem(res, 409, 'INVALID_STATE', 'the operation waits for approval');
      await ledger.dispatch(scope, opId, begun.leaseId);
      const ticket: Ticket = {
        id: `T-${randomUUID().slice(0, 8)}`,
        title: input.title,
        body: input.body,
        operationId: opId,
      };
      tickets.set(ticket.id, ticket);
      await ledger.complete(scope, opId, {
        leaseId: begun.leaseId,
        status: 'succeeded',
        result: { ...ticket },
      });
      if (faults.hold.has(opId)) return; // never answer
      if (faults.loseResponse.delete(opId)) return lose(res);
      return send(res, 201, ticket);
    }
    // Status query by the original operation id: the right thing to ask after a timeout.
    const m = /^\/operations\/(.+)$/.exec(url.pathname);
    if (req.method === 'GET' && m) {
      try {
        const op = await ledger.get(scope, decodeURIComponent(m[1] as string));
        return send(res, 200, { status: op.status, result: op.result });
      } catch (err) {
        if (isLedgerError(err, 'NOT_FOUND')) return problem(res, 404, 'NOT_FOUND', 'no such operation');
        throw err;
      }
    }
    const t = /^\/tickets\/([^/]+)$/.exec(url.pathname);
    if (req.method === 'GET' && t) {
      const ticket = tickets.get(decodeURIComponent(t[1] as string));
      return ticket ? send(res, 200, ticket) : problem(res, 404, 'NOT_FOUND', 'no such ticket');
    }
    return problem(res, 404, 'NOT_FOUND', 'no such route');
  }, options.port);
  return { ...listening, tickets, requests, faults } satisfies TicketService;
}
