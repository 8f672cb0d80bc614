/**
 * The public shape of an operation and of a lease, from a row as the ledger
 * reads it (`sql/row.ts`). The lease id leaves only through `leaseOf`, to the
 * lease holder; never inside an operation.
 */
import type { Lease, Operation } from '../contract/index.js';
import type { OperationRow } from './sql/row.js';

/** Epoch milliseconds to RFC 3339. */
export const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/** The public shape of a row. The lease id never leaves through here. */
export function toOperation(r: OperationRow): Operation {
  const leased = r.status === 'in_progress' || r.status === 'outcome_unknown';
  return {
    id: r.id,
    scope: r.scope,
    key: r.key,
    fingerprint: r.fingerprint,
    effect: r.effect,
    status: r.status,
    attempt: r.attempt,
    lease:
      leased && r.leaseExpiresAt
        ? { expiresAt: iso(r.leaseExpiresAt)!, owner: r.leaseOwner, dispatchedAt: iso(r.dispatchedAt) }
        : null,
    request: r.request ?? null,
    result: r.result ?? null,
    approval:
      r.approvalState && r.approvalDeadline
        ? {
            state: r.approvalState as 'pending' | 'approved' | 'rejected' | 'expired',
            deadline: iso(r.approvalDeadline)!,
            decidedBy: r.approvalDecidedBy,
            decidedAt: iso(r.approvalDecidedAt),
            note: r.approvalNote,
          }
        : null,
    metadata: r.metadata ?? {},
    resolution:
      r.resolutionBy && r.resolutionAt
        ? { by: r.resolutionBy, at: iso(r.resolutionAt)!, note: r.resolutionNote ?? '' }
        : null,
    createdAt: iso(r.createdAt)!,
    updatedAt: iso(r.updatedAt)!,
    completedAt: iso(r.completedAt),
    retainedUntil: iso(r.retainedUntil),
  };
}

/** The lease of a row, for its holder's answers. */
export function leaseOf(row: OperationRow): Lease {
  return { id: row.leaseId!, attempt: row.attempt, expiresAt: iso(row.leaseExpiresAt)! };
}
