/**
 * An agent loop with a scripted model, calling tools through the executor:
 * a read, a refund that needs approval and whose answer is lost
 * (outcome_unknown), an idempotent ticket, and the reconciler telling the
 * session what really happened, once.
 *
 *   npx tsx src/server.ts                      # the ledger, in another terminal
 *   npx tsx examples/agent-loop/main.ts
 */
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { LedgerClient, Reconciler, ToolExecutor } from '../../src/client/index.js';
import { ledgerUrl } from '../shared/http.js';
import { createTicketTool } from '../ticket-service/client.js';
import { startTicketService } from '../ticket-service/service.js';
import { startOrderService } from './order-service.js';
import { lastToolResult, ScriptedModel } from './scripted-model.js';
import { Session } from './session.js';
import { getOrderTool, refundOrderTool } from './tools.js';

const scope = 'agent-demo';
const ledger = new LedgerClient({ baseUrl: ledgerUrl() });
const orders = await startOrderService();
const tickets = await startTicketService({ ledger });
const tools = [getOrderTool(orders.url), refundOrderTool(orders.url), createTicketTool(tickets.url)];
// The executor logs one line per call; only errors here, to keep the demo readable.
const logger = pino({ level: 'error' });
const executor = new ToolExecutor({ ledger, scope, tools, logger });

const model = new ScriptedModel([
  () => ({ toolCalls: [{ id: 'call-1', name: 'get_order', arguments: '{"orderId":"1002"}' }] }),
  () => ({
    toolCalls: [{ id: 'call-2', name: 'refund_order', arguments: '{"orderId":"1002","amount":30}' }],
  }),
  (history) =>
    lastToolResult(history).startsWith('the outcome of this call is unknown')
      ? {
          toolCalls: [
            {
              id: 'call-3',
              name: 'create_ticket',
              arguments: JSON.stringify({
                title: 'Check refund of order 1002',
                body: 'The refund call timed out.',
              }),
            },
          ],
        }
      : { text: 'The refund is done.' },
  () => ({
    text: 'I could not confirm the refund; support will check it. I will not refund again meanwhile.',
  }),
  (history) => ({
    text: `Update: ${history.at(-1)?.role === 'user' ? 'the order system confirmed the refund.' : '?'}`,
  }),
]);

// The "person" approves after reading the preview the executor stored with the call.
const approver = async (record: { key: string; inputHash: string }) => {
  const op = await ledger.get(scope, record.key);
  console.log(`  [approver] ${JSON.stringify(op.metadata.preview)} -> approve`);
  orders.faults.loseResponses = 1; // the refund will be paid, its answer lost
  await ledger.approve(scope, record.key, { fingerprint: record.inputHash, note: 'ok' });
};

const session = new Session(`session-${randomUUID().slice(0, 8)}`, model, executor, approver);
session.say('Please refund 30 EUR of order 1002.');
await session.run();

// Out of the session: the reconciler finds the unknown refund and tells the session once.
const reconciler = new Reconciler({
  ledger,
  tools,
  logger,
  source: 'the order system',
  report: async (_record, text) => session.say(text),
});
await reconciler.run({ scope });
await reconciler.run({ scope }); // a second run reports nothing new
await session.run();

for (const m of session.history) {
  if (m.role === 'user') console.log(`user:      ${m.text}`);
  if (m.role === 'assistant')
    console.log(`assistant: ${m.text ?? m.toolCalls?.map((c) => `${c.name}(${c.arguments})`).join(', ')}`);
  if (m.role === 'tool') console.log(`tool:      ${m.text.slice(0, 160)}`);
}
console.log(`refunds paid: ${orders.refunds.length}, tickets opened: ${tickets.tickets.size}`);
await orders.close();
await tickets.close();
