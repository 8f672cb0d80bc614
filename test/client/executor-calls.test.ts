/**
 * One call through the executor, against the real ledger: validation,
 * identity, replays, approvals, another worker holding the call, heartbeats,
 * redaction and the log line.
 */
import { Type } from 'typebox';
import { describe, expect, it } from 'vitest';
import {
  DID_NOT_RUN,
  IN_PROGRESS_TEXT,
  inputHash,
  LedgerError,
  OUTCOME_UNKNOWN_TEXT,
  type ToolCall,
  type ToolDefinition,
  type ToolExecutorOptions,
} from '../../src/client/index.js';
import { scriptedTool } from './fake-tools.js';
import { eventually, recordingSleep, testExecutor, uid, useLedger } from './support.js';

const L = useLedger();

const executor = (tools: ToolDefinition[], options: Partial<ToolExecutorOptions> = {}) =>
  testExecutor(L, tools, options);

const call = (name: string, args: unknown, sessionId = uid()): ToolCall => ({
  sessionId,
  turnId: 'turn-3',
  toolCallId: 'call-7',
  name,
  arguments: args,
});

async function expectAbsent(key: string) {
  const err = await L.ledger.get('agents', key).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(LedgerError);
  expect((err as LedgerError).code).toBe('NOT_FOUND');
}

describe('validation', () => {
  it.each([
    ['a wrong type', { n: 'one' }],
    ['a missing field', {}],
    ['an unknown field (additionalProperties false by default)', { n: 1, admin: true }],
    ['invalid JSON text', '{"n": 1'],
  ])('refuses %s: failed INVALID_ARGUMENT, nothing in the ledger, tool not run', async (_, args) => {
    const { tool, runs } = scriptedTool('fake', 'read', [{ ok: 1 }]);
    const { ex } = executor([tool]);
    const record = await ex.execute(call('fake', args));
    expect(record).toMatchObject({ status: 'failed', attempts: 0, error: { code: 'INVALID_ARGUMENT' } });
    expect(record.error?.nextAction).toBe('fix_arguments');
    expect(record.modelMessage.startsWith(DID_NOT_RUN)).toBe(true);
    expect(runs).toHaveLength(0);
    await expectAbsent(record.key);
  });

  it('accepts arguments as JSON text and keys the call as session/turn/call', async () => {
    const { tool, runs } = scriptedTool('fake', 'read', [{ ok: 1 }]);
    const { ex } = executor([tool]);
    const c = call('fake', '{"n": 5}');
    const record = await ex.execute(c);
    expect(record.status).toBe('succeeded');
    expect(record.key).toBe(`${c.sessionId}/turn-3/call-7`);
    expect(record.callId).toBe('call-7');
    expect(runs[0]).toMatchObject({ key: record.key, args: { n: 5 } });
    expect(record.inputHash).toBe(inputHash({ n: 5 }));
    const op = await L.ledger.get('agents', record.key);
    // The executor's hash and the ledger's fingerprint are the same function of the arguments.
    expect(op.fingerprint).toBe(record.inputHash);
    expect(op.request).toEqual({ n: 5 });
    expect(op.metadata).toMatchObject({
      tool: 'fake',
      sessionId: c.sessionId,
      turnId: 'turn-3',
      toolCallId: 'call-7',
      preview: null,
      traceId: null,
    });
  });

  it('a tool that does not exist did not run', async () => {
    const { ex } = executor([]);
    const record = await ex.execute(call('nope', {}));
    expect(record).toMatchObject({ status: 'failed', error: { code: 'NOT_FOUND' } });
    await expectAbsent(record.key);
  });
});

