/**
 * Demo of the note service on idem/pg (seed 004): a lost answer is followed
 * by a resubmission under the same key and finds the original note; the same
 * key with another text is refused; one note exists.
 *
 *   NOTES_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx examples/note-service/main.ts
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { saveNote } from './client.js';
import { startNoteService } from './service.js';

const pool = new pg.Pool({
  connectionString: process.env.NOTES_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
});
const key = `note-${randomUUID().slice(0, 8)}`;
const service = await startNoteService({ pool, faults: { loseResponse: [key] } });
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
const { rows } = await pool.query('SELECT count(*)::int AS n FROM notes WHERE operation_key = $1', [key]);
console.log(`notes saved under ${key}: ${rows[0].n}`);
await service.close();
await pool.end();
