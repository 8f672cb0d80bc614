/**
 * Demo of the ticket service drill (seed 002): a lost response resubmitted
 * with the same operation id makes one ticket; the same id with another body
 * is refused.
 *
 *   npx tsx src/server.ts                          # the ledger, in another terminal
 *   npx tsx examples/ticket-service/main.ts
 */
import { randomUUID } from 'node:crypto';
import { LedgerClient } from '../../src/client/index.js';
import { ledgerUrl } from '../shared/http.js';
import { createTicket } from './client.js';
import { startTicketService } from './service.js';

const service = await startTicketService({ ledger: new LedgerClient({ baseUrl: ledgerUrl() }) });
const opId = `op-${randomUUID().slice(0, 8)}`;

service.faults.loseResponse.add(opId); // the first create succeeds, its answer is lost
const created = await createTicket(service.url, opId, { title: 'check deploy config', body: 'see D2' });
console.log(
  `create ${opId}: HTTP ${created.status}, ticket ${created.ticket?.id}, ${created.requests} requests, replayed=${created.replayed}`,
);

const reused = await createTicket(service.url, opId, { title: 'something else', body: '...' });
console.log(`same id, other body: HTTP ${reused.status} ${reused.code}`);

const status = await (await fetch(`${service.url}/operations/${opId}`)).json();
console.log(`status query by operation id: ${JSON.stringify(status)}`);
console.log(`tickets created: ${service.tickets.size}`);
await service.close();
