/**
 * The reconciler against the real ledger: probe, compare-and-set resolve,
 * report once; run twice, run concurrently, and run again after a crash at
 * every step of its protocol.
 */
import { Type } from 'typebox';
import { describe, expect, it } from 'vitest';
import {
  type CallRecord,
  DID_NOT_RUN,
  type LedgerClient,
  type ProbeResult,
  Reconciler,
  type ReconcilerOptions,
  type ToolDefinition,
} from '../../src/client/index.js';
import { memoryLogger, testExecutor, uid, useLedger } from './support.js';

const L = useLedger();

/** The "order system": remembers which cancellations really happened, by idempotency key. */
class Orders {
  readonly applied = new Map<string, string>();
}

const CancelInput = Type.Object({ orderId: Type.String(), apply: Type.Boolean() });

/** A cancellation whose answer is always lost: it applies (or not, as asked) and then the connection drops. */
function cancelOrder(
  orders: Orders,
  probe?: (key: string) => ProbeResult,
): ToolDefinition<typeof CancelInput> {
  return {
    name: 'cancel_order',
    description: 'cancel an order',
    input: CancelInput,
    policy: { effect: 'non_idempotent_write', requiresApproval: false },
    async run(args, ctx) {
      if (args.apply) orders.applied.set(ctx.idempotencyKey, args.orderId);
      throw new Error('socket hang up');
    },
    async probe(args, ctx) {
      if (probe) return probe(ctx.idempotencyKey);
      const done = orders.applied.get(ctx.idempotencyKey) === args.orderId;
      return done
        ? {
            status: 'applied',
            evidence: { cancelled: args.orderId },
            text: `the cancellation of order ${args.orderId} went through.`,
          }
        : { status: 'not_applied' };
    },
  };
}

/** A session sink that keeps every report. */
class Session {
  readonly reports: { record: CallRecord; text: string; reportKey: string }[] = [];
  report: ReconcilerOptions['report'] = async (record, text, { reportKey }) => {
    this.reports.push({ record, text, reportKey });
  };
  wasReported = async (reportKey: string) => this.reports.some((r) => r.reportKey === reportKey);
  count(key: string) {
    return this.reports.filter((r) => r.record.key === key).length;
  }
}

/** Leaves one outcome_unknown call per entry in its own scope; answers the keys. */
async function unknownCalls(
  scope: string,
  tool: ToolDefinition,
  args: Record<string, unknown>[],
): Promise<string[]> {
  const { ex } = testExecutor(L, [tool], { scope });
  const session = uid('session');
  const keys: string[] = [];
  for (const [i, a] of args.entries()) {
    const record = await ex.execute({
      sessionId: session,
      turnId: 'turn-3',
      toolCallId: `call-${i}`,
      name: tool.name,
      arguments: a,
    });
    expect(record.status).toBe('outcome_unknown');
    keys.push(record.key);
  }
  return keys;
}

function reconciler(
  session: Session,
  tools: ToolDefinition[],
  ledger: LedgerClient = L.ledger,
  extra: Partial<ReconcilerOptions> = {},
) {
  return new Reconciler({
    ledger,
    tools,
    report: session.report,
    wasReported: session.wasReported,
    source: 'the order system',
    leaseMs: 1000,
    logger: memoryLogger().logger,
    ...extra,
  });
}

describe('Reconciler', () => {
  it('probes, resolves and reports each unknown call once; a second run reports nothing new', async () => {
    const scope = uid('orders');
    const orders = new Orders();
    const tool = cancelOrder(orders) as unknown as ToolDefinition;
    const [applied, notApplied] = await unknownCalls(scope, tool, [
      { orderId: '1002', apply: true },
      { orderId: '1003', apply: false },
    ]);
    const session = new Session();
    const sum = await reconciler(session, [tool]).run({ scope });
    expect(sum).toMatchObject({ examined: 2, resolved: 2, reported: 2, left: 0 });

    const a = session.reports.find((r) => r.record.key === applied);
    expect(a?.text).toBe(
      `Note from the order system: the cancellation of order 1002 went through. (tool call ${applied})`,
    );
    expect(a?.record).toMatchObject({
      status: 'succeeded',
      output: { cancelled: '1002' },
      tool: 'cancel_order',
      callId: 'call-0',
    });
    const n = session.reports.find((r) => r.record.key === notApplied);
    expect(n?.text).toBe(
      `Note from the order system: the call cancel_order did not go through. (tool call ${notApplied})`,
    );
    expect(n?.record.status).toBe('failed');
    expect(n?.record.modelMessage.startsWith(DID_NOT_RUN)).toBe(true);

    expect(await L.ledger.get(scope, applied as string)).toMatchObject({
      status: 'succeeded',
      result: { cancelled: '1002' },
    });
    const op = await L.ledger.get(scope, notApplied as string);
    expect(op).toMatchObject({ status: 'failed', result: { code: 'NOT_APPLIED' } });
    expect(op.resolution?.note).toMatch(/did not happen/);

    const again = await reconciler(session, [tool]).run({ scope });
    expect(again).toMatchObject({ resolved: 0, reported: 0 });
    expect(session.reports).toHaveLength(2);
  });

  it('leaves what nobody can tell, and resolves to ready when asked', async () => {
    const scope = uid('orders');
    const orders = new Orders();
    const mystery = cancelOrder(orders, () => ({ status: 'unknown' })) as unknown as ToolDefinition;
    const [key] = await unknownCalls(scope, mystery, [{ orderId: '1', apply: true }]);
    const session = new Session();
    expect(await reconciler(session, [mystery]).run({ scope })).toMatchObject({ left: 1, reported: 0 });
    expect((await L.ledger.get(scope, key as string)).status).toBe('outcome_unknown');

    // The user-supplied check answers where the tool has no probe.
    const seen: [string, unknown][] = [];
    const rearm = reconciler(session, [], L.ledger, {
      notApplied: 'ready',
      check: async (k, args) => {
        seen.push([k, args]);
        return { status: 'not_applied' };
      },
    });
    expect(await rearm.run({ scope })).toMatchObject({ resolved: 1, reported: 1 });
    expect(seen).toEqual([[key, { orderId: '1', apply: true }]]);
    expect((await L.ledger.get(scope, key as string)).status).toBe('ready');
    expect(session.reports[0]?.text).toContain('did not go through; it is safe to call again');
  });

  it('two reconcilers at once resolve and report each call once', async () => {
    const scope = uid('orders');
    const orders = new Orders();
    const tool = cancelOrder(orders) as unknown as ToolDefinition;
    const keys = await unknownCalls(
      scope,
      tool,
      Array.from({ length: 6 }, (_, i) => ({ orderId: `${2000 + i}`, apply: i % 2 === 0 })),
    );
    const session = new Session();
    const sums = await Promise.all([
      reconciler(session, [tool]).run({ scope }),
      reconciler(session, [tool]).run({ scope }),
    ]);
    expect(sums[0].resolved + sums[1].resolved).toBe(6);
    expect(sums[0].reported + sums[1].reported).toBe(6);
    for (const key of keys) expect(session.count(key)).toBe(1);
    const resolvedEvents = await Promise.all(
      keys.map(async (k) => (await L.ledger.events(scope, k)).filter((e) => e.type === 'resolved').length),
    );
    expect(resolvedEvents).toEqual(keys.map(() => 1));
  });
});

