/**
 * One transaction on one connection, opened and ended by `PgLedger`, over
 * node-postgres (a client checked out of the caller's pool) or PGlite (whose
 * `transaction()` callback is held open until the ledger ends it).
 */
import type { PGlite, Transaction } from '@electric-sql/pglite';
import type pg from 'pg';
import { clientDatabase, pgliteTxDatabase } from '../db/client-database.js';
import type { Database } from '../db/database.js';
import { pgliteStatements } from '../db/pglite-statements.js';
import type { TxClient } from '../downstream/ledger.js';

/** An open transaction. `commit` and `rollback` end it; either may be called once, then both are no-ops. */
export interface OpenTransaction {
  db: Database;
  tx: TxClient;
  commit(): Promise<void>;
  rollback(): Promise<void>;
}

export async function openPg(pool: pg.Pool, prepared: boolean): Promise<OpenTransaction> {
  const client = await pool.connect();
  let open = true;
  const end = async (statement: 'COMMIT' | 'ROLLBACK') => {
    if (!open) return;
    open = false;
    try {
      await client.query(statement);
      client.release();
    } catch (err) {
      // A connection whose COMMIT or ROLLBACK failed is not given back to the pool.
      client.release(err as Error);
      if (statement === 'COMMIT') throw err;
    }
  };
  try {
    await client.query('BEGIN');
  } catch (err) {
    open = false;
    client.release(err as Error);
    throw err;
  }
  return {
    db: clientDatabase(client, { prepared }),
    tx: {
      query: async (text, params) => {
        // After COMMIT/ROLLBACK the client is back in the pool, maybe in someone else's transaction.
        if (!open) throw new Error('this transaction is over: its connection went back to the pool');
        return client.query(text, params as unknown[]) as never;
      },
    },
    commit: () => end('COMMIT'),
    rollback: () => end('ROLLBACK'),
  };
}

export async function openPglite(pglite: PGlite, prepared: boolean): Promise<OpenTransaction> {
  let decide!: (commit: boolean) => void;
  const decided = new Promise<boolean>((r) => {
    decide = r;
  });
  let started!: (tx: Transaction) => void;
  const txReady = new Promise<Transaction>((r) => {
    started = r;
  });
  const finished = pglite.transaction(async (tx) => {
    started(tx);
    if (!(await decided)) await tx.rollback();
  });
  const tx = await Promise.race([
    txReady,
    finished.then(() => Promise.reject(new Error('the PGlite transaction ended before it began'))),
  ]);
  let open = true;
  return {
    db: pgliteTxDatabase(tx, prepared ? pgliteStatements(pglite, { transaction: tx }) : undefined),
    tx: {
      query: async (text, params) => {
        if (!open) throw new Error('this transaction is over');
        return tx.query(text, params as unknown[]) as never;
      },
    },
    commit: async () => {
      if (!open) return;
      open = false;
      decide(true);
      await finished;
    },
    rollback: async () => {
      if (!open) return;
      open = false;
      decide(false);
      await finished.catch(() => {});
    },
  };
}
