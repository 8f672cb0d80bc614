/**
 * The small ledger the middleware talks to, implemented by the remote
 * service (through a `LedgerClient`, below) and by `PgLedger` (idem/pg).
 * Refusals are `IdemError`s with the ledger's codes (`KEY_REUSED`,
 * `OPERATION_IN_PROGRESS`, `OUTCOME_UNKNOWN`, `UNAVAILABLE`); anything else
 * thrown means the ledger could not be asked.
 */
import { isLedgerError, type LedgerClient } from '../client/index.js';
import type { Effect, Operation } from '../contract/index.js';
import { IdemError } from '../errors.js';

/** What the middleware asks to register. */
export interface ClaimInput {
  scope: string;
  key: string;
  /** `sha256:<hex>` of the canonical request. */
  fingerprint: string;
  effect: Effect;
  leaseMs: number;
  owner?: string;
  metadata?: Record<string, unknown>;
  /** Run the handler inside the ledger's transaction (PgLedger only). */
  transactional?: boolean;
}

/** A query runner on the transaction of a `transactional` claim. */
export interface TxClient {
  query<R = Record<string, unknown>>(
    text: string,
    params?: unknown[],
  ): Promise<{ rows: R[]; rowCount?: number | null }>;
}

/** A live lease on an operation: the handler runs while it is held. */
export interface Claim {
  operationId: string;
  attempt: number;
  /** A dispatched lease of this operation ran out before (read / idempotent_write only). */
  recovered: boolean;
  /** The transaction, for a transactional claim. */
  tx?: TxClient;
  heartbeat(leaseMs: number): Promise<void>;
  complete(status: 'succeeded' | 'failed', result: unknown): Promise<void>;
  /** The effect did not happen. On a transaction: ROLLBACK. */
  release(): Promise<void>;
  /** The effect may have happened. On a transaction: ROLLBACK (it did not). */
  unknown(): Promise<void>;
}

export type ClaimOutcome = { kind: 'acquired'; claim: Claim } | { kind: 'replayed'; operation: Operation };

/** The ledger as the middleware sees it. */
export interface DownstreamLedger {
  claim(input: ClaimInput): Promise<ClaimOutcome>;
}

/** Seconds a client waits before asking again about an operation waiting for approval. */
const PENDING_RETRY_AFTER_S = 5;

/** Turns a `LedgerError` refusal into the ledger's `IdemError`; other failures pass through. */
function refusal(err: unknown): unknown {
  if (isLedgerError(err, 'KEY_REUSED', 'OUTCOME_UNKNOWN', 'INVALID_ARGUMENT', 'PAYLOAD_TOO_LARGE')) {
    return new IdemError(err.code as 'KEY_REUSED', err.message, {
      ...(err.operation ? { operation: err.operation } : {}),
      ...(err.field ? { field: err.field } : {}),
    });
  }
  if (isLedgerError(err, 'OPERATION_IN_PROGRESS')) {
    return new IdemError('OPERATION_IN_PROGRESS', err.message, {
      retryAfter: Math.ceil((err.retryAfterMs ?? 1000) / 1000),
    });
  }
  return err;
}

/** The remote ledger service as a `DownstreamLedger`. */
export function remoteLedger(client: LedgerClient): DownstreamLedger {
  return {
    async claim(input) {
      if (input.transactional) {
        throw new IdemError('INVALID_ARGUMENT', 'transactional routes need a PgLedger', {
          field: 'transactional',
        });
      }
      const { scope, key } = input;
      let begun: Awaited<ReturnType<LedgerClient['begin']>>;
      try {
        begun = await client.begin(scope, {
          key,
          fingerprint: input.fingerprint,
          effect: input.effect,
          leaseMs: input.leaseMs,
          // The handler starts right after: a crash from here on may have applied it.
          dispatch: true,
          ...(input.owner ? { owner: input.owner } : {}),
          ...(input.metadata ? { metadata: input.metadata } : {}),
        });
      } catch (err) {
        throw refusal(err);
      }
      if (begun.outcome === 'replayed') return { kind: 'replayed', operation: begun.operation };
      if (begun.outcome === 'pending_approval') {
        throw new IdemError('OPERATION_IN_PROGRESS', 'this operation waits for an approval', {
          retryAfter: Math.ceil((begun.retryAfterMs ?? PENDING_RETRY_AFTER_S * 1000) / 1000),
        });
      }
      const leaseId = begun.leaseId;
      const wrap = async (call: Promise<unknown>) => {
        try {
          await call;
        } catch (err) {
          throw refusal(err);
        }
      };
      return {
        kind: 'acquired',
        claim: {
          operationId: begun.operation.id,
          attempt: begun.operation.attempt,
          recovered: begun.recovered === true,
          heartbeat: (leaseMs) => wrap(client.heartbeat(scope, key, leaseId, leaseMs)),
          complete: (status, result) => wrap(client.complete(scope, key, { leaseId, status, result })),
          release: () => wrap(client.release(scope, key, leaseId)),
          unknown: () => wrap(client.unknown(scope, key, leaseId)),
        },
      };
    },
  };
}

/** A `PgLedger` (anything with `claim`) is used as it is; a `LedgerClient` is wrapped. */
export function asDownstreamLedger(ledger: DownstreamLedger | LedgerClient): DownstreamLedger {
  return typeof (ledger as DownstreamLedger).claim === 'function'
    ? (ledger as DownstreamLedger)
    : remoteLedger(ledger as LedgerClient);
}