/** A fetch that "kills the process" at the first request matching `at`: before or after it is sent. */
function dyingClient(at: RegExp, when: 'before' | 'after'): LedgerClient {
  let dead = false;
  return L.client({
    retry: { attempts: 1 },
    fetch: (async (input: string | URL | Request, init?: RequestInit) => {
      if (dead) throw new TypeError('fetch failed', { cause: { code: 'ECONNREFUSED' } });
      const line = `${init?.method ?? 'GET'} ${decodeURIComponent(new URL(String(input)).pathname)}`;
      if (at.test(line)) {
        dead = true;
        if (when === 'before') throw new TypeError('fetch failed', { cause: { code: 'ECONNREFUSED' } });
        await fetch(input, init);
        throw new TypeError('fetch failed', { cause: { code: 'ECONNRESET' } });
      }
      return fetch(input, init);
    }) as typeof fetch,
  });
}

describe('Reconciler when the session cannot be told', () => {
  it('a report that fails is tried again by the next run, and sent once', async () => {
    const scope = uid('orders');
    const orders = new Orders();
    const tool = cancelOrder(orders) as unknown as ToolDefinition;
    const [key] = await unknownCalls(scope, tool, [{ orderId: '1002', apply: true }]);
    const session = new Session();
    const failing = reconciler(session, [tool], L.ledger, {
      report: async () => {
        throw new Error('the session store is down');
      },
    });
    expect(await failing.run({ scope })).toMatchObject({ resolved: 1, reported: 0, skipped: 1 });
    expect(session.count(key as string)).toBe(0);
    expect(await reconciler(session, [tool]).run({ scope })).toMatchObject({ reported: 1 });
    expect(await reconciler(session, [tool]).run({ scope })).toMatchObject({ reported: 0 });
    expect(session.count(key as string)).toBe(1);
  });
});

describe('Reconciler after a crash', () => {
  // [where it dies, the request it dies at, before or after sending it, reports that got out first]
  const points: [string, RegExp, 'before' | 'after', number][] = [
    ['before taking the marker', /^POST \/v1\/scopes\/[^/]+\.reconciler\/operations$/, 'before', 0],
    ['with the marker taken, before resolving', /\/resolve$/, 'before', 0],
    ['after resolving, its answer lost', /\/resolve$/, 'after', 0],
    ['before dispatching the marker', /reconciler-report\/.*\/dispatch$/, 'before', 0],
    ['after dispatching the marker, before reporting', /reconciler-report\/.*\/dispatch$/, 'after', 0],
    ['after reporting, before completing the marker', /reconciler-report\/.*\/complete$/, 'before', 1],
  ];

  it.each(points)('%s: the next run reports exactly once', async (_, at, when, before) => {
    const scope = uid('orders');
    const orders = new Orders();
    const tool = cancelOrder(orders) as unknown as ToolDefinition;
    const [key] = await unknownCalls(scope, tool, [{ orderId: '1002', apply: true }]);
    const session = new Session();
    await reconciler(session, [tool], dyingClient(at, when)).run({ scope });
    expect(session.count(key as string)).toBe(before);

    // The marker lease (1 s) lapses; a fresh process runs the reconciler again, twice.
    await new Promise((r) => setTimeout(r, 1100));
    await reconciler(session, [tool]).run({ scope });
    await reconciler(session, [tool]).run({ scope });
    expect(session.count(key as string)).toBe(1);
    expect(await L.ledger.get(scope, key as string)).toMatchObject({
      status: 'succeeded',
      result: { cancelled: '1002' },
    });
    expect(session.reports[0]?.text).toContain('the cancellation of order 1002 went through');
  });
});
