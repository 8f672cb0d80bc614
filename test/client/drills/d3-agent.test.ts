/**
 * Drill D3 (seed 000, docs/drills.md): the agent runtime. Real executor, real ledger over
 * HTTP, worker processes killed with SIGKILL, effects counted at the order
 * and ticket services.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type OrderService, startOrderService } from '../../../examples/agent-loop/order-service.js';
import { ScriptedModel } from '../../../examples/agent-loop/scripted-model.js';
import { Session } from '../../../examples/agent-loop/session.js';
import { cancelOrderTool, getOrderTool, refundOrderTool } from '../../../examples/agent-loop/tools.js';
import { createTicketTool } from '../../../examples/ticket-service/client.js';
import { startTicketService, type TicketService } from '../../../examples/ticket-service/service.js';
import {
  type CallRecord,
  DID_NOT_RUN,
  LedgerClient,
  OUTCOME_UNKNOWN_TEXT,
  Reconciler,
  type ToolCall,
  type ToolDefinition,
  ToolExecutor,
} from '../../../src/client/index.js';
import type { Effect } from '../../../src/contract/index.js';
import { eventually, memoryLogger, SETUP_TIMEOUT_MS, uid, useLedger } from '../support.js';
import { type Child, runTs } from './processes.js';

const L = useLedger();
let orders: OrderService;
let tickets: TicketService;
const children: Child[] = [];
beforeAll(async () => {
  orders = await startOrderService();
  tickets = await startTicketService({ ledger: L.ledger });
}, SETUP_TIMEOUT_MS);
afterEach(async () => {
  await Promise.all(children.splice(0).map((c) => c.kill9()));
});
afterAll(async () => {
  await orders.close();
  await tickets.close();
});

const SCOPE = 'agent-drill';
const asTool = (t: unknown) => t as ToolDefinition;
const withEffect = (t: ToolDefinition, effect: Effect) => ({ ...t, policy: { ...t.policy, effect } });
const executor = (tools: ToolDefinition[], ledger = L.ledger) =>
  new ToolExecutor({ ledger, scope: SCOPE, tools, logger: memoryLogger().logger, pollMs: 100 });
const newCall = (name: string, args: unknown, toolCallId = 'call-7'): ToolCall => ({
  sessionId: uid('session'),
  turnId: 'turn-3',
  toolCallId,
  name,
  arguments: args,
});

/** Starts a worker process on `call` and kills it once `reached()` says the downstream got the request. */
async function workerDiesAfterDispatch(
  tool: 'get_order' | 'refund_order' | 'create_ticket',
  call: ToolCall,
  reached: () => boolean,
  effect?: Effect,
) {
  const serviceUrl = tool === 'create_ticket' ? tickets.url : orders.url;
  const config = {
    ledgerUrl: L.url,
    scope: SCOPE,
    serviceUrl,
    tool,
    leaseMs: 1000,
    call,
    ...(effect ? { effect } : {}),
  };
  const { child } = await runTs(
    'test/client/drills/agent-worker.ts',
    { WORKER_CONFIG: JSON.stringify(config) },
    /worker ready/,
  );
  children.push(child);
  await eventually(reached, 30_000);
  const key = `${call.sessionId}/${call.turnId}/${call.toolCallId}`;
  const op = await L.ledger.get(SCOPE, key);
  expect(op.status).toBe('in_progress');
  expect(op.lease?.dispatchedAt).not.toBeNull();
  await child.kill9();
  expect(child.output()).not.toContain('record ');
  return key;
}

describe('D3: every attempt fails before reaching the tool', () => {
  it('the downstream refuses every connection: failed, "the tool did not run", no effect', async () => {
    const closed = await startOrderService();
    await closed.close();
    const cases: [ToolDefinition, unknown][] = [
      [asTool(getOrderTool(closed.url)), { orderId: '1002' }],
      [asTool(refundOrderTool(closed.url, { requiresApproval: false })), { orderId: '1002', amount: 5 }],
    ];
    for (const [tool, args] of cases) {
      const record = await executor([tool]).execute(newCall(tool.name, args));
      expect(record.attempts).toBe(tool.policy.effect === 'read' ? 3 : 1);
      expect(record.status).toBe('failed');
      expect(record.modelMessage.startsWith(DID_NOT_RUN)).toBe(true);
      expect((await L.ledger.get(SCOPE, record.key)).status).toBe('ready');
    }
    expect(closed.requests).toHaveLength(0);
  });

  it('the ledger cannot be reached: failed, "the tool did not run", no effect', async () => {
    const before = orders.refunds.length;
    const dead = new LedgerClient({ baseUrl: 'http://127.0.0.1:9', retry: { attempts: 2, baseMs: 1 } });
    const tool = asTool(refundOrderTool(orders.url, { requiresApproval: false }));
    const record = await executor([tool], dead).execute(
      newCall('refund_order', { orderId: '1002', amount: 5 }),
    );
    expect(record).toMatchObject({ status: 'failed', attempts: 0, error: { code: 'LEDGER_UNAVAILABLE' } });
    expect(record.modelMessage.startsWith(DID_NOT_RUN)).toBe(true);
    expect(orders.refunds.length).toBe(before);
  });
});

