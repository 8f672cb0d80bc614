/**
 * Fake tools for the executor tests: each attempt does what its script says,
 * and every run is counted as an effect at the "downstream".
 */
import { Type } from 'typebox';
import { type ToolContext, type ToolDefinition, ToolError, type ToolPolicy } from '../../src/client/index.js';
import type { Effect } from '../../src/contract/index.js';

/** What one attempt does. */
export type Step =
  | { ok: unknown }
  | { throw: unknown }
  /** Waits for the executor to abort it, then throws an AbortError. */
  | 'hang'
  /** Never settles, whatever the signal says (a tool that ignores cancellation). */
  | 'ignore-abort'
  | ((args: { n: number }, ctx: ToolContext) => Promise<unknown>);

/** A run as the downstream saw it. */
export interface Run {
  key: string;
  attempt: number;
  args: unknown;
}

/** The input of every fake tool: `{ n: number }`, closed by default. */
export const FakeInput = Type.Object({ n: Type.Number() });

/** A tool named `name` whose attempts follow `steps` (the last step repeats). */
export function scriptedTool(
  name: string,
  policy: Effect | ToolPolicy,
  steps: Step[],
  extra: Partial<ToolDefinition<typeof FakeInput>> = {},
): { tool: ToolDefinition<typeof FakeInput>; runs: Run[] } {
  const runs: Run[] = [];
  const tool: ToolDefinition<typeof FakeInput> = {
    name,
    description: `fake ${name}`,
    input: FakeInput,
    policy: typeof policy === 'string' ? { effect: policy, requiresApproval: false } : policy,
    timeoutMs: 2000,
    async run(args, ctx) {
      runs.push({ key: ctx.idempotencyKey, attempt: ctx.attempt, args });
      const step = steps[Math.min(runs.length - 1, steps.length - 1)];
      if (step === undefined) throw new Error('no step');
      if (step === 'hang') {
        return new Promise((_, reject) => {
          ctx.signal.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError')));
        });
      }
      if (step === 'ignore-abort') return new Promise(() => {});
      if (typeof step === 'function') return step(args, ctx);
      if ('throw' in step) throw step.throw;
      return step.ok;
    },
    ...extra,
  };
  return { tool, runs };
}

/** Shorthands for the errors of the classification table. */
export const fail = {
  transient: (code: 'RATE_LIMITED' | 'TIMEOUT' | 'UPSTREAM_UNAVAILABLE', notApplied = false) => ({
    throw: new ToolError(code, `upstream said ${code}`, { notApplied }),
  }),
  terminal: (code: 'INVALID_ARGUMENT' | 'PERMISSION_DENIED' | 'NOT_FOUND' | 'CONFLICT') => ({
    throw: new ToolError(code, `refused: ${code}`),
  }),
  notApplied: (retryable = false) => ({
    throw: new ToolError('REFUSED', 'the service refused before writing', { notApplied: true, retryable }),
  }),
  exception: () => ({
    throw: new Error('duplicate key value violates unique constraint "x" at postgres://app:hunter2@db/prod'),
  }),
};
