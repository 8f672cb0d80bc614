/**
 * The classification table (docs/executor.md), row by row, against the real
 * ledger over HTTP: each test checks the record, the model text, the ledger's
 * state and how often the fake downstream was hit.
 */
import { describe, expect, it } from 'vitest';
import {
  type CallRecord,
  DID_NOT_RUN,
  OUTCOME_UNKNOWN_TEXT,
  type ToolDefinition,
} from '../../src/client/index.js';
import type { Effect } from '../../src/contract/index.js';
import { type FakeInput, fail, type Step, scriptedTool } from './fake-tools.js';
import { testExecutor, uid, useLedger } from './support.js';

const L = useLedger();

const REPEATABLE: Effect[] = ['read', 'idempotent_write'];
const AT_MOST_ONCE: Effect[] = ['non_idempotent_write', 'unclassified'];

async function runOnce(effect: Effect, steps: Step[], extra: Partial<ToolDefinition<typeof FakeInput>> = {}) {
  const { tool, runs } = scriptedTool('fake', effect, steps, { timeoutMs: 100, ...extra });
  const { ex, delays } = testExecutor(L, [tool]);
  const record = await ex.execute({
    sessionId: uid(),
    turnId: 't1',
    toolCallId: 'c1',
    name: 'fake',
    arguments: { n: 1 },
  });
  const op = await L.ledger.get('agents', record.key);
  return { record, runs, op, delays };
}

function expectDidNotRun(record: CallRecord) {
  expect(record.status).toBe('failed');
  expect(record.modelMessage.startsWith(DID_NOT_RUN)).toBe(true);
  expect(record.error?.nextAction).toBe('call_again');
}

function expectUnknown(record: CallRecord) {
  expect(record.status).toBe('outcome_unknown');
  expect(record.modelMessage.startsWith(OUTCOME_UNKNOWN_TEXT)).toBe(true);
  expect(record.error?.retryable).toBe(false);
}

describe('row: the tool returned a value', () => {
  it.each([...REPEATABLE, ...AT_MOST_ONCE])('%s: complete succeeded', async (effect) => {
    const { record, runs, op } = await runOnce(effect, [{ ok: { id: 7 } }]);
    expect(record).toMatchObject({ status: 'succeeded', output: { id: 7 }, attempts: 1, effect });
    expect(record.modelMessage).toBe('{"id":7}');
    expect(runs).toHaveLength(1);
    expect(op).toMatchObject({ status: 'succeeded', result: { id: 7 }, attempt: 1 });
    expect(op.lease).toBeNull();
  });
});

describe('row: ToolError retryable RATE_LIMITED / TIMEOUT / UPSTREAM_UNAVAILABLE', () => {
  for (const code of ['RATE_LIMITED', 'TIMEOUT', 'UPSTREAM_UNAVAILABLE'] as const) {
    it.each(REPEATABLE)(`%s, ${code}: retried with the same key, then complete failed`, async (effect) => {
      const { record, runs, op, delays } = await runOnce(effect, [fail.transient(code)]);
      expect(runs).toHaveLength(3);
      expect(new Set(runs.map((r) => r.key))).toEqual(new Set([record.key]));
      expect(runs.map((r) => r.attempt)).toEqual([1, 2, 3]);
      expect(delays).toHaveLength(2);
      expect(record).toMatchObject({ status: 'failed', attempts: 3, error: { code } });
      expect(record.modelMessage.startsWith(DID_NOT_RUN)).toBe(false);
      expect(op.status).toBe('failed');
      expect(op.result).toMatchObject({ code });
      // One acquisition for all attempts: retries stay inside the lease.
      expect(op.attempt).toBe(1);
    });

    it.each(AT_MOST_ONCE)(`%s, ${code}: one attempt, outcome_unknown`, async (effect) => {
      const { record, runs, op } = await runOnce(effect, [fail.transient(code)]);
      expect(runs).toHaveLength(1);
      expectUnknown(record);
      expect(op.status).toBe('outcome_unknown');
    });

    it.each(AT_MOST_ONCE)(`%s, ${code} with notApplied: released, did not run`, async (effect) => {
      const { record, runs, op } = await runOnce(effect, [fail.transient(code, true)]);
      expect(runs).toHaveLength(1);
      expectDidNotRun(record);
      expect(op.status).toBe('ready');
    });
  }

  it('a read that succeeds on the second attempt is succeeded with 2 attempts', async () => {
    const { record, runs, op } = await runOnce('read', [fail.transient('RATE_LIMITED'), { ok: 'fine' }]);
    expect(runs).toHaveLength(2);
    expect(record).toMatchObject({ status: 'succeeded', output: 'fine', attempts: 2, modelMessage: 'fine' });
    expect(op.status).toBe('succeeded');
  });
});

