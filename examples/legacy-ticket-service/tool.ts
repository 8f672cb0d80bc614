/**
 * The legacy ticket service as an agent tool. It cannot be made idempotent
 * and cannot be asked afterwards, so it is a non-idempotent write without a
 * probe: at most one attempt, and a lost answer stays `outcome_unknown` until
 * a person finds out.
 */
import { Type } from 'typebox';
import { defineTool, ToolError } from '../../src/client/index.js';

/** `open_legacy_ticket`; `requiresApproval: false` lets it run unattended (still at most once). */
export function legacyTicketTool(baseUrl: string, options: { timeoutMs?: number } = {}) {
  return defineTool({
    name: 'open_legacy_ticket',
    description: 'Open a ticket in the legacy helpdesk.',
    input: Type.Object({ title: Type.String({ minLength: 1 }) }),
    policy: { effect: 'non_idempotent_write', requiresApproval: false },
    timeoutMs: options.timeoutMs ?? 5000,
    async run(args, ctx) {
      let res: Response;
      try {
        res = await fetch(`${baseUrl}/tickets`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(args),
          signal: ctx.signal,
        });
      } catch (err) {
        // Refused: the request never reached the helpdesk, so nothing was created.
        if ((err as { cause?: { code?: string } }).cause?.code === 'ECONNREFUSED') {
          throw new ToolError('UPSTREAM_UNAVAILABLE', 'the helpdesk cannot be reached', { notApplied: true });
        }
        if (ctx.signal.aborted) throw err;
        // A reset or no answer: the ticket may exist.
        throw new ToolError('UPSTREAM_UNAVAILABLE', 'the helpdesk did not answer');
      }
      if (res.status === 400) throw new ToolError('INVALID_ARGUMENT', 'the helpdesk refused the ticket');
      if (!res.ok) throw new ToolError('UPSTREAM_UNAVAILABLE', `the helpdesk answered ${res.status}`);
      return (await res.json()) as { id: string; title: string };
    },
  });
}
