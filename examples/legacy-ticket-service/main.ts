/**
 * Demo: a lost answer from a downstream with no idempotency and no status
 * query stops at `outcome_unknown`, and nothing runs it again.
 *
 *   npx tsx src/server.ts                                 # the ledger, in another terminal
 *   npx tsx examples/legacy-ticket-service/main.ts
 */
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { LedgerClient, Reconciler, ToolExecutor } from '../../src/client/index.js';
import { ledgerUrl } from '../shared/http.js';
import { startLegacyTicketService } from './service.js';
import { legacyTicketTool } from './tool.js';

const ledger = new LedgerClient({ baseUrl: ledgerUrl() });
const helpdesk = await startLegacyTicketService();
const tool = legacyTicketTool(helpdesk.url);
// The executor logs one line per call; only errors here, to keep the demo readable.
const logger = pino({ level: 'error' });
const executor = new ToolExecutor({ ledger, scope: 'legacy-demo', tools: [tool], logger });

helpdesk.faults.loseResponses = 1; // the ticket is created, the answer never arrives
const call = {
  sessionId: `session-${randomUUID().slice(0, 8)}`,
  turnId: 'turn-1',
  toolCallId: 'call-1',
  name: tool.name,
  arguments: { title: 'VPN is down' },
};
const first = await executor.execute(call);
console.log(`first call:  ${first.status} -> ${first.modelMessage}`);

const again = await executor.execute(call);
console.log(`same call:   ${again.status} (the tool was not run again)`);

const summary = await new Reconciler({ ledger, tools: [tool], logger, report: async () => {} }).run({
  scope: 'legacy-demo',
});
console.log(
  `reconciler:  left ${summary.left} call(s) unknown (this one and any from earlier runs): no probe, no check, so a person must find out`,
);
console.log(`helpdesk tickets created: ${helpdesk.tickets.length}`);
await helpdesk.close();