describe('row: ToolError notApplied', () => {
  it.each([...REPEATABLE, ...AT_MOST_ONCE])('%s, not retryable: released at once', async (effect) => {
    const { record, runs, op } = await runOnce(effect, [fail.notApplied(false)]);
    expect(runs).toHaveLength(1);
    expectDidNotRun(record);
    expect(record.error?.code).toBe('REFUSED');
    expect(op.status).toBe('ready');
  });

  it.each(REPEATABLE)(
    '%s, retryable: retried, and released when no attempt had an effect',
    async (effect) => {
      const { record, runs, op } = await runOnce(effect, [fail.notApplied(true)]);
      expect(runs).toHaveLength(3);
      expectDidNotRun(record);
      expect(op.status).toBe('ready');
    },
  );

  it('idempotent write: one attempt that may have applied makes the end complete failed, not released', async () => {
    const { record, op } = await runOnce('idempotent_write', [
      fail.transient('TIMEOUT'),
      fail.notApplied(true),
    ]);
    expect(record.status).toBe('failed');
    expect(record.error?.nextAction).toBe('check_state');
    expect(record.modelMessage.startsWith(DID_NOT_RUN)).toBe(false);
    expect(op.status).toBe('failed');
  });
});

describe('row: ToolError INVALID_ARGUMENT, PERMISSION_DENIED, NOT_FOUND, CONFLICT', () => {
  for (const code of ['INVALID_ARGUMENT', 'PERMISSION_DENIED', 'NOT_FOUND', 'CONFLICT'] as const) {
    it.each([...REPEATABLE, ...AT_MOST_ONCE])(`%s, ${code}: complete failed, not retried`, async (effect) => {
      const { record, runs, op } = await runOnce(effect, [fail.terminal(code)]);
      expect(runs).toHaveLength(1);
      expect(record).toMatchObject({ status: 'failed', attempts: 1, error: { code, retryable: false } });
      expect(op.status).toBe('failed');
      expect(op.result).toMatchObject({ code, message: `refused: ${code}` });
    });
  }
});

describe('row: timeout, abort, any other exception', () => {
  it.each(REPEATABLE)('%s, timeout: retried, then complete failed', async (effect) => {
    const { record, runs, op } = await runOnce(effect, ['hang'], { timeoutMs: 30 });
    expect(runs).toHaveLength(3);
    expect(record).toMatchObject({ status: 'failed', attempts: 3, error: { code: 'TIMEOUT' } });
    expect(op.status).toBe('failed');
  });

  it.each(AT_MOST_ONCE)('%s, timeout: outcome_unknown', async (effect) => {
    const { record, runs, op } = await runOnce(effect, ['hang'], { timeoutMs: 30 });
    expect(runs).toHaveLength(1);
    expectUnknown(record);
    expect(record.error?.code).toBe('TIMEOUT');
    expect(op.status).toBe('outcome_unknown');
  });

  it.each(REPEATABLE)('%s, exception: retried; the model never sees its message', async (effect) => {
    const { record, runs, op } = await runOnce(effect, [fail.exception()]);
    expect(runs).toHaveLength(3);
    expect(record.error).toMatchObject({ code: 'TOOL_EXCEPTION' });
    for (const text of [record.modelMessage, JSON.stringify(op.result)]) {
      expect(text).not.toMatch(/hunter2|duplicate key|postgres:|\n\s+at /);
    }
  });

  it.each(AT_MOST_ONCE)('%s, exception: outcome_unknown', async (effect) => {
    const { record, runs, op } = await runOnce(effect, [fail.exception()]);
    expect(runs).toHaveLength(1);
    expectUnknown(record);
    expect(record.modelMessage).not.toMatch(/hunter2|duplicate key/);
    expect(op.status).toBe('outcome_unknown');
  });

  it('a tool that ignores the abort is left behind: the call still ends at its timeout', async () => {
    const { record, runs } = await runOnce('non_idempotent_write', ['ignore-abort'], { timeoutMs: 30 });
    expect(runs).toHaveLength(1);
    expectUnknown(record);
  });
});
