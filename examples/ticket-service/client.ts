/**
 * How a caller of the ticket service creates a ticket safely: pick the
 * operation id once, and on a lost answer resubmit with the SAME id (never a
 * new one, which would create a second ticket).
 */
import { Type } from 'typebox';
import { defineTool, ToolError } from '../../src/client/index.js';
import type { Ticket } from './service.js';

/** What a create came to. */
export interface CreateResult {
  status: number;
  ticket?: Ticket;
  code?: string;
  replayed: boolean;
  /** How many requests it took. */
  requests: number;
}

/**
 * POST /tickets with `opId`, resubmitting on a lost answer and waiting out a
 * twin in flight. Bounded: `attempts` requests at most.
 */
export async function createTicket(
  baseUrl: string,
  opId: string,
  input: { title: string; body: string },
  attempts = 5,
): Promise<CreateResult> {
  for (let i = 1; ; i++) {
    try {
      const res = await fetch(`${baseUrl}/tickets`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': opId },
        body: JSON.stringify(input),
      });
      const body = (await res.json()) as Record<string, unknown>;
      if (res.status === 409 && body.code === 'OPERATION_IN_PROGRESS' && i < attempts) {
        await new Promise((r) => setTimeout(r, 100 * i));
        continue;
      }
      const replayed = res.headers.get('idempotent-replayed') === 'true';
      return res.ok
        ? { status: res.status, ticket: body as unknown as Ticket, replayed, requests: i }
        : { status: res.status, code: String(body.code), replayed, requests: i };
    } catch (err) {
      // No answer: the ticket may or may not exist. The same id makes asking again safe.
      if (i >= attempts) throw err;
    }
  }
}

const TicketInput = Type.Object({ title: Type.String({ minLength: 1 }), body: Type.String() });

/**
 * The ticket service as an agent tool. The service dedupes on the operation
 * id, and the executor hands the call's idempotency key over as that id, so
 * the tool is an idempotent write: safe to retry, re-run after a crash.
 */
export function createTicketTool(baseUrl: string) {
  return defineTool({
    name: 'create_ticket',
    description: 'Open a support ticket with a title and a body.',
    input: TicketInput,
    policy: { effect: 'idempotent_write' },
    timeoutMs: 5000,
    async run(args, ctx) {
      let res: Response;
      try {
        res = await fetch(`${baseUrl}/tickets`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': ctx.idempotencyKey },
          body: JSON.stringify(args),
          signal: ctx.signal,
        });
      } catch (err) {
        const refused = (err as { cause?: { code?: string } }).cause?.code === 'ECONNREFUSED';
        throw new ToolError('UPSTREAM_UNAVAILABLE', 'the ticket service cannot be reached', {
          notApplied: refused,
        });
      }
      const body = (await res.json()) as Record<string, unknown>;
      if (res.ok) return body as unknown as Ticket;
      if (res.status === 409 && body.code === 'OPERATION_IN_PROGRESS') {
        throw new ToolError('UPSTREAM_UNAVAILABLE', 'the ticket is still being created', {
          notApplied: true,
        });
      }
      if (res.status === 400) throw new ToolError('INVALID_ARGUMENT', String(body.detail));
      if (res.status === 422)
        throw new ToolError('CONFLICT', 'this operation id was used for another ticket');
      throw new ToolError('UPSTREAM_UNAVAILABLE', `the ticket service answered ${res.status}`);
    },
    async probe(_args, ctx) {
      const res = await fetch(`${baseUrl}/operations/${encodeURIComponent(ctx.idempotencyKey)}`);
      if (res.status === 404) return { status: 'not_applied' };
      const op = (await res.json()) as { status: string; result: Ticket | null };
      if (op.status === 'succeeded' && op.result) {
        return { status: 'applied', evidence: { ...op.result }, text: `ticket ${op.result.id} was opened.` };
      }
      return { status: 'unknown' };
    },
  });
}

/** Reads a ticket: a read, retried freely. */
export function getTicketTool(baseUrl: string) {
  return defineTool({
    name: 'get_ticket',
    description: 'Read a support ticket by id.',
    input: Type.Object({ id: Type.String() }),
    policy: { effect: 'read' },
    timeoutMs: 5000,
    async run(args, ctx) {
      const res = await fetch(`${baseUrl}/tickets/${encodeURIComponent(args.id)}`, { signal: ctx.signal });
      if (res.status === 404) throw new ToolError('NOT_FOUND', `there is no ticket ${args.id}`);
      if (!res.ok) throw new ToolError('UPSTREAM_UNAVAILABLE', `the ticket service answered ${res.status}`);
      return (await res.json()) as Ticket;
    },
  });
}
