/**
 * Drill D1 (seed 002, docs/drills.md): a ticket service that uses the ledger before writing,
 * over real HTTP, counting tickets at the service.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLegacyTicketService } from '../../../examples/legacy-ticket-service/service.js';
import { legacyTicketTool } from '../../../examples/legacy-ticket-service/tool.js';
import { createTicket, createTicketTool } from '../../../examples/ticket-service/client.js';
import { startTicketService, type TicketService } from '../../../examples/ticket-service/service.js';
import { DID_NOT_RUN, OUTCOME_UNKNOWN_TEXT, Reconciler, ToolExecutor } from '../../../src/client/index.js';
import { memoryLogger, SETUP_TIMEOUT_MS, uid, useLedger } from '../support.js';

const L = useLedger();
let service: TicketService;
beforeAll(async () => {
  service = await startTicketService({ ledger: L.ledger });
}, SETUP_TIMEOUT_MS);
afterAll(async () => {
  await service.close();
});

const ticketsOf = (opId: string) => [...service.tickets.values()].filter((t) => t.operationId === opId);

describe('D1: ticket service', () => {
  it('the first create succeeds but its response is lost; resubmitted with the same id: two requests, one ticket, one stable result', async () => {
    const opId = uid('op');
    service.faults.loseResponse.add(opId);
    const input = { title: 'check the deploy config', body: 'found in D2' };
    const first = await createTicket(service.url, opId, input);
    expect(first).toMatchObject({ status: 201, replayed: true, requests: 2 });
    expect(service.requests.filter((r) => r === opId)).toHaveLength(2);
    expect(ticketsOf(opId)).toHaveLength(1);
    expect(first.ticket).toEqual(ticketsOf(opId)[0]);

    const later = await createTicket(service.url, opId, input);
    expect(later.ticket).toEqual(first.ticket);
    expect(ticketsOf(opId)).toHaveLength(1);

    // Asking by the original operation id tells the same story.
    const status = await (await fetch(`${service.url}/operations/${encodeURIComponent(opId)}`)).json();
    expect(status).toEqual({ status: 'succeeded', result: first.ticket });
    const events = (await L.ledger.events('tickets', opId)).map((e) => e.type);
    expect(events.filter((t) => t === 'completed')).toHaveLength(1);
  });

  it('the same id with a different body: KEY_REUSED, no ticket', async () => {
    const opId = uid('op');
    await createTicket(service.url, opId, { title: 'A', body: 'for A' });
    const before = service.tickets.size;
    const reused = await createTicket(service.url, opId, { title: 'B', body: 'for B' });
    expect(reused).toMatchObject({ status: 422, code: 'KEY_REUSED' });
    expect(service.tickets.size).toBe(before);
    expect(ticketsOf(opId).map((t) => t.title)).toEqual(['A']);
  });

  it('through the executor: a lost answer of the idempotent ticket tool is retried with the same key, one ticket', async () => {
    const tool = createTicketTool(service.url);
    const ex = new ToolExecutor({
      ledger: L.ledger,
      scope: 'agents',
      tools: [tool],
      logger: memoryLogger().logger,
    });
    const call = {
      sessionId: uid(),
      turnId: 'turn-1',
      toolCallId: 'call-1',
      name: tool.name,
      arguments: { title: 'x', body: 'y' },
    };
    const key = `${call.sessionId}/turn-1/call-1`;
    service.faults.loseResponse.add(key);
    const record = await ex.execute(call);
    expect(record).toMatchObject({ status: 'succeeded', attempts: 2 });
    expect(service.requests.filter((r) => r === key)).toHaveLength(2);
    expect(ticketsOf(key)).toHaveLength(1);
    expect(record.output).toEqual(ticketsOf(key)[0]);
  });
});

describe('D1: a downstream with no idempotency and no status query', () => {
  it('stops at outcome_unknown, and nothing retries it automatically, ever', async () => {
    const helpdesk = await startLegacyTicketService();
    try {
      const tool = legacyTicketTool(helpdesk.url);
      const make = () =>
        new ToolExecutor({ ledger: L.ledger, scope: 'legacy', tools: [tool], logger: memoryLogger().logger });
      const call = {
        sessionId: uid(),
        turnId: 'turn-1',
        toolCallId: 'call-1',
        name: tool.name,
        arguments: { title: 'VPN down' },
      };
      helpdesk.faults.loseResponses = 1;
      const first = await make().execute(call);
      expect(first).toMatchObject({ status: 'outcome_unknown', attempts: 1 });
      expect(first.modelMessage.startsWith(OUTCOME_UNKNOWN_TEXT)).toBe(true);
      expect(helpdesk.tickets).toHaveLength(1);

      // Again from this executor, from a fresh one (another process), and after the reconciler.
      for (let i = 0; i < 3; i++) expect((await make().execute(call)).status).toBe('outcome_unknown');
      const sum = await new Reconciler({
        ledger: L.ledger,
        tools: [tool],
        logger: memoryLogger().logger,
        report: async () => {},
      }).run({
        scope: 'legacy',
      });
      expect(sum).toMatchObject({ left: 1, resolved: 0, reported: 0 });
      expect((await make().execute(call)).status).toBe('outcome_unknown');
      expect(helpdesk.tickets).toHaveLength(1);
      expect((await L.ledger.get('legacy', first.key)).status).toBe('outcome_unknown');
    } finally {
      await helpdesk.close();
    }
  });

  it('a refused connection is known not to have run: failed, safe to call again', async () => {
    const helpdesk = await startLegacyTicketService();
    const url = helpdesk.url;
    await helpdesk.close(); // nothing listens there any more
    const tool = legacyTicketTool(url);
    const ex = new ToolExecutor({
      ledger: L.ledger,
      scope: 'legacy',
      tools: [tool],
      logger: memoryLogger().logger,
    });
    const record = await ex.execute({
      sessionId: uid(),
      turnId: 't',
      toolCallId: 'c',
      name: tool.name,
      arguments: { title: 'x' },
    });
    expect(record.status).toBe('failed');
    expect(record.modelMessage.startsWith(DID_NOT_RUN)).toBe(true);
    expect(helpdesk.tickets).toHaveLength(0);
  });
});
