/**
 * Demo of the note service (seed 004): a lost answer is followed by a
 * resubmission under the same key and finds the original note; the same key
 * with another text is refused.
 *
 *   npx tsx src/server.ts                        # the ledger, in another terminal
 *   npx tsx examples/note-service/main.ts
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LedgerClient } from '../../src/client/index.js';
import { ledgerUrl } from '../shared/http.js';
import { saveNote } from './client.js';
import { startNoteService } from './service.js';

const key = `note-${randomUUID().slice(0, 8)}`;
const service = await startNoteService({
  ledger: new LedgerClient({ baseUrl: ledgerUrl() }),
  file: join(mkdtempSync(join(tmpdir(), 'notes-')), 'notes.jsonl'),
  faults: { loseResponse: [key] },
});
const input = { folderId: 'drafts', text: 'check the deploy config' };

try {
  await saveNote(service.url, key, input);
} catch {
  console.log(`save ${key}: no answer (timeout); not "not saved": ask again with the same key`);
}
const again = await saveNote(service.url, key, input);
console.log(`resubmitted: HTTP ${again.status}, note ${again.note?.id}, replayed=${again.replayed}`);
const other = await saveNote(service.url, key, { folderId: 'drafts', text: 'another text' });
console.log(`same key, other text: HTTP ${other.status} ${other.code}`);
console.log(`notes saved: ${service.store.all().length}`);
await service.close();
