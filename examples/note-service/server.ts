/**
 * The note service as its own process (the drills kill and restart it).
 *
 *   NOTES_DATABASE_URL=postgres://... npx tsx examples/note-service/server.ts   # idem/pg (service.ts)
 *   LEDGER_URL=http://127.0.0.1:8080 npx tsx examples/note-service/server.ts   # remote ledger, file store
 *
 * Env: PORT (default 0: any), NOTE_INTEGRATION (once | middleware, with idem/pg),
 * NOTES_FILE (file store, default .idem/notes.jsonl), NOTE_LEASE_MS (remote ledger),
 * NOTE_WRITE_DELAY_MS, NOTE_FAULTS (JSON, see NoteFaults). Prints one line
 * `note-service listening on <url>` when ready.
 */
import pg from 'pg';
import { LedgerClient } from '../../src/client/index.js';
import { ledgerUrl } from '../shared/http.js';
import { startFileNoteService } from './file-service.js';
import { type NoteFaults, startNoteService } from './service.js';

const env = process.env;
const faults = env.NOTE_FAULTS ? (JSON.parse(env.NOTE_FAULTS) as NoteFaults) : {};
const common = {
  port: Number(env.PORT ?? 0),
  ...(env.NOTE_WRITE_DELAY_MS ? { writeDelayMs: Number(env.NOTE_WRITE_DELAY_MS) } : {}),
  faults,
};
let close: () => Promise<void>;
let url: string;
if (env.NOTES_DATABASE_URL) {
  const pool = new pg.Pool({ connectionString: env.NOTES_DATABASE_URL, max: 8 });
  // An idle client whose server went away emits 'error'; unhandled, it would end the process.
  pool.on('error', (err) => console.error(`database: ${err.message}`));
  const integration = env.NOTE_INTEGRATION === 'middleware' ? 'middleware' : 'once';
  const service = await startNoteService({ pool, integration, ...common });
  url = service.url;
  close = () => service.close().then(() => pool.end());
} else {
  const service = await startFileNoteService({
    ledger: new LedgerClient({ baseUrl: ledgerUrl() }),
    file: env.NOTES_FILE ?? '.idem/notes.jsonl',
    ...(env.NOTE_LEASE_MS ? { leaseMs: Number(env.NOTE_LEASE_MS) } : {}),
    ...common,
  });
  url = service.url;
  close = service.close;
}
console.log(`note-service listening on ${url}`);
const stop = () => void close().then(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
