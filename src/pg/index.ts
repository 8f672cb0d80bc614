/**
 * `idem/pg`: the ledger inside a downstream service's own Postgres
 * transaction. See `docs/downstream.md`.
 */
export type { TxClient } from '../downstream/ledger.js';
export {
  type OnceInput,
  type OnceResult,
  PgLedger,
  type PgLedgerOptions,
  type PgLedgerSweep,
} from './pg-ledger.js';
