/**
 * Drill D2 (seed 004, docs/drills.md): the note service as a real process, faults injected
 * at three points (crash before commit, response lost after commit, two
 * requests with one key at once), notes counted in the service's own store.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { saveNote } from '../../../examples/note-service/client.js';
import type { Note } from '../../../examples/note-service/note-store.js';
import type { NoteFaults } from '../../../examples/note-service/service.js';
import { tempDir } from '../../support/temp-dir.js';
import { type RestartableLedger, SETUP_TIMEOUT_MS, startRestartableLedger, uid } from '../support.js';
import { type Child, runTs } from './processes.js';

let L: RestartableLedger;
const children: Child[] = [];
const shared: Child[] = [];
// Child processes start slowly on a loaded machine: hooks get the same room as tests.
beforeAll(async () => {
  L = await startRestartableLedger();
}, SETUP_TIMEOUT_MS);
afterEach(async () => {
  // Per-test processes die here; the shared service of the nested block lives until the end.
  await Promise.all(children.splice(0).map((c) => c.kill9()));
});
afterAll(async () => {
  await Promise.all(shared.splice(0).map((c) => c.kill9()));
  await L.close();
});

/** Starts the note service process on `file`; answers its URL and the child. */
async function notes(
  file: string,
  faults: NoteFaults = {},
  extra: Record<string, string> = {},
  keep = children,
) {
  const { child, match } = await runTs(
    'examples/note-service/server.ts',
    {
      LEDGER_URL: L.url(),
      NOTES_FILE: file,
      NOTE_LEASE_MS: '1000',
      NOTE_FAULTS: JSON.stringify(faults),
      ...extra,
    },
    /note-service listening on (http:\/\/\S+)/,
  );
  keep.push(child);
  return { url: match[1] as string, child };
}

/** The notes in the durable file, for one key: the effect count. */
function notesInFile(file: string, key: string): Note[] {
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch {}
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Note)
    .filter((n) => n.operationKey === key);
}

const input = { folderId: 'drafts', text: 'check the deploy config' };
const freshFile = () => join(tempDir('idem-notes-'), 'notes.jsonl');

describe('D2: note service', { timeout: 180_000 }, () => {
  it('crash before commit: the resubmission after a restart saves exactly one note', async () => {
    const file = freshFile();
    const key = uid('note');
    const first = await notes(file, { crashBeforeCommit: [key] });
    await expect(saveNote(first.url, key, input)).rejects.toThrow();
    expect((await first.child.exited).signal).toBe('SIGKILL');
    expect(notesInFile(file, key)).toHaveLength(0);

    const second = await notes(file);
    const saved = await saveNote(second.url, key, input);
    expect(saved.status).toBe(201);
    expect(notesInFile(file, key)).toEqual([saved.note]);
  });

  it('crash after the note is written, before the ledger heard of it: the re-run finds it, one note', async () => {
    const file = freshFile();
    const key = uid('note');
    const first = await notes(file, { crashAfterCommit: [key] });
    await expect(saveNote(first.url, key, input)).rejects.toThrow();
    expect(notesInFile(file, key)).toHaveLength(1);

    const second = await notes(file);
    const saved = await saveNote(second.url, key, input);
    expect(saved.status).toBe(201);
    expect(notesInFile(file, key)).toEqual([saved.note]);
  });

  describe('on one running service', () => {
    const file = freshFile();
    const lostKey = uid('note');
    let url = '';
    beforeAll(async () => {
      url = (await notes(file, { loseResponse: [lostKey] }, { NOTE_WRITE_DELAY_MS: '300' }, shared)).url;
    }, SETUP_TIMEOUT_MS);

    it('response lost after commit: the resubmission replays the original, one note', async () => {
      await expect(saveNote(url, lostKey, input)).rejects.toThrow();
      const again = await saveNote(url, lostKey, input);
      expect(again).toMatchObject({ status: 200, replayed: true });
      expect(notesInFile(file, lostKey)).toEqual([again.note]);
    });

    it('two requests with the same key at the same moment: one note, both get it', async () => {
      const key = uid('note');
      const [a, b] = await Promise.all([saveNote(url, key, input), saveNote(url, key, input)]);
      expect([a.status, b.status].sort()).toEqual([200, 201]);
      expect(a.note).toEqual(b.note);
      expect(notesInFile(file, key)).toHaveLength(1);
    });

    it('the same key with other arguments is rejected, no note written', async () => {
      const key = uid('note');
      await saveNote(url, key, input);
      const other = await saveNote(url, key, { folderId: 'drafts', text: 'another text' });
      expect(other).toMatchObject({ status: 422, code: 'KEY_REUSED' });
      expect(notesInFile(file, key).map((n) => n.text)).toEqual([input.text]);
    });
  });

  it('after a restart of every process the original result is still readable', async ({ skip }) => {
    if (!L.canRestart) skip('needs Postgres: the embedded engine lives and dies with one process');
    const file = freshFile();
    const key = uid('note');
    const before = await notes(file);
    const saved = await saveNote(before.url, key, input);
    expect(saved.status).toBe(201);

    await before.child.stop();
    await L.restart();
    const after = await notes(file);
    const status = await (await fetch(`${after.url}/operations/${encodeURIComponent(key)}`)).json();
    expect(status).toEqual({ status: 'succeeded', result: saved.note });
    const note = await (await fetch(`${after.url}/notes/${saved.note?.id}`)).json();
    expect(note).toEqual(saved.note);
    const again = await saveNote(after.url, key, input);
    expect(again).toMatchObject({ status: 200, replayed: true, note: saved.note });
    expect(notesInFile(file, key)).toHaveLength(1);
  });
});
