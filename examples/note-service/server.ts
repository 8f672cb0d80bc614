/**
 * The note service as its own process (the drills kill and restart it).
 *
 *   LEDGER_URL=http://127.0.0.1:8080 npx tsx examples/note-service/server.ts
 *
 * Env: PORT (default 0: any), NOTES_FILE (default .idem/notes.jsonl, ignored by git), NOTE_LEASE_MS,
 * NOTE_WRITE_DELAY_MS, NOTE_FAULTS (JSON, see NoteFaults). Prints one line
 * `note-service listening on <url>` when ready.
 */
import { LedgerClient } from '../../src/client/index.js';
import { ledgerUrl } from '../shared/http.js';
import type { NoteFaults } from './service.js';
import { startNoteService } from './service.js';

const env = process.env;
const service = await startNoteService({
  ledger: new LedgerClient({ baseUrl: ledgerUrl() }),
  file: env.NOTES_FILE ?? '.idem/notes.jsonl',
  port: Number(env.PORT ?? 0),
  ...(env.NOTE_LEASE_MS ? { leaseMs: Number(env.NOTE_LEASE_MS) } : {}),
  ...(env.NOTE_WRITE_DELAY_MS ? { writeDelayMs: Number(env.NOTE_WRITE_DELAY_MS) } : {}),
  faults: env.NOTE_FAULTS ? (JSON.parse(env.NOTE_FAULTS) as NoteFaults) : {},
});
console.log(`note-service listening on ${service.url}`);
const stop = () => void service.close().then(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
