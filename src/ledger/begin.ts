/**
 * begin: register-or-reenter (contract section 3). Decides the answer from
 * what the one statement of `sql/begin.ts` wrote or read; see the table there.
 */
import { randomUUID } from 'node:crypto';
import {
  APPROVAL_TIMEOUT_MS,
  type BeginBody,
  type BeginResponse,
  LEASE_MS,
  type Lease,
  LIMITS,
  RETENTION_MS,
} from '../contract/index.js';
import type { Database } from '../db/database.js';
import { IdemError, invalid } from '../errors.js';
import { canonicalJson, checkJsonValue, fingerprintOf } from './json-value.js';
import { acquire, insertOrRead } from './sql/begin.js';
import { lapseOne } from './sql/lapse.js';
import { iso, type OperationRow, toOperation } from './sql/view.js';

/** Seconds a client should wait before asking again about a pending approval. */
const PENDING_RETRY_AFTER_S = 5;
/** Each loop is a lost race with a concurrent writer; more than a few is a livelock. */
const MAX_ROUNDS = 8;

export interface BeginResult {
  status: 200 | 201 | 202;
  body: BeginResponse;
  /** `Retry-After` seconds, for pending approvals. */
  retryAfter?: number;
  replayed?: boolean;
}

export function leaseOf(row: OperationRow): Lease {
  return { id: row.leaseId!, attempt: row.attempt, expiresAt: iso(row.leaseExpiresAt)! };
}

/** Validates what the schema cannot say and computes the fingerprint. */
function prepare(body: BeginBody) {
  if ((body.request === undefined) === (body.fingerprint === undefined)) {
    throw invalid('request', 'send exactly one of request and fingerprint');
  }
  if (!body.key.isWellFormed()) throw invalid('key', 'must be well-formed Unicode');
  let fingerprint = body.fingerprint;
  let request: string | null = null;
  if (body.request !== undefined) {
    const canonical = canonicalJson(body.request, 'request', LIMITS.requestBytes);
    fingerprint = fingerprintOf(canonical);
    if (body.storeRequest !== false) request = canonical;
  }
  const metadata = canonicalJson(body.metadata ?? {}, 'metadata', LIMITS.metadataBytes);
  if (body.owner !== undefined) checkJsonValue(body.owner, 'owner');
  return { fingerprint: fingerprint!, request, metadata };
}

export async function begin(
  db: Database,
  scope: string,
  body: BeginBody,
  actor: string,
): Promise<BeginResult> {
  const p = prepare(body);
  const leaseId = body.leaseId ?? randomUUID();
  const input = {
    scope,
    key: body.key,
    newId: randomUUID(),
    fingerprint: p.fingerprint,
    effect: body.effect ?? 'unclassified',
    leaseId,
    leaseMs: body.leaseMs ?? LEASE_MS.default,
    dispatch: body.dispatch ?? true,
    owner: body.owner ?? null,
    requireApproval: body.requireApproval ?? false,
    approvalTimeoutMs: body.approvalTimeoutMs ?? APPROVAL_TIMEOUT_MS.default,
    request: p.request,
    metadata: p.metadata,
    retentionMs: body.retentionMs ?? RETENTION_MS.default,
    actor,
  };

  for (let round = 0; round < MAX_ROUNDS; round++) {
    const row = await insertOrRead(db, input);
    if (!row) continue; // a concurrent insert not yet visible to our snapshot
    const operation = toOperation(row);

    if (row.via === 'written') {
      if (row.status === 'pending_approval') {
        return {
          status: 202,
          body: { outcome: 'pending_approval', operation },
          retryAfter: PENDING_RETRY_AFTER_S,
        };
      }
      return { status: 201, body: { outcome: 'acquired', operation, lease: leaseOf(row) } };
    }

    // The key exists. The fingerprint is checked before anything else.
    if (row.fingerprint !== input.fingerprint) {
      throw new IdemError('KEY_REUSED', 'this key was used with a different request', { operation });
    }
    // Acquirable: released, approved, re-armed, lapsed before dispatch (all read as
    // `ready`), or dispatched read/idempotent work whose lease ran out.
    if (row.status === 'ready' || (row.status === 'in_progress' && row.leaseExpired)) {
      const taken = await acquire(db, input);
      if (!taken) continue; // another writer changed it first: look again
      const res: BeginResponse = {
        outcome: 'acquired',
        operation: toOperation(taken),
        lease: leaseOf(taken),
      };
      if (taken.leaseRecovered) res.recovered = true;
      return { status: 200, body: res };
    }
    switch (row.status) {
      case 'in_progress': {
        if (row.leaseId === leaseId) {
          // The same lease again: a begin whose response was lost, retried.
          const res: BeginResponse = { outcome: 'acquired', operation, lease: leaseOf(row) };
          if (row.leaseRecovered) res.recovered = true;
          return { status: 200, body: res };
        }
        throw new IdemError('OPERATION_IN_PROGRESS', 'another holder has a live lease on this operation', {
          operation,
          retryAfter: row.leaseSecondsLeft ?? 1,
        });
      }
      case 'pending_approval':
        return {
          status: 202,
          body: { outcome: 'pending_approval', operation },
          retryAfter: PENDING_RETRY_AFTER_S,
        };
      case 'outcome_unknown': {
        const written =
          row.storedStatus === 'in_progress' ? await lapseOne(db, scope, body.key, 'system') : undefined;
        throw new IdemError(
          'OUTCOME_UNKNOWN',
          'the outcome is unknown; it must be resolved before it can run again',
          {
            operation: written ? toOperation(written) : operation,
          },
        );
      }
      default: {
        // succeeded, failed, rejected: replay the stored outcome.
        const written =
          row.storedStatus === 'pending_approval' ? await lapseOne(db, scope, body.key, 'system') : undefined;
        return {
          status: 200,
          body: { outcome: 'replayed', operation: written ? toOperation(written) : operation },
          replayed: true,
        };
      }
    }
  }
  throw new IdemError('UNAVAILABLE', 'the operation changed under too many concurrent writers; retry');
}