describe('D3: the worker dies after dispatch', { timeout: 180_000 }, () => {
  it('a read is run again by the next worker and succeeds', async () => {
    const reads = () => orders.requests.filter((r) => r.method === 'GET' && r.path === '/orders/1003').length;
    const before = reads();
    orders.faults.holdReads = 1;
    const call = newCall('get_order', { orderId: '1003' });
    const key = await workerDiesAfterDispatch('get_order', call, () => reads() === before + 1);
    const record = await executor([asTool(getOrderTool(orders.url))]).execute(call);
    expect(record).toMatchObject({ status: 'succeeded', attempts: 1, output: { id: '1003' } });
    expect(reads()).toBe(before + 2);
    expect((await L.ledger.get(SCOPE, key)).attempt).toBe(2);
  });

  it('an idempotent write is run again with the same key; the service dedupes: one ticket', async () => {
    const call = newCall('create_ticket', { title: 'printer', body: 'on fire' });
    const key = `${call.sessionId}/${call.turnId}/${call.toolCallId}`;
    tickets.faults.hold.add(key);
    const ticketsOf = () => [...tickets.tickets.values()].filter((t) => t.operationId === key);
    await workerDiesAfterDispatch('create_ticket', call, () => ticketsOf().length === 1);
    const record = await executor([asTool(createTicketTool(tickets.url))]).execute(call);
    expect(record).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect(ticketsOf()).toHaveLength(1);
    expect(record.output).toEqual(ticketsOf()[0]);
    expect(tickets.requests.filter((r) => r === key)).toHaveLength(2);
  });

  it.each(['non_idempotent_write', 'unclassified'] as const)(
    '%s becomes outcome_unknown and the session never runs it again',
    async (effect) => {
      const before = orders.refunds.length;
      orders.faults.holdResponses = 1;
      const call = newCall('refund_order', { orderId: '1004', amount: 12 });
      const key = await workerDiesAfterDispatch(
        'refund_order',
        call,
        () => orders.refunds.length === before + 1,
        effect,
      );
      const tool = withEffect(asTool(refundOrderTool(orders.url, { requiresApproval: false })), effect);
      for (let i = 0; i < 3; i++) {
        const record = await executor([tool]).execute(call);
        expect(record).toMatchObject({ status: 'outcome_unknown', attempts: 0, effect });
        expect(record.modelMessage.startsWith(OUTCOME_UNKNOWN_TEXT)).toBe(true);
      }
      expect(orders.refunds.length).toBe(before + 1);
      expect((await L.ledger.get(SCOPE, key)).status).toBe('outcome_unknown');
    },
  );
});

describe('D3: a cancelled attempt keeps running and the model asks again', () => {
  it('two calls, two keys, both reach the service, the service dedupes by business key; the records say so', async () => {
    orders.faults.slowCancels = 1;
    orders.faults.slowCancelMs = 600;
    const tool = asTool(cancelOrderTool(orders.url, { timeoutMs: 100 }));
    const ex = executor([tool]);
    const sessionId = uid('session');
    const first = await ex.execute({
      sessionId,
      turnId: 'turn-1',
      toolCallId: 'call-1',
      name: 'cancel_order',
      arguments: { orderId: '1005' },
    });
    expect(first).toMatchObject({ status: 'outcome_unknown', error: { code: 'TIMEOUT' } });
    // The model reads "unknown" and asks again: a new call, a new key.
    const second = await ex.execute({
      sessionId,
      turnId: 'turn-2',
      toolCallId: 'call-1',
      name: 'cancel_order',
      arguments: { orderId: '1005' },
    });
    expect(second.status).toBe('succeeded');
    expect(second.key).not.toBe(first.key);

    await eventually(() => orders.cancelAnswers.filter((a) => a.key === first.key).length === 1);
    const forOrder = orders.cancellations.filter((c) => c.orderId === '1005');
    expect(forOrder).toHaveLength(1);
    const answers = orders.cancelAnswers.filter((a) => a.key === first.key || a.key === second.key);
    expect(answers.map((a) => a.key).sort()).toEqual([first.key, second.key].sort());
    expect(new Set(answers.map((a) => a.cancellationId))).toEqual(new Set([forOrder[0]?.id]));
    expect(second.output).toMatchObject({ id: forOrder[0]?.id });
    expect((await L.ledger.get(SCOPE, first.key)).status).toBe('outcome_unknown');
    expect((await L.ledger.get(SCOPE, second.key)).status).toBe('succeeded');
  });
});

