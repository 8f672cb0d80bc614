/**
 * The note service of seed 004 on `idem/pg`: the notes live in the service's
 * own Postgres, next to Idem's tables, and "the note is saved" and "this key
 * is done" commit in ONE transaction. A crash before the commit leaves
 * neither (the retry runs cleanly); after it, both (the retry replays).
 *
 * Two ways to write it, same guarantee (`integration`):
 *   'once'        the handler calls `ledger.once(...)` itself;
 *   'middleware'  idem/fastify with `transactional: true`: the handler writes
 *                 on `request.idempotency.tx`, the stored response commits with it.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import type pg from 'pg';
import idempotency from '../../src/downstream/fastify.js';
import { storedJson } from '../../src/downstream/stored-response.js';
import { IdemError } from '../../src/errors.js';
import { PgLedger, type TxClient } from '../../src/pg/index.js';

/** A saved note. */
export interface Note {
  id: string;
  operationKey: string;
  folderId: string;
  text: string;
  savedAt: string;
}

/** Faults a drill can inject, by operation key. */
export interface NoteFaults {
  /**
   * Die (SIGKILL) before the commit: here after the note is written in the
   * transaction; in the file-backed service before the note is written.
   */
  crashBeforeCommit?: string[];
  /** Die after the commit, before the answer. */
  crashAfterCommit?: string[];
  /** Commit, then drop the connection. */
  loseResponse?: string[];
}

export interface NoteServiceOptions {
  /** The service's own database (Idem's migrations are applied to it). */
  pool: pg.Pool;
  integration?: 'once' | 'middleware';
  scope?: string;
  port?: number;
  /** Time the write takes, so racing requests really overlap in drills. */
  writeDelayMs?: number;
  faults?: NoteFaults;
}

export const NOTES_TABLE = `CREATE TABLE IF NOT EXISTS notes (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  operation_key text NOT NULL,
  folder_id text NOT NULL,
  text text NOT NULL,
  saved_at timestamptz NOT NULL DEFAULT now())`;

const NOTE_COLUMNS = `id::text, operation_key AS "operationKey", folder_id AS "folderId", text,
  to_char(saved_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "savedAt"`;

type Input = { folderId: string; text: string };
const die = () => process.kill(process.pid, 'SIGKILL');

/** Starts the service on 127.0.0.1; applies Idem's migrations and the notes table first. */
export async function startNoteService(
  options: NoteServiceOptions,
): Promise<{ url: string; app: FastifyInstance; close(): Promise<void> }> {
  const { pool } = options;
  const scope = options.scope ?? 'notes';
  const integration = options.integration ?? 'once';
  const faults = options.faults ?? {};
  const has = (list: string[] | undefined, key: string) => list?.includes(key) ?? false;
  const ledger = new PgLedger({ pool, actor: 'note-service' });
  await ledger.migrate();
  await pool.query(NOTES_TABLE);

  /** The business write, on the ledger's transaction. */
  async function saveNote(tx: TxClient, key: string, input: Input): Promise<Note> {
    await new Promise((r) => setTimeout(r, options.writeDelayMs ?? 0));
    const { rows } = await tx.query<Note>(
      `INSERT INTO notes (operation_key, folder_id, text) VALUES ($1, $2, $3) RETURNING ${NOTE_COLUMNS}`,
      [key, input.folderId, input.text],
    );
    if (has(faults.crashBeforeCommit, key)) die();
    return rows[0]!;
  }

  const app = Fastify({ logger: false, forceCloseConnections: true });
  const body = {
    type: 'object',
    required: ['folderId', 'text'],
    additionalProperties: false,
    properties: { folderId: { type: 'string', minLength: 1 }, text: { type: 'string', minLength: 1 } },
  };

  if (integration === 'middleware') {
    await app.register(idempotency, { ledger, scope, owner: 'note-service' });
    app.addHook('onSend', async (req, reply, payload) => {
      const key = req.idempotency?.key;
      if (key && has(faults.crashAfterCommit, key)) die();
      if (key && has(faults.loseResponse, key)) reply.raw.socket?.destroy();
      return payload;
    });
    app.post<{ Body: Input }>(
      '/notes',
      {
        schema: { body },
        config: { idempotency: { required: true, transactional: true, effect: 'non_idempotent_write' } },
      },
      async (req, reply) => {
        const idem = req.idempotency!;
        return reply.code(201).send(await saveNote(idem.tx!, idem.key, req.body));
      },
    );
  } else {
    app.post<{ Body: Input }>('/notes', { schema: { body } }, async (req, reply) => {
      const key = req.headers['idempotency-key'];
      if (typeof key !== 'string' || key === '')
        return problem(reply, 400, 'IDEMPOTENCY_KEY_MISSING', 'send Idempotency-Key');
      const input = { folderId: req.body.folderId, text: req.body.text };
      try {
        const out = await ledger.once({ scope, key, request: input }, (tx) => saveNote(tx, key, input));
        if (has(faults.crashAfterCommit, key)) die();
        if (out.outcome === 'replayed') reply.header('idempotent-replayed', 'true');
        else if (has(faults.loseResponse, key)) reply.raw.socket?.destroy();
        return reply.code(201).send(out.result);
      } catch (err) {
        if (!(err instanceof IdemError)) throw err; // nothing was committed: a 500, safe to retry
        if (err.code === 'KEY_REUSED')
          return problem(reply, 422, err.code, 'this key saved a different note');
        if (err.code === 'OPERATION_IN_PROGRESS') {
          reply.header('retry-after', String(err.retryAfter ?? 1));
          return problem(reply, 409, err.code, 'this note is being saved');
        }
        if (err.code === 'OUTCOME_UNKNOWN')
          return problem(reply, 409, err.code, 'ask support about this note');
        throw err;
      }
    });
  }

  app.get('/notes', async () => ({
    notes: (await pool.query(`SELECT ${NOTE_COLUMNS} FROM notes ORDER BY saved_at`)).rows,
  }));
  app.get<{ Params: { id: string } }>('/notes/:id', async (req, reply) => {
    const { rows } = await pool.query(`SELECT ${NOTE_COLUMNS} FROM notes WHERE id::text = $1`, [
      req.params.id,
    ]);
    return rows[0] ?? problem(reply, 404, 'NOT_FOUND', 'no such note');
  });
  // The operation by its key, as the ledger (and its service, CLI and console) shows it.
  app.get<{ Params: { key: string } }>('/operations/:key', async (req, reply) => {
    const op = await ledger.get(scope, req.params.key);
    if (!op) return problem(reply, 404, 'NOT_FOUND', 'no such operation');
    return { status: op.status, result: integration === 'middleware' ? storedJson(op.result) : op.result };
  });

  await app.listen({ host: '127.0.0.1', port: options.port ?? 0 });
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  return { url: `http://127.0.0.1:${addr.port}`, app, close: () => app.close() };
}

function problem(reply: import('fastify').FastifyReply, status: number, code: string, detail: string) {
  return reply
    .code(status)
    .type('application/problem+json')
    .send({
      type: 'about:blank',
      title: code,
      status,
      code,
      detail,
      retryable: status === 409 && code === 'OPERATION_IN_PROGRESS',
    });
}
