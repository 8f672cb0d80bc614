/**
 * The order system the agent works on. Refunds are NOT idempotent (each POST
 * pays out again), but every refund remembers the idempotency key it came
 * with, so a reconciler can ask afterwards whether a call went through.
 */
import { randomUUID } from 'node:crypto';
import { type Listening, listen, lose, problem, readJson, send } from '../shared/http.js';

/** A refund paid out. */
export interface Refund {
  id: string;
  orderId: string;
  amount: number;
  idempotencyKey: string | null;
}

/** A cancellation; at most one per order, whatever key asked for it. */
export interface Cancellation {
  id: string;
  orderId: string;
  /** The idempotency key of the request that made it. */
  idempotencyKey: string | null;
}

/** Faults a drill can inject. */
export interface OrderFaults {
  /** Refunds that pay out and then lose their answer. */
  loseResponses: number;
  /** Refunds that pay out and never answer. */
  holdResponses: number;
  /** Order reads that never answer. */
  holdReads: number;
  /** Cancellations that first wait this long (not abortable), then act. */
  slowCancelMs: number;
  slowCancels: number;
}

/** A running order service. */
export interface OrderService extends Listening {
  refunds: Refund[];
  cancellations: Cancellation[];
  /** Every request: method, path and idempotency key, in arrival order. */
  requests: { method: string; path: string; key: string | null }[];
  /** Every answered cancel request: the key it came with and the cancellation it got. */
  cancelAnswers: { key: string | null; cancellationId: string }[];
  faults: OrderFaults;
}

/** Starts the service with orders 1001..1005. */
export async function startOrderService(port = 0): Promise<OrderService> {
  const orders = new Map(['1001', '1002', '1003', '1004', '1005'].map((id) => [id, { id, total: 120 }]));
  const refunds: Refund[] = [];
  const cancellations: Cancellation[] = [];
  const requests: OrderService['requests'] = [];
  const cancelAnswers: OrderService['cancelAnswers'] = [];
  const faults: OrderFaults = {
    loseResponses: 0,
    holdResponses: 0,
    holdReads: 0,
    slowCancelMs: 0,
    slowCancels: 0,
  };
  const listening = await listen(async (req, res, url) => {
    const header = req.headers['idempotency-key'];
    const key = typeof header === 'string' ? header : null;
    requests.push({ method: req.method ?? '', path: url.pathname, key });
    const order = /^\/orders\/([^/]+)$/.exec(url.pathname);
    if (req.method === 'GET' && order) {
      const o = orders.get(order[1] as string);
      if (!o) return problem(res, 404, 'NOT_FOUND', 'no such order');
      if (faults.holdReads > 0) {
        faults.holdReads--;
        return;
      }
      return send(res, 200, {
        ...o,
        refunded: refunds.filter((r) => r.orderId === o.id).reduce((s, r) => s + r.amount, 0),
      });
    }
    const refund = /^\/orders\/([^/]+)\/refunds$/.exec(url.pathname);
    if (req.method === 'POST' && refund) {
      const o = orders.get(refund[1] as string);
      if (!o) return problem(res, 404, 'NOT_FOUND', 'no such order');
      const input = (await readJson(req)) as { amount?: unknown } | undefined;
      if (typeof input?.amount !== 'number' || input.amount <= 0)
        return problem(res, 400, 'INVALID_ARGUMENT', 'amount > 0');
      const key = req.headers['idempotency-key'];
      const r: Refund = {
        id: `R-${randomUUID().slice(0, 8)}`,
        orderId: o.id,
        amount: input.amount,
        idempotencyKey: typeof key === 'string' ? key : null,
      };
      refunds.push(r);
      if (faults.holdResponses > 0) {
        faults.holdResponses--;
        return;
      }
      if (faults.loseResponses > 0) {
        faults.loseResponses--;
        return lose(res);
      }
      return send(res, 201, r);
    }
    // Cancelling dedupes on the business key (the order id), not on the
    // idempotency key: two calls with two keys still cancel once.
    const cancel = /^\/orders\/([^/]+)\/cancel$/.exec(url.pathname);
    if (req.method === 'POST' && cancel) {
      const o = orders.get(cancel[1] as string);
      if (!o) return problem(res, 404, 'NOT_FOUND', 'no such order');
      if (faults.slowCancels > 0) {
        faults.slowCancels--;
        await new Promise((r) => setTimeout(r, faults.slowCancelMs));
      }
      let c = cancellations.find((x) => x.orderId === o.id);
      if (!c) {
        c = { id: `C-${randomUUID().slice(0, 8)}`, orderId: o.id, idempotencyKey: key };
        cancellations.push(c);
      }
      cancelAnswers.push({ key, cancellationId: c.id });
      return send(res, 200, c);
    }
    if (req.method === 'GET' && url.pathname === '/refunds') {
      const wanted = url.searchParams.get('key');
      return send(res, 200, {
        refunds: refunds.filter((r) => wanted === null || r.idempotencyKey === wanted),
      });
    }
    return problem(res, 404, 'NOT_FOUND', 'no such route');
  }, port);
  return { ...listening, refunds, cancellations, requests, cancelAnswers, faults };
}