describe('D3: reconciling', () => {
  it('finds the unknown call, rebuilds its key, asks the service, reports once; again and concurrently, nothing new', async () => {
    const scope = uid('recon');
    const tool = asTool(refundOrderTool(orders.url, { requiresApproval: false }));
    const ex = new ToolExecutor({ ledger: L.ledger, scope, tools: [tool], logger: memoryLogger().logger });
    const before = orders.refunds.length;
    orders.faults.loseResponses = 1;
    const call = newCall('refund_order', { orderId: '1002', amount: 30 });
    const unknown = await ex.execute(call);
    expect(unknown.status).toBe('outcome_unknown');
    expect(orders.refunds.length).toBe(before + 1);

    const reports: { record: CallRecord; text: string }[] = [];
    const reconciler = () =>
      new Reconciler({
        ledger: L.ledger,
        tools: [tool],
        source: 'the order system',
        logger: memoryLogger().logger,
        report: async (record, text) => {
          reports.push({ record, text });
        },
      });
    await Promise.all([reconciler().run({ scope }), reconciler().run({ scope })]);
    await reconciler().run({ scope });
    expect(reports).toHaveLength(1);
    const refund = orders.refunds.at(-1);
    expect(refund?.idempotencyKey).toBe(unknown.key);
    expect(reports[0]?.text).toBe(
      `Note from the order system: the refund of order 1002 went through (${refund?.id}). (tool call ${unknown.key})`,
    );
    expect(reports[0]?.record).toMatchObject({
      key: unknown.key,
      status: 'succeeded',
      output: { id: refund?.id },
    });

    // The session asks the same call again: replayed from the ledger, never paid twice.
    const again = await ex.execute(call);
    expect(again).toMatchObject({ status: 'succeeded', attempts: 0, output: { id: refund?.id } });
    expect(orders.refunds.length).toBe(before + 1);
  });
});

describe('D3: the agent loop end to end', () => {
  it('a scripted model calls tools through the executor; the unknown refund is reported once', async () => {
    const scope = uid('loop');
    const tools = [
      asTool(getOrderTool(orders.url)),
      asTool(refundOrderTool(orders.url)),
      asTool(createTicketTool(tickets.url)),
    ];
    const ex = new ToolExecutor({ ledger: L.ledger, scope, tools, logger: memoryLogger().logger });
    const refundsBefore = orders.refunds.length;
    const model = new ScriptedModel([
      () => ({ toolCalls: [{ id: 'call-1', name: 'get_order', arguments: '{"orderId":"1001"}' }] }),
      () => ({
        toolCalls: [{ id: 'call-2', name: 'refund_order', arguments: '{"orderId":"1001","amount":30}' }],
      }),
      () => ({
        toolCalls: [
          { id: 'call-3', name: 'create_ticket', arguments: '{"title":"check refund 1001","body":"-"}' },
        ],
      }),
      () => ({ text: 'Support will check the refund.' }),
      () => ({ text: 'The refund went through.' }),
    ]);
    const approved: string[] = [];
    const session = new Session(uid('session'), model, ex, async (record) => {
      approved.push(record.key);
      orders.faults.loseResponses = 1;
      await L.ledger.approve(scope, record.key, { fingerprint: record.inputHash });
    });
    session.say('Refund 30 EUR of order 1001.');
    expect(await session.run()).toBe('Support will check the refund.');
    expect(session.records.map((r) => r.status)).toEqual(['succeeded', 'outcome_unknown', 'succeeded']);
    expect(approved).toHaveLength(1);

    const rec = new Reconciler({
      ledger: L.ledger,
      tools,
      source: 'the order system',
      logger: memoryLogger().logger,
      report: async (_r, text) => session.say(text),
    });
    await rec.run({ scope });
    await rec.run({ scope });
    expect(await session.run()).toBe('The refund went through.');
    const notes = session.history.filter(
      (m) => m.role === 'user' && m.text.startsWith('Note from the order system'),
    );
    expect(notes).toHaveLength(1);
    expect(orders.refunds.length).toBe(refundsBefore + 1);
  });
});