describe('identity and replay', () => {
  it('executing the same call again replays the stored outcome without running', async () => {
    const { tool, runs } = scriptedTool('fake', 'idempotent_write', [
      { ok: { ticket: 1 } },
      { ok: { ticket: 2 } },
    ]);
    const { ex } = executor([tool]);
    const c = call('fake', { n: 1 });
    const first = await ex.execute(c);
    const again = await ex.execute(c);
    expect(runs).toHaveLength(1);
    expect(again).toMatchObject({ status: 'succeeded', output: { ticket: 1 }, attempts: 0 });
    expect(again.modelMessage).toBe(first.modelMessage);
  });

  it('the same call id with other arguments is KEY_REUSED and does not run', async () => {
    const { tool, runs } = scriptedTool('fake', 'idempotent_write', [{ ok: 1 }]);
    const { ex } = executor([tool]);
    const c = call('fake', { n: 1 });
    await ex.execute(c);
    const other = await ex.execute({ ...c, arguments: { n: 2 } });
    expect(other).toMatchObject({
      status: 'failed',
      error: { code: 'KEY_REUSED', nextAction: 'use_new_call_id' },
    });
    expect(runs).toHaveLength(1);
  });

  it('after outcome_unknown, the same call is not run again', async () => {
    const { tool, runs } = scriptedTool('fake', 'non_idempotent_write', [
      { throw: new Error('boom') },
      { ok: 1 },
    ]);
    const { ex } = executor([tool]);
    const c = call('fake', { n: 1 });
    expect((await ex.execute(c)).status).toBe('outcome_unknown');
    const again = await ex.execute(c);
    expect(again.status).toBe('outcome_unknown');
    expect(again.modelMessage.startsWith(OUTCOME_UNKNOWN_TEXT)).toBe(true);
    expect(runs).toHaveLength(1);
  });
});

