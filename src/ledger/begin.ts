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
  LIMITS,
  RETENTION_MS,
} from '../contract/index.js';
import type { Database } from '../db/database.js';
import { IdemError, invalid } from '../errors.js';
import { canonicalJson, checkJsonValue, fingerprintOf } from './json-value.js';
import { leaseOf, toOperation } from './operation.js';
import { RecentKeys } from './recent-keys.js';
import { acquire, insertOrRead, lapseOne, type NewOperation } from './sql/begin.js';
import type { OperationRow } from './sql/row.js';

/** Seconds a client should wait before asking again about a pending approval. */
const PENDING_RETRY_AFTER_S = 5;
/** Each loop is a lost race with a concurrent writer; more than a few is a livelock. */
const MAX_ROUNDS = 8;
/**
 * Keys begun lately in this process, to pick the cheaper shape of begin:
 * 8,192 of them: about 8 MB at worst (255-character scopes and keys outside
 * Latin-1), well under 1 MB for typical ones.
 */
const recent = new RecentKeys(8192);

export interface BeginReply {
  status: 200 | 201 | 202;
  body: BeginResponse;
  /** `Retry-After` seconds, for pending approvals. */
  retryAfter?: number;
  replayed?: boolean;
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
): Promise<BeginReply> {
  const p = prepare(body);
  const input: NewOperation = {
    scope,
    key: body.key,
    fingerprint: p.fingerprint,
    effect: body.effect ?? 'unclassified',
    leaseId: body.leaseId ?? randomUUID(),
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

  // A row to decide on without reading it again (what a refused take-over saw).
  let seen: OperationRow | undefined;
  for (let round = 0; round < MAX_ROUNDS; round++) {
    let row = seen;
    seen = undefined;
    if (!row) {
      const found = await insertOrRead(db, input, recent.has(scope, input.key));
      if (!found) continue; // a concurrent insert not yet visible to our snapshot
      recent.add(scope, input.key);
      if (found.via === 'written') return created(found);
      row = found;
    }
    // The key exists. The fingerprint is checked before anything else.
    if (row.fingerprint !== input.fingerprint) {
      throw new IdemError('KEY_REUSED', 'this key was used with a different request', {
        operation: toOperation(row),
      });
    }
    // Acquirable: released, approved, re-armed, lapsed before dispatch (all read as
    // `ready`), or dispatched read/idempotent work whose lease ran out.
    if (row.status === 'ready' || (row.status === 'in_progress' && row.leaseExpired)) {
      const taken = await acquire(db, input).catch((err) => {
        if (err instanceof IdemError && err.code === 'NOT_FOUND') return undefined; // purged meanwhile
        throw err;
      });
      if (!taken) continue;
      if (!taken.changed) {
        seen = taken.row; // another writer changed it first: decide on what it left
        continue;
      }
      const res: BeginResponse = {
        outcome: 'acquired',
        operation: toOperation(taken.row),
        lease: leaseOf(taken.row),
      };
      if (taken.row.leaseRecovered) res.recovered = true;
      return { status: 200, body: res };
    }
    return existing(db, row, input.leaseId);
  }
  throw new IdemError('UNAVAILABLE', 'the operation changed under too many concurrent writers; retry');
}

/** A new key: the lease, or the pending approval. */
function created(row: OperationRow): BeginReply {
  const operation = toOperation(row);
  if (row.status === 'pending_approval') {
    return {
      status: 202,
      body: { outcome: 'pending_approval', operation },
      retryAfter: PENDING_RETRY_AFTER_S,
    };
  }
  return { status: 201, body: { outcome: 'acquired', operation, lease: leaseOf(row) } };
}

/** An existing key that cannot be acquired now: the begin table's other rows. */
async function existing(db: Database, row: OperationRow, leaseId: string): Promise<BeginReply> {
  const operation = toOperation(row);
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
      const written = row.storedStatus === 'in_progress' ? await lapseOne(db, row.scope, row.key) : undefined;
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
        row.storedStatus === 'pending_approval' ? await lapseOne(db, row.scope, row.key) : undefined;
      return {
        status: 200,
        body: { outcome: 'replayed', operation: written ? toOperation(written) : operation },
        replayed: true,
      };
    }
  }
}
