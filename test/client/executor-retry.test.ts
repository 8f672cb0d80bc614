/**
 * Retry schedule and budgets, with injected sleep, random and clock: no test
 * here really waits for a backoff.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  DID_NOT_RUN,
  IN_PROGRESS_TEXT,
  type LedgerError,
  SessionBudget,
  type ToolDefinition,
  ToolError,
  type ToolExecutorOptions,
} from '../../src/client/index.js';
import { expireLease } from '../support/http.js';
import { fetchFailed } from './fake-fetch.js';
import { fail, scriptedTool } from './fake-tools.js';
import { eventually, testExecutor, uid, useLedger } from './support.js';

const L = useLedger();

const executor = (tools: ToolDefinition[], options: Partial<ToolExecutorOptions> = {}) =>
  testExecutor(L, tools, options);

const call = (name: string, sessionId = uid(), toolCallId = uid('c')) => ({
  sessionId,
  turnId: 't',
  toolCallId,
  name,
  arguments: { n: 1 },
});

describe('retry schedule', () => {
  it('default: 3 attempts, full jitter under 200 ms * 2^(n-1)', async () => {
    const { tool, runs } = scriptedTool('up', 'read', [fail.transient('UPSTREAM_UNAVAILABLE')]);
    const { ex, delays } = executor([tool]);
    const record = await ex.execute(call('up'));
    expect(runs).toHaveLength(3);
    expect(record.attempts).toBe(3);
    expect(delays).toEqual([100, 200]);
  });

  it('every delay lies within [0, min(cap, base * 2^(n-1))] for any jitter draw', async () => {
    const { tool } = scriptedTool('up', 'idempotent_write', [fail.transient('TIMEOUT')], {
      policy: { effect: 'idempotent_write', retry: { attempts: 6, baseMs: 300, capMs: 2000 } },
    });
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), {
          minLength: 5,
          maxLength: 5,
        }),
        async (draws) => {
          const queue = [...draws];
          const { ex, delays } = executor([tool], { random: () => queue.shift() ?? 0 });
          const record = await ex.execute(call('up'));
          expect(record.attempts).toBe(6);
          expect(delays).toHaveLength(5);
          delays.forEach((d, i) => {
            expect(d).toBeGreaterThanOrEqual(0);
            expect(d).toBeLessThanOrEqual(Math.min(2000, 300 * 2 ** i));
            expect(d).toBe(Math.floor((draws[i] as number) * Math.min(2000, 300 * 2 ** i)));
          });
        },
      ),
      { numRuns: 8 },
    );
  });

  it("the upstream's Retry-After raises the delay, still under the cap", async () => {
    const { tool } = scriptedTool('rl', 'read', [
      { throw: new ToolError('RATE_LIMITED', 'slow down', { retryAfterMs: 5000 }) },
      { throw: new ToolError('RATE_LIMITED', 'slow down', { retryAfterMs: 50_000 }) },
      { ok: 'done' },
    ]);
    const { ex, delays } = executor([tool]);
    expect((await ex.execute(call('rl'))).status).toBe('succeeded');
    expect(delays).toEqual([5000, 8000]);
  });

  it('a non-idempotent write is never retried, whatever its retry policy says', async () => {
    const { tool, runs } = scriptedTool(
      'w',
      'non_idempotent_write',
      [fail.transient('UPSTREAM_UNAVAILABLE')],
      {
        policy: { effect: 'non_idempotent_write', requiresApproval: false, retry: { attempts: 5 } },
      },
    );
    const { ex, delays } = executor([tool]);
    expect((await ex.execute(call('w'))).status).toBe('outcome_unknown');
    expect(runs).toHaveLength(1);
    expect(delays).toEqual([]);
  });

  it('stops retrying when the next delay would pass the call deadline', async () => {
    let clock = 1_000_000;
    const { tool, runs } = scriptedTool('up', 'read', [fail.transient('UPSTREAM_UNAVAILABLE')], {
      policy: { effect: 'read', retry: { attempts: 10, baseMs: 800, capMs: 8000 } },
    });
    const { ex } = executor([tool], {
      callTimeoutMs: 2000,
      random: () => 0.99,
      now: () => clock,
      sleep: async (ms) => {
        clock += ms;
      },
    });
    const record = await ex.execute(call('up'));
    // 792 ms fits before the deadline, the next 1584 ms does not.
    expect(runs).toHaveLength(2);
    expect(record).toMatchObject({ status: 'failed', error: { code: 'DEADLINE_EXCEEDED' } });
    expect(record.error?.message).toContain('UPSTREAM_UNAVAILABLE');
  });
});

describe('session budget', () => {
  it('caps attempts across calls of a session; an exhausted budget fails fast and records nothing', async () => {
    const flaky = scriptedTool('up', 'read', [fail.transient('UPSTREAM_UNAVAILABLE')]);
    const budget = new SessionBudget({ maxAttempts: 4 });
    const { ex } = executor([flaky.tool], { budget });
    const session = uid();
    const first = await ex.execute(call('up', session));
    expect(first.attempts).toBe(3);
    const second = await ex.execute(call('up', session));
    expect(second).toMatchObject({ status: 'failed', attempts: 1, error: { code: 'BUDGET_EXHAUSTED' } });
    expect(second.error?.message).toContain('UPSTREAM_UNAVAILABLE');
    expect((await L.ledger.get('agents', second.key)).status).toBe('failed');

    const third = await ex.execute(call('up', session));
    expect(third).toMatchObject({ status: 'failed', attempts: 0, error: { code: 'BUDGET_EXHAUSTED' } });
    expect(third.modelMessage.startsWith(DID_NOT_RUN)).toBe(true);
    const err = await L.ledger.get('agents', third.key).catch((e: unknown) => e);
    expect((err as LedgerError).code).toBe('NOT_FOUND');
    expect(flaky.runs).toHaveLength(4);
    expect(budget.used(session).attempts).toBe(4);

    // Another session has its own budget.
    expect((await ex.execute(call('up', uid()))).attempts).toBe(3);
  });

  it('caps wall time: a session that spent its time gets BUDGET_EXHAUSTED before the next attempt', async () => {
    let clock = 5_000_000;
    const slow = scriptedTool('slow', 'read', [
      async () => {
        clock += 600;
        throw new ToolError('UPSTREAM_UNAVAILABLE', 'down');
      },
    ]);
    const { ex } = executor([slow.tool], {
      budget: { maxWallMs: 1000 },
      now: () => clock,
      sleep: async () => {},
    });
    const session = uid();
    const record = await ex.execute(call('slow', session));
    // 600 ms spent after attempt 1, 1200 after attempt 2: no third attempt.
    expect(slow.runs).toHaveLength(2);
    expect(record.error?.code).toBe('BUDGET_EXHAUSTED');
    const next = await ex.execute(call('slow', session));
    expect(next).toMatchObject({ attempts: 0, error: { code: 'BUDGET_EXHAUSTED' } });
    expect(slow.runs).toHaveLength(2);
  });

  it('a replay costs no attempt: a settled call re-executed with the budget spent answers from the ledger', async () => {
    const done = scriptedTool('save', 'idempotent_write', [{ ok: { ticket: 'T-1' } }]);
    const session = uid();
    const first = executor([done.tool], { budget: { maxAttempts: 1 } }).ex;
    const c = call('save', session);
    expect(await first.execute(c)).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect(first.budget.exhausted(session)).toBeDefined();

    const again = await first.execute(c);
    expect(again).toMatchObject({ status: 'succeeded', output: { ticket: 'T-1' }, attempts: 0 });
    expect(again.modelMessage.startsWith(DID_NOT_RUN)).toBe(false);

    // Another replica, whose own (in-memory) budget this session spent elsewhere.
    const replica = executor([done.tool], { budget: { maxAttempts: 1 } }).ex;
    replica.budget.takeAttempt(session);
    const there = await replica.execute(c);
    expect(there).toMatchObject({ status: 'succeeded', output: { ticket: 'T-1' }, attempts: 0 });
    expect(done.runs).toHaveLength(1);

    // A new call of the spent session never started: that one did not run.
    const fresh = await replica.execute(call('save', session));
    expect(fresh).toMatchObject({ status: 'failed', attempts: 0, error: { code: 'BUDGET_EXHAUSTED' } });
    expect(fresh.modelMessage.startsWith(DID_NOT_RUN)).toBe(true);
  });

  it('a spent budget never says "did not run" for a call the ledger cannot vouch for', async () => {
    const { tool, runs } = scriptedTool('save', 'idempotent_write', [{ ok: 'saved' }]);
    const session = uid();
    const c = call('save', session);
    const unreachable = L.client({
      fetch: (async () => {
        throw fetchFailed('ECONNREFUSED');
      }) as typeof fetch,
      retry: { attempts: 1 },
    });
    const ex = executor([tool], { ledger: unreachable, budget: { maxAttempts: 0 } }).ex;
    const record = await ex.execute(c);
    expect(record).toMatchObject({
      status: 'failed',
      attempts: 0,
      error: { code: 'BUDGET_EXHAUSTED', nextAction: 'ask_user', retryable: false },
    });
    expect(record.modelMessage.startsWith(DID_NOT_RUN)).toBe(false);
    expect(record.modelMessage).toContain('may have taken effect');

    // Held by a worker that is still running it: running elsewhere, not "did not run".
    let finish!: () => void;
    const gate = new Promise<void>((r) => {
      finish = r;
    });
    const slow = scriptedTool('slow', 'idempotent_write', [
      async () => {
        await gate;
        return 'late';
      },
    ]);
    const holder = executor([slow.tool]).ex;
    const held = call('slow', session);
    const running = holder.execute(held);
    await eventually(() => slow.runs.length === 1);
    const waiter = await executor([slow.tool], { budget: { maxAttempts: 0 } }).ex.execute(held);
    expect(waiter).toMatchObject({
      status: 'outcome_unknown',
      error: { code: 'OPERATION_IN_PROGRESS', nextAction: 'retry_later' },
    });
    expect(waiter.modelMessage.startsWith(IN_PROGRESS_TEXT)).toBe(true);
    finish();
    expect(await running).toMatchObject({ status: 'succeeded' });
    expect(runs).toHaveLength(0);
  });

  it('a call taken over from a worker that dispatched it is never "did not run" when the budget stops it', async () => {
    const { tool, runs } = scriptedTool('save', 'idempotent_write', [{ ok: 'saved' }]);
    const c = call('save');
    const key = `${c.sessionId}/${c.turnId}/${c.toolCallId}`;
    // A worker dispatched the call and died: its lease lapses, the next begin recovers it.
    await L.ledger.begin('agents', { key, request: c.arguments, effect: 'idempotent_write' });
    await expireLease(L.db, 'agents', key);
    // Another call of the session took the last attempt between the check and the run.
    class Raced extends SessionBudget {
      override takeAttempt(): boolean {
        return false;
      }
    }
    const record = await executor([tool], { budget: new Raced() }).ex.execute(c);
    expect(record).toMatchObject({ status: 'failed', attempts: 0, error: { code: 'BUDGET_EXHAUSTED' } });
    expect(record.modelMessage.startsWith(DID_NOT_RUN)).toBe(false);
    expect(record.modelMessage).toContain('may have taken effect');
    expect(runs).toHaveLength(0);
  });

  it('counts overlapping calls of one session once in wall time', () => {
    let clock = 0;
    const budget = new SessionBudget({ now: () => clock, maxWallMs: 10_000 });
    const a = budget.enter('s');
    clock = 100;
    const b = budget.enter('s');
    clock = 300;
    a();
    clock = 400;
    b();
    clock = 1000;
    expect(budget.used('s').wallMs).toBe(400);
  });
});