describe('approval', () => {
  const write = (policy: ToolDefinition['policy']) => scriptedTool('refund', policy, [{ ok: 'refunded' }]);

  it('a non-idempotent write waits for a person by default; approved, the same call runs', async () => {
    const { tool, runs } = write({ effect: 'non_idempotent_write' });
    const { ex } = executor([tool]);
    const c = call('refund', { n: 30 });
    const pending = await ex.execute(c);
    expect(pending).toMatchObject({ status: 'pending_approval', requiresApproval: true, attempts: 0 });
    expect(pending.approval?.state).toBe('pending');
    expect(pending.modelMessage).toMatch(/waiting for a person's approval/);
    expect(runs).toHaveLength(0);
    await L.ledger.approve('agents', pending.key, { fingerprint: pending.inputHash });
    const done = await ex.execute(c);
    expect(done).toMatchObject({ status: 'succeeded', output: 'refunded' });
    expect(done.approval?.state).toBe('approved');
    expect(runs).toHaveLength(1);
  });

  it('rejected: the call is recorded rejected and never runs', async () => {
    const { tool, runs } = write({ effect: 'unclassified' });
    const { ex } = executor([tool]);
    const c = call('refund', { n: 30 });
    const pending = await ex.execute(c);
    await L.ledger.reject('agents', pending.key, { note: 'too much' });
    const done = await ex.execute(c);
    expect(done).toMatchObject({ status: 'rejected', error: { code: 'REJECTED' } });
    expect(done.modelMessage).toMatch(/too much/);
    expect(runs).toHaveLength(0);
  });

  it('requiresApproval overrides the default both ways', async () => {
    const asks = write({ effect: 'idempotent_write', requiresApproval: true });
    const skips = write({ effect: 'non_idempotent_write', requiresApproval: false });
    expect((await executor([asks.tool]).ex.execute(call('refund', { n: 1 }))).status).toBe(
      'pending_approval',
    );
    const ran = await executor([skips.tool]).ex.execute(call('refund', { n: 1 }));
    expect(ran).toMatchObject({ status: 'succeeded', requiresApproval: false });
    expect(asks.runs).toHaveLength(0);
    expect(skips.runs).toHaveLength(1);
  });

  it('with approval.wait, the call blocks until a person decides, then runs', async () => {
    const { tool, runs } = write({ effect: 'non_idempotent_write' });
    const { sleep } = recordingSleep();
    const { ex } = executor([tool], {
      approval: { wait: true, pollMs: 5 },
      // Real (short) pauses: the approver below needs the loop to yield.
      sleep: async (ms, signal) => {
        await sleep(ms, signal);
        await new Promise((r) => setTimeout(r, ms));
      },
    });
    const c = call('refund', { n: 30 });
    const key = `${c.sessionId}/${c.turnId}/${c.toolCallId}`;
    const running = ex.execute(c);
    await eventually(
      async () => (await L.ledger.get('agents', key).catch(() => null))?.status === 'pending_approval',
    );
    await L.ledger.approve('agents', key);
    expect(await running).toMatchObject({ status: 'succeeded', output: 'refunded' });
    expect(runs).toHaveLength(1);
  });

  it('the policy in force when the model asked wins over a later change', async () => {
    const before = write({ effect: 'non_idempotent_write' });
    const c = call('refund', { n: 30 });
    const pending = await executor([before.tool]).ex.execute(c);
    expect(pending.effect).toBe('non_idempotent_write');
    await L.ledger.approve('agents', pending.key);
    // Later the tool is re-declared as a read that needs no approval.
    const after = scriptedTool('refund', 'read', [{ throw: new Error('flaky') }, { ok: 'again' }]);
    const done = await executor([after.tool]).ex.execute(c);
    expect(done).toMatchObject({
      effect: 'non_idempotent_write',
      requiresApproval: true,
      status: 'outcome_unknown',
    });
    expect(after.runs).toHaveLength(1);
  });
});

describe('another worker holds the call', () => {
  it('waits within the deadline and reports what the ledger says; the tool runs once', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const { tool, runs } = scriptedTool('slow', 'idempotent_write', [
      async () => {
        await gate;
        return { done: true };
      },
    ]);
    const a = executor([tool]).ex;
    const b = executor([tool], {
      pollMs: 20,
      sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
    }).ex;
    const c = call('slow', { n: 1 });
    const first = a.execute(c);
    await eventually(() => runs.length === 1);
    const second = b.execute(c);
    await new Promise((r) => setTimeout(r, 100));
    release();
    expect(await first).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect(await second).toMatchObject({ status: 'succeeded', output: { done: true }, attempts: 0 });
    expect(runs).toHaveLength(1);
  });

  it('gives up at the deadline with outcome_unknown', async () => {
    const { tool, runs } = scriptedTool('slow', 'non_idempotent_write', ['ignore-abort'], {
      policy: { effect: 'non_idempotent_write', requiresApproval: false },
      timeoutMs: 60_000,
    });
    const a = executor([tool], { callTimeoutMs: 60_000 }).ex;
    let clock = Date.now();
    const b = executor([tool], {
      callTimeoutMs: 1000,
      now: () => clock,
      sleep: async (ms) => {
        clock += ms;
      },
    }).ex;
    const c = call('slow', { n: 1 });
    const stopA = new AbortController();
    const holder = a.execute(c, { signal: stopA.signal });
    await eventually(() => runs.length === 1);
    const record = await b.execute(c);
    expect(record).toMatchObject({ status: 'outcome_unknown', error: { code: 'OPERATION_IN_PROGRESS' } });
    expect(runs).toHaveLength(1);
    // Nothing will report this run's end: the waiter is told to ask again, not to wait for a report.
    expect(record.error).toMatchObject({ nextAction: 'retry_later', retryable: true });
    expect(record.modelMessage.startsWith(IN_PROGRESS_TEXT)).toBe(true);
    expect(record.modelMessage).not.toContain('will be reported');
    stopA.abort(new Error('test over'));
    // Cancelled mid-run, a non-idempotent write may have happened.
    expect((await holder).status).toBe('outcome_unknown');
  });

  it('a waiter that gave up gets the outcome by executing the same call again later', async () => {
    let finish!: () => void;
    const gate = new Promise<void>((r) => {
      finish = r;
    });
    const { tool, runs } = scriptedTool('slow', 'idempotent_write', [
      async () => {
        await gate;
        return { done: true };
      },
    ]);
    const a = executor([tool]).ex;
    let clock = Date.now();
    const b = executor([tool], {
      callTimeoutMs: 1000,
      now: () => clock,
      sleep: async (ms) => {
        clock += ms;
      },
    }).ex;
    const c = call('slow', { n: 2 });
    const holder = a.execute(c);
    await eventually(() => runs.length === 1);
    const gaveUp = await b.execute(c);
    expect(gaveUp.modelMessage.startsWith(IN_PROGRESS_TEXT)).toBe(true);
    finish();
    expect(await holder).toMatchObject({ status: 'succeeded', attempts: 1 });
    // The ledger does not list it for reconciliation: it ended succeeded.
    expect((await L.ledger.get('agents', gaveUp.key)).status).toBe('succeeded');
    const later = await b.execute(c);
    expect(later).toMatchObject({ status: 'succeeded', output: { done: true }, attempts: 0 });
    expect(runs).toHaveLength(1);
  });
});

