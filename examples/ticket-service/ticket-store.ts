/**
 * Where the ticket service keeps its tickets: in memory (optionally appended
 * to a JSON-lines file that survives a crash, for the drills), or in a
 * Postgres table written inside the ledger's transaction (with a PgLedger).
 */
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import type pg from 'pg';
import type { TxClient } from '../../src/pg/index.js';

/** A ticket. */
export interface Ticket {
  id: string;
  title: string;
  body: string;
  operationId: string;
}

/** Tickets in memory; with `file`, every ticket is fsynced there before it is acknowledged. */
export class MemoryTicketStore {
  /** Every ticket ever created: the effect count of the drills. */
  readonly tickets = new Map<string, Ticket>();
  readonly #file: string | undefined;

  constructor(file?: string) {
    this.#file = file;
    if (!file) return;
    mkdirSync(dirname(file), { recursive: true });
    if (!existsSync(file)) return;
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      if (line.trim() === '') continue;
      try {
        const t = JSON.parse(line) as Ticket;
        this.tickets.set(t.id, t);
      } catch {} // a torn last line was never acknowledged
    }
  }

  async create(t: Ticket): Promise<void> {
    if (this.#file) {
      const fd = openSync(this.#file, 'a');
      try {
        writeSync(fd, `${JSON.stringify(t)}\n`);
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
    }
    this.tickets.set(t.id, t);
  }

  async get(id: string): Promise<Ticket | undefined> {
    return this.tickets.get(id);
  }
}

export const TICKETS_TABLE = `CREATE TABLE IF NOT EXISTS tickets (
  id text PRIMARY KEY,
  operation_id text NOT NULL,
  title text NOT NULL,
  body text NOT NULL)`;

/** Tickets in the service's own Postgres, next to the ledger's tables. */
export class PgTicketStore {
  constructor(readonly pool: pg.Pool) {}

  async migrate(): Promise<void> {
    await this.pool.query(TICKETS_TABLE);
  }

  /** Written on the ledger's transaction: the ticket commits with "this key is done". */
  async create(t: Ticket, tx: TxClient): Promise<void> {
    await tx.query('INSERT INTO tickets (id, operation_id, title, body) VALUES ($1, $2, $3, $4)', [
      t.id,
      t.operationId,
      t.title,
      t.body,
    ]);
  }

  async get(id: string): Promise<Ticket | undefined> {
    const { rows } = await this.pool.query<Ticket>(
      'SELECT id, title, body, operation_id AS "operationId" FROM tickets WHERE id = $1',
      [id],
    );
    return rows[0];
  }
}
