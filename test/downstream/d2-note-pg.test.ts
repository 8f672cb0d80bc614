/**
 * Drill D2 (seed 004, docs/drills.md) on idem/pg, through `PgLedger.once` and through the
 * fastify plugin's transactional route: the note service as a real process,
 * killed before and after the commit, raced, reused and restarted; notes
 * counted in its own table.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { saveNote } from '../../examples/note-service/client.js';
import type { NoteFaults } from '../../examples/note-service/service.js';
import type { Child } from '../client/drills/processes.js';
import { SETUP_TIMEOUT_MS } from '../client/support.js';
import { onPostgres } from '../support/engine.js';
import { type RunningService, startService } from '../support/service.js';
import { type ProcessFixture, processFixture } from './process-support.js';

const pgOnly = onPostgres();
let f: ProcessFixture;
beforeAll(async () => {
  if (pgOnly) f = await processFixture();
}, SETUP_TIMEOUT_MS);
afterEach(async () => {
  await f?.killAll();
});
afterAll(async () => {
  await f?.close();
});

const input = { folderId: 'drafts', text: 'check the deploy config' };

describe.skipIf(!pgOnly).each(['once', 'middleware'] as const)(
  'D2 on idem/pg (%s)',
  { timeout: 180_000 },
  (integration) => {
    const key = () => `note-${integration}-${randomUUID()}`;
    const notes = (faults: NoteFaults = {}, extra: Record<string, string> = {}, keep?: Child[]) =>
      f.start(
        'examples/note-service/server.ts',
        'note-service',
        {
          NOTES_DATABASE_URL: f.url,
          NOTE_INTEGRATION: integration,
          NOTE_FAULTS: JSON.stringify(faults),
          ...extra,
        },
        keep,
      );
    const notesOf = (k: string) =>
      f.query<{ id: string; text: string }>('SELECT id::text, text FROM notes WHERE operation_key = $1', [k]);
    const opOf = async (k: string) =>
      (
        await f.query<{ status: string }>(
          "SELECT status FROM idem_operations WHERE scope = 'notes' AND key = $1",
          [k],
        )
      )[0]?.status;

    it('crash before the commit: neither the note nor the operation exists; after a restart the retry saves one note', async () => {
      const k = key();
      const first = await notes({ crashBeforeCommit: [k] });
      await expect(saveNote(first.url, k, input)).rejects.toThrow();
      expect((await first.child.exited).signal).toBe('SIGKILL');
      expect(await notesOf(k)).toHaveLength(0);
      expect(await opOf(k)).toBeUndefined();

      const second = await notes();
      const saved = await saveNote(second.url, k, input);
      expect(saved).toMatchObject({ status: 201, replayed: false });
      expect((await notesOf(k)).map((n) => n.id)).toEqual([saved.note?.id]);
    });

    it('crash after the commit, before the answer: both exist; after a restart the retry replays the note', async () => {
      const k = key();
      const first = await notes({ crashAfterCommit: [k] });
      await expect(saveNote(first.url, k, input)).rejects.toThrow();
      expect(await notesOf(k)).toHaveLength(1);
      expect(await opOf(k)).toBe('succeeded');

      const second = await notes();
      const again = await saveNote(second.url, k, input);
      expect(again).toMatchObject({ status: 201, replayed: true });
      expect((await notesOf(k)).map((n) => n.id)).toEqual([again.note?.id]);
    });

    describe('on one running service', () => {
      const lostKey = key();
      const shared: Child[] = [];
      let url = '';
      beforeAll(async () => {
        url = (await notes({ loseResponse: [lostKey] }, { NOTE_WRITE_DELAY_MS: '300' }, shared)).url;
      }, SETUP_TIMEOUT_MS);
      afterAll(async () => {
        await Promise.all(shared.map((c) => c.kill9()));
      });

      it('response lost after the commit: the resubmission replays the original, one note', async () => {
        await expect(saveNote(url, lostKey, input)).rejects.toThrow();
        const again = await saveNote(url, lostKey, input);
        expect(again).toMatchObject({ status: 201, replayed: true });
        expect((await notesOf(lostKey)).map((n) => n.id)).toEqual([again.note?.id]);
      });

      it('two requests with the same key at once: one note, both get it (a twin waits on the key)', async () => {
        const k = key();
        const [a, b] = await Promise.all([saveNote(url, k, input), saveNote(url, k, input)]);
        expect([a.status, b.status]).toEqual([201, 201]);
        expect([a.replayed, b.replayed].sort()).toEqual([false, true]);
        expect(a.note).toEqual(b.note);
        expect(await notesOf(k)).toHaveLength(1);
      });

      it('the same key with other arguments: 422 KEY_REUSED, no second note', async () => {
        const k = key();
        await saveNote(url, k, input);
        const other = await saveNote(url, k, { folderId: 'drafts', text: 'another text' });
        expect(other).toMatchObject({ status: 422, code: 'KEY_REUSED' });
        expect((await notesOf(k)).map((n) => n.text)).toEqual([input.text]);
      });
    });

    it('after a restart of every process the stored result is readable, from the service and from the ledger API', async () => {
      const k = key();
      const ledgerBefore: RunningService = await startService({ testDb: f.testDb });
      const before = await notes();
      const saved = await saveNote(before.url, k, input);
      expect(saved.status).toBe(201);
      await before.child.stop();
      await ledgerBefore.close();

      const ledger = await startService({ testDb: f.testDb });
      try {
        const after = await notes();
        const status = await (await fetch(`${after.url}/operations/${encodeURIComponent(k)}`)).json();
        expect(status).toEqual({ status: 'succeeded', result: saved.note });
        const op = (await (
          await fetch(`${ledger.url}/v1/scopes/notes/operations/${encodeURIComponent(k)}`)
        ).json()) as {
          operation: unknown;
        };
        expect(op.operation).toMatchObject({ status: 'succeeded', key: k });
        const again = await saveNote(after.url, k, input);
        expect(again).toMatchObject({ status: 201, replayed: true, note: saved.note });
        expect(await notesOf(k)).toHaveLength(1);
      } finally {
        await ledger.close();
      }
    });
  },
);
