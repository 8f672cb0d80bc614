/**
 * D2 on idem/pg with Postgres itself restarted (crash recovery, `pg_ctl
 * restart -m immediate`) on a private cluster, so the shared test server is
 * never touched: what committed survives, what was in flight is gone whole,
 * and the retry makes exactly one note.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { saveNote } from '../../examples/note-service/client.js';
import { type Child, runTs } from '../client/drills/processes.js';
import { canRunPrivateCluster, PrivateCluster } from '../drills/support/private-postgres.js';
import { onPostgres } from '../support/engine.js';

const input = { folderId: 'drafts', text: 'check the deploy config' };

describe.skipIf(!onPostgres() || !canRunPrivateCluster())(
  'D2 on idem/pg: a restart of Postgres too',
  { timeout: 180_000 },
  () => {
    let cluster: PrivateCluster;
    let admin: pg.Pool;
    const children: Child[] = [];
    beforeAll(async () => {
      cluster = await PrivateCluster.create();
      const c = new pg.Client({ connectionString: cluster.url(), connectionTimeoutMillis: 10_000 });
      await c.connect();
      await c.query('CREATE DATABASE notes');
      await c.end();
    }, 120_000);
    afterAll(async () => {
      await Promise.all(children.map((c) => c.kill9()));
      await admin?.end().catch(() => {});
      await cluster?.destroy();
    }, 60_000);

    const notes = async (extra: Record<string, string> = {}) => {
      const { child, match } = await runTs(
        'examples/note-service/server.ts',
        { NOTES_DATABASE_URL: cluster.url('notes'), ...extra },
        /note-service listening on (http:\/\/\S+)/,
      );
      children.push(child);
      return { url: match[1] as string, child };
    };
    const notesOf = async (key: string) => {
      admin ??= new pg.Pool({ connectionString: cluster.url('notes'), max: 1 });
      return (await admin.query('SELECT id::text FROM notes WHERE operation_key = $1', [key])).rows;
    };

    /** Resolves once a backend sits inside an open transaction (the save registered, now writing). */
    const inTransaction = async () => {
      admin ??= new pg.Pool({ connectionString: cluster.url('notes'), max: 1 });
      for (let n = 0; n < 400; n++) {
        const { rows } = await admin.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = 'notes' AND state = 'idle in transaction'`,
        );
        if (rows[0].n > 0) return;
        await new Promise((r) => setTimeout(r, 25));
      }
      throw new Error('the save never opened its transaction');
    };

    it('committed survives a Postgres crash restart; in flight is gone whole; one note each', async () => {
      const done = `note-${randomUUID()}`;
      const inFlight = `note-${randomUUID()}`;
      const svc = await notes({ NOTE_WRITE_DELAY_MS: '3000' });
      const saved = await saveNote(svc.url, done, input);
      expect(saved.status).toBe(201);

      // A save waiting in its transaction (the write takes 3 s) when Postgres dies.
      const pending = saveNote(svc.url, inFlight, input).catch((err: Error) => err);
      await inTransaction();
      await admin?.end();
      admin = undefined as unknown as pg.Pool;
      await cluster.restartImmediate();
      const lost = await pending;
      expect(lost instanceof Error || (lost as { status: number }).status >= 500).toBe(true);
      await svc.child.kill9();

      const after = await notes();
      const again = await saveNote(after.url, done, input);
      expect(again).toMatchObject({ status: 201, replayed: true, note: saved.note });
      const retried = await saveNote(after.url, inFlight, input);
      expect(retried).toMatchObject({ status: 201, replayed: false });
      expect(await notesOf(done)).toHaveLength(1);
      expect(await notesOf(inFlight)).toHaveLength(1);
    });
  },
);