describe('leases and cancellation', () => {
  it('heartbeats while the tool runs longer than a third of the lease', async () => {
    let firstExpiry = '';
    const { tool } = scriptedTool('long', 'read', [
      async (_args, ctx) => {
        const op = await L.ledger.get('agents', ctx.idempotencyKey);
        firstExpiry = op.lease?.expiresAt ?? '';
        // Done only once the executor has extended the lease on its own.
        await eventually(async () => {
          const now = await L.ledger.get('agents', ctx.idempotencyKey);
          return (now.lease?.expiresAt ?? '') > firstExpiry;
        });
        return 'kept alive';
      },
    ]);
    const { ex } = executor([tool], { leaseMs: 1000 });
    const record = await ex.execute(call('long', { n: 1 }));
    expect(record).toMatchObject({ status: 'succeeded', output: 'kept alive', attempts: 1 });
  });

  it('a call cancelled before it runs did not run and leaves the operation acquirable', async () => {
    const { tool, runs } = scriptedTool('fake', 'read', [{ ok: 1 }]);
    const { ex } = executor([tool]);
    const controller = new AbortController();
    controller.abort(new Error('user left'));
    const record = await ex.execute(call('fake', { n: 1 }), { signal: controller.signal });
    expect(record).toMatchObject({ status: 'failed', error: { code: 'CANCELLED' } });
    expect(runs).toHaveLength(0);
  });
});

describe('secrets and the log line', () => {
  const Card = Type.Object({ amount: Type.Number(), card: Type.Object({ number: Type.String() }) });
  const payTool = (): ToolDefinition<typeof Card> => ({
    name: 'pay',
    description: 'charge a card',
    input: Card,
    policy: { effect: 'idempotent_write', redact: ['card.number'] },
    preview: (args) => ({ action: 'charge', amount: args.amount }),
    run: async () => ({ charged: true }),
  });

  it('keeps redacted paths out of the ledger but binds the key to the full arguments', async () => {
    const { ex, lines } = executor([payTool() as unknown as ToolDefinition]);
    const c = call('pay', { amount: 30, card: { number: '4111111111111111' } });
    const record = await ex.execute(c, { traceId: 'trace-1' });
    expect(record.status).toBe('succeeded');
    const op = await L.ledger.get('agents', record.key);
    expect(JSON.stringify(op)).not.toContain('4111111111111111');
    expect(op.fingerprint).toBe(record.inputHash);
    expect(op.metadata).toMatchObject({
      request: { amount: 30, card: { number: '[REDACTED]' } },
      preview: { action: 'charge', amount: 30 },
      traceId: 'trace-1',
    });
    const other = await ex.execute({ ...c, arguments: { amount: 30, card: { number: '5500000000000004' } } });
    expect(other.error?.code).toBe('KEY_REUSED');

    const callLines = lines.filter((l) => l.call);
    expect(callLines).toHaveLength(2);
    const text = JSON.stringify(callLines);
    expect(text).not.toContain('4111111111111111');
    expect(text).not.toContain('charged');
    expect(callLines[0]).toMatchObject({
      traceId: 'trace-1',
      call: { status: 'succeeded', inputHash: record.inputHash, key: record.key, tool: 'pay' },
    });
  });
});
