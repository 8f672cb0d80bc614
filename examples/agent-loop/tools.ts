/**
 * The agent's tools over the order system: a read and a refund (a
 * non-idempotent write with a probe for the reconciler).
 */
import { Type } from 'typebox';
import { defineTool, ToolError } from '../../src/client/index.js';
import type { Refund } from './order-service.js';

function unreachable(err: unknown, what: string): ToolError {
  // Refused means the request never left: nothing happened at the service.
  // Any other failure (reset, no answer) may come after the service acted.
  const refused = (err as { cause?: { code?: string } }).cause?.code === 'ECONNREFUSED';
  return refused
    ? new ToolError('UPSTREAM_UNAVAILABLE', `${what} cannot be reached`, { notApplied: true })
    : new ToolError('UPSTREAM_UNAVAILABLE', `${what} did not answer`);
}

/** `get_order`: a read, retried freely. */
export function getOrderTool(baseUrl: string) {
  return defineTool({
    name: 'get_order',
    description: 'Look up an order: its total and how much was refunded.',
    input: Type.Object({ orderId: Type.String({ pattern: '^[0-9]{4}$' }) }),
    policy: { effect: 'read' },
    timeoutMs: 5000,
    async run(args, ctx) {
      let res: Response;
      try {
        res = await fetch(`${baseUrl}/orders/${args.orderId}`, { signal: ctx.signal });
      } catch (err) {
        if (ctx.signal.aborted) throw err;
        throw unreachable(err, 'the order system');
      }
      if (res.status === 404) throw new ToolError('NOT_FOUND', `there is no order ${args.orderId}`);
      if (!res.ok) throw new ToolError('UPSTREAM_UNAVAILABLE', `the order system answered ${res.status}`);
      return res.json();
    },
  });
}

/**
 * `refund_order`: pays out each time it runs, so it is a non-idempotent write
 * (one attempt, approval by default). It hands the call's idempotency key to
 * the order system, which records it with the refund: that is what the probe
 * asks about later.
 */
export function refundOrderTool(
  baseUrl: string,
  options: { requiresApproval?: boolean; timeoutMs?: number } = {},
) {
  return defineTool({
    name: 'refund_order',
    description: 'Refund an amount of an order to the customer.',
    input: Type.Object({
      orderId: Type.String({ pattern: '^[0-9]{4}$' }),
      amount: Type.Number({ exclusiveMinimum: 0 }),
    }),
    policy: {
      effect: 'non_idempotent_write',
      ...(options.requiresApproval === undefined ? {} : { requiresApproval: options.requiresApproval }),
    },
    timeoutMs: options.timeoutMs ?? 5000,
    preview: (args) => ({
      resource: `order ${args.orderId}`,
      action: 'refund',
      impact: `pays out ${args.amount} EUR`,
    }),
    async run(args, ctx) {
      let res: Response;
      try {
        res = await fetch(`${baseUrl}/orders/${args.orderId}/refunds`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': ctx.idempotencyKey },
          body: JSON.stringify({ amount: args.amount }),
          signal: ctx.signal,
        });
      } catch (err) {
        if (ctx.signal.aborted) throw err;
        throw unreachable(err, 'the order system');
      }
      if (res.status === 404) throw new ToolError('NOT_FOUND', `there is no order ${args.orderId}`);
      if (res.status === 400) throw new ToolError('INVALID_ARGUMENT', 'the order system refused the amount');
      if (!res.ok) throw new ToolError('UPSTREAM_UNAVAILABLE', `the order system answered ${res.status}`);
      return (await res.json()) as Refund;
    },
    async probe(args, ctx) {
      const res = await fetch(`${baseUrl}/refunds?key=${encodeURIComponent(ctx.idempotencyKey)}`, {
        signal: ctx.signal,
      });
      if (!res.ok) return { status: 'unknown' };
      const { refunds } = (await res.json()) as { refunds: Refund[] };
      const r = refunds[0];
      if (!r)
        return { status: 'not_applied', text: `the refund of order ${args.orderId} did not go through.` };
      return {
        status: 'applied',
        evidence: { ...r },
        text: `the refund of order ${args.orderId} went through (${r.id}).`,
      };
    },
  });
}

/**
 * `cancel_order`: a single-attempt write whose service dedupes on the order
 * id. Its request is deliberately NOT tied to the abort signal, like a tool
 * that does not cooperate with cancellation: a timed-out attempt goes on.
 */
export function cancelOrderTool(baseUrl: string, options: { timeoutMs?: number } = {}) {
  return defineTool({
    name: 'cancel_order',
    description: 'Cancel an order.',
    input: Type.Object({ orderId: Type.String({ pattern: '^[0-9]{4}$' }) }),
    policy: { effect: 'non_idempotent_write', requiresApproval: false },
    timeoutMs: options.timeoutMs ?? 5000,
    async run(args, ctx) {
      let res: Response;
      try {
        res = await fetch(`${baseUrl}/orders/${args.orderId}/cancel`, {
          method: 'POST',
          headers: { 'idempotency-key': ctx.idempotencyKey },
        });
      } catch (err) {
        throw unreachable(err, 'the order system');
      }
      if (res.status === 404) throw new ToolError('NOT_FOUND', `there is no order ${args.orderId}`);
      if (!res.ok) throw new ToolError('UPSTREAM_UNAVAILABLE', `the order system answered ${res.status}`);
      return res.json();
    },
  });
}
