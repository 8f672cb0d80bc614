/**
 * The note service of seed 004 when its notes are NOT in Postgres: the
 * remote ledger before writing, and a durable file store with one note per
 * key, so re-running a save after a crash finds the note instead of writing
 * a second one. With the notes in Postgres, `service.ts` (idem/pg) commits
 * the note and "this key is done" together instead.
 */
import { isLedgerError, type LedgerClient } from '../../src/client/index.js';
import { type Listening, listen, lose, problem, readJson, send } from '../shared/http.js';
import { NoteStore } from './note-store.js';

import type { NoteFaults } from './service.js';

/** Options of the file-backed note service. */
export interface FileNoteServiceOptions {
  ledger: LedgerClient;
  file: string;
  scope?: string;
  port?: number;
  /** The ledger lease; short in drills so a crashed holder is taken over quickly. Default 30 s. */
  leaseMs?: number;
  /** Time the write takes, so racing requests really overlap in drills. */
  writeDelayMs?: number;
  faults?: NoteFaults;
}

const die = () => process.kill(process.pid, 'SIGKILL');

/** Starts the service on 127.0.0.1. */
export async function startFileNoteService(
  options: FileNoteServiceOptions,
): Promise<Listening & { store: NoteStore }> {
  const { ledger } = options;
  const scope = options.scope ?? 'notes';
  const store = new NoteStore(options.file);
  const faults = options.faults ?? {};
  const has = (list: string[] | undefined, key: string) => list?.includes(key) ?? false;

  const listening = await listen(async (req, res, url) => {
    if (req.method === 'POST' && url.pathname === '/notes') {
      const key = req.headers['idempotency-key'];
      if (typeof key !== 'string' || key === '')
        return problem(res, 400, 'INVALID_ARGUMENT', 'Idempotency-Key is required');
      const input = (await readJson(req)) as { folderId?: unknown; text?: unknown } | undefined;
      if (typeof input?.folderId !== 'string' || typeof input.text !== 'string') {
        return problem(res, 400, 'INVALID_ARGUMENT', 'folderId and text are strings');
      }
      const request = { folderId: input.folderId, text: input.text };
      let begun: Awaited<ReturnType<LedgerClient['begin']>>;
      try {
        begun = await ledger.begin(scope, {
          key,
          request,
          // The store keeps one note per key, so running the save again is harmless.
          effect: 'idempotent_write',
          dispatch: false,
          leaseMs: options.leaseMs ?? 30_000,
          owner: `note-service:${process.pid}`,
        });
      } catch (err) {
        if (isLedgerError(err, 'KEY_REUSED'))
          return problem(res, 422, 'KEY_REUSED', 'this key saved a different note');
        if (isLedgerError(err, 'OPERATION_IN_PROGRESS')) {
          const wait = String(Math.max(1, Math.ceil((err.retryAfterMs ?? 1000) / 1000)));
          return problem(res, 409, 'OPERATION_IN_PROGRESS', 'this note is being saved', {
            'retry-after': wait,
          });
        }
        return problem(res, 503, 'UNAVAILABLE', 'try again later', { 'retry-after': '1' });
      }
      if (begun.outcome === 'replayed')
        return send(res, 200, begun.operation.result, { 'idempotent-replayed': 'true' });
      if (begun.outcome !== 'acquired') return problem(res, 409, 'INVALID_STATE', 'waiting for approval');
      await ledger.dispatch(scope, key, begun.leaseId);
      if (has(faults.crashBeforeCommit, key)) die();
      await new Promise((r) => setTimeout(r, options.writeDelayMs ?? 0));
      const note = store.saveOnce(key, request);
      if (has(faults.crashAfterCommit, key)) die();
      await ledger.complete(scope, key, { leaseId: begun.leaseId, status: 'succeeded', result: { ...note } });
      if (has(faults.loseResponse, key)) return lose(res);
      return send(res, 201, note);
    }
    if (req.method === 'GET' && url.pathname === '/notes') return send(res, 200, { notes: store.all() });
    const n = /^\/notes\/([^/]+)$/.exec(url.pathname);
    if (req.method === 'GET' && n) {
      const note = store.get(decodeURIComponent(n[1] as string));
      return note ? send(res, 200, note) : problem(res, 404, 'NOT_FOUND', 'no such note');
    }
    const o = /^\/operations\/(.+)$/.exec(url.pathname);
    if (req.method === 'GET' && o) {
      try {
        const op = await ledger.get(scope, decodeURIComponent(o[1] as string));
        return send(res, 200, { status: op.status, result: op.result });
      } catch (err) {
        if (isLedgerError(err, 'NOT_FOUND')) return problem(res, 404, 'NOT_FOUND', 'no such operation');
        throw err;
      }
    }
    return problem(res, 404, 'NOT_FOUND', 'no such route');
  }, options.port);
  return { ...listening, store };
}
