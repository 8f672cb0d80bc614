/**
 * A legacy ticket service: no idempotency key, no way to ask what became of
 * a request. Every POST makes a ticket. Against such a downstream the only
 * honest answer to a lost response is "outcome unknown" (seed 002).
 */
import { randomUUID } from 'node:crypto';
import { type Listening, listen, lose, problem, readJson, send } from '../shared/http.js';

/** A running legacy service. */
export interface LegacyTicketService extends Listening {
  /** Every ticket created: the effect count. */
  tickets: { id: string; title: string }[];
  /** How many of the next creates lose their response after creating. */
  faults: { loseResponses: number; holdResponses: number };
}

/** Starts the service on a free port of 127.0.0.1. */
export async function startLegacyTicketService(port = 0): Promise<LegacyTicketService> {
  const tickets: { id: string; title: string }[] = [];
  const faults = { loseResponses: 0, holdResponses: 0 };
  const listening = await listen(async (req, res, url) => {
    if (req.method !== 'POST' || url.pathname !== '/tickets')
      return problem(res, 404, 'NOT_FOUND', 'no such route');
    const input = (await readJson(req)) as { title?: unknown } | undefined;
    if (typeof input?.title !== 'string') return problem(res, 400, 'INVALID_ARGUMENT', 'title is a string');
    const ticket = { id: `L-${randomUUID().slice(0, 8)}`, title: input.title };
    tickets.push(ticket);
    if (faults.holdResponses > 0) {
      faults.holdResponses--;
      return; // never answers
    }
    if (faults.loseResponses > 0) {
      faults.loseResponses--;
      return lose(res);
    }
    return send(res, 201, ticket);
  }, port);
  return { ...listening, tickets, faults };
}
