/**
 * The ticket service as its own process (the drills kill and restart it).
 *
 *   LEDGER_URL=http://127.0.0.1:8080 npx tsx examples/ticket-service/server.ts
 *   TICKETS_DATABASE_URL=postgres://... npx tsx examples/ticket-service/server.ts   # on idem/pg
 *
 * Env: PORT (default 0: any), TICKETS_FILE (memory store's file, remote ledger),
 * TICKET_LEASE_MS, TICKET_FAULTS (JSON: { crashBeforeWrite, crashAfterWrite,
 * crashAfterCommit: [keys] }). Prints `ticket-service listening on <url>` when ready.
 */
import pg from 'pg';
import { LedgerClient } from '../../src/client/index.js';
import { PgLedger } from '../../src/pg/index.js';
import { ledgerUrl } from '../shared/http.js';
import { startTicketService } from './service.js';
import { MemoryTicketStore, PgTicketStore } from './ticket-store.js';

const env = process.env;
const faults = JSON.parse(env.TICKET_FAULTS ?? '{}') as Record<string, string[] | undefined>;
const set = (name: string) => new Set(faults[name] ?? []);
let ledger: LedgerClient | PgLedger;
let store: MemoryTicketStore | PgTicketStore;
let pool: pg.Pool | undefined;
if (env.TICKETS_DATABASE_URL) {
  pool = new pg.Pool({ connectionString: env.TICKETS_DATABASE_URL, max: 8 });
  // An idle client whose server went away emits 'error'; unhandled, it would end the process.
  pool.on('error', (err) => console.error(`database: ${err.message}`));
  const pgLedger = new PgLedger({ pool, actor: 'ticket-service' });
  await pgLedger.migrate();
  const pgStore = new PgTicketStore(pool);
  await pgStore.migrate();
  [ledger, store] = [pgLedger, pgStore];
} else {
  ledger = new LedgerClient({ baseUrl: ledgerUrl() });
  store = new MemoryTicketStore(env.TICKETS_FILE);
}
const service = await startTicketService({
  ledger,
  store,
  port: Number(env.PORT ?? 0),
  ...(env.TICKET_LEASE_MS ? { leaseMs: Number(env.TICKET_LEASE_MS) } : {}),
  faults: {
    crashBeforeWrite: set('crashBeforeWrite'),
    crashAfterWrite: set('crashAfterWrite'),
    crashAfterCommit: set('crashAfterCommit'),
  },
});
console.log(`ticket-service listening on ${service.url}`);
const stop = () =>
  void service
    .close()
    .then(() => pool?.end())
    .then(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
