/**
 * Retry schedule and budgets, with injected sleep, random and clock: no test
 * here really waits for a backoff.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DID_NOT_RUN,
  type LedgerError,
  SessionBudget,
  type ToolDefinition,
  ToolError,
  ToolExecutor,
  type ToolExecutorOptions,
} from '../../src/client/index.js';
import { fail, scriptedTool } from './fake-tools.js';
import { type Ledger, memoryLogger, recordingSleep, SETUP_TIMEOUT_MS, startLedger, uid } from './support.js';

let L: Ledger;
beforeAll(async () => {
  L = await startLedger();
}, SETUP_TIMEOUT_MS);
afterAll(() => L.close());

function executor(tools: ToolDefinition[], options: Partial<ToolExecutorOptions> = {}) {
  const rec = recordingSleep();
  const ex = new ToolExecutor({
    ledger: L.ledger,
    scope: 'agents',
    tools,
    logger: memoryLogger().logger,
    sleep: rec.sleep,
    random: () => 0.5,
    ...options,
  });
  return { ex, delays: rec.delays };
}

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
