/**
 * The executor in one file: a read, an idempotent write that hands its key to
 * the service, and a refund that waits for a person.
 *
 *   npx tsx src/server.ts                  # the ledger (another terminal)
 *   npx tsx examples/quickstart.ts
 */
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { Type } from 'typebox';
import { defineTool, LedgerClient, ToolError, ToolExecutor } from '../src/client/index.js';

// A pretend downstream: it dedupes writes on the idempotency key it is given.
const saved = new Map<string, { id: string; text: string }>();

const getWeather = defineTool({
  name: 'get_weather',
  description: 'Current weather of a city.',
  input: Type.Object({ city: Type.String({ minLength: 1 }) }),
  policy: { effect: 'read' }, // retried on trouble, never asks a person
  timeoutMs: 2000,
  run: async ({ city }) => ({ city, celsius: 21 }),
});

const saveNote = defineTool({
  name: 'save_note',
  description: 'Save a note.',
  input: Type.Object({ text: Type.String() }),
  policy: { effect: 'idempotent_write' }, // safe to retry: the service dedupes on the key
  run: async ({ text }, ctx) => {
    const note = saved.get(ctx.idempotencyKey) ?? { id: `note-${saved.size + 1}`, text };
    saved.set(ctx.idempotencyKey, note);
    return note;
  },
});

const refund = defineTool({
  name: 'refund',
  description: 'Refund an order.',
  input: Type.Object({ orderId: Type.String(), amount: Type.Number({ exclusiveMinimum: 0 }) }),
  policy: { effect: 'non_idempotent_write' }, // one attempt, and a person approves first
  preview: ({ orderId, amount }) => ({
    resource: `order ${orderId}`,
    action: 'refund',
    impact: `${amount} EUR`,
  }),
  run: async ({ orderId, amount }) => {
    if (amount > 500) throw new ToolError('PERMISSION_DENIED', 'refunds above 500 EUR need a manager');
    return { refunded: amount, orderId };
  },
});

const ledger = new LedgerClient({ baseUrl: process.env.LEDGER_URL ?? 'http://127.0.0.1:8080' });
const executor = new ToolExecutor({
  ledger,
  scope: 'quickstart', // from configuration, never from the model
  tools: [getWeather, saveNote, refund],
  logger: pino({ level: 'warn' }),
});

const sessionId = `session-${randomUUID().slice(0, 8)}`;
const call = (toolCallId: string, name: string, args: string) => ({
  sessionId,
  turnId: 'turn-1',
  toolCallId,
  name,
  arguments: args, // as the model sent it: JSON text
});

for (const c of [
  call('call-1', 'get_weather', '{"city":"Lyon"}'),
  call('call-2', 'save_note', '{"text":"bring an umbrella"}'),
  call('call-2', 'save_note', '{"text":"bring an umbrella"}'), // the same call again: replayed
  call('call-3', 'get_weather', '{"town":"Lyon"}'), // invalid: never reaches the ledger
]) {
  const record = await executor.execute(c);
  console.log(
    `${c.toolCallId} ${c.name}: ${record.status} (attempts ${record.attempts}) -> ${record.modelMessage}`,
  );
}

const refundCall = call('call-4', 'refund', '{"orderId":"1002","amount":30}');
const pending = await executor.execute(refundCall);
console.log(`call-4 refund: ${pending.status} -> ${pending.modelMessage}`);
// An operator (console, CLI or HTTP) approves what the preview shows...
await ledger.approve('quickstart', pending.key, { fingerprint: pending.inputHash, note: 'ok' });
// ...and the runtime executes the same call again: now it runs, once.
const done = await executor.execute(refundCall);
console.log(`call-4 refund: ${done.status} -> ${done.modelMessage}`);
console.log(`notes saved downstream: ${saved.size}`);
