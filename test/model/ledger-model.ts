/**
 * The reference model of drill F8: per key, what the contract (and README's
 * "Choices where the contract is silent") says each call answers and leaves
 * behind. Rule A is applied eagerly: when the test moves a deadline into the
 * past the model's status lapses at once, and `unwritten` remembers that the
 * service has not yet written that lapse (a read shows it; a write, begin's
 * read-back or the sweeper records it, with its event).
 *
 * Pure: no I/O. `predict` answers an `Expect`; the harness compares the real
 * reply and the real reads with it.
 */
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import type { Effect, ErrorCode, EventType, OperationStatus } from '../../src/contract/index.js';

export const SCOPE = 'model';
/** Few keys, so calls meet; `/` in them exercises the one-path-segment encoding. */
export const KEYS = ['session-1/turn-1/call-0', 'session-1/turn-1/call-1', 'session-1/turn-2/call-0'];

/**
 * 0, 1 and 4 are one request (keys reordered: RFC 8785; 4 asks not to store it),
 * 2 is another, 3 a client-supplied fingerprint.
 */
export const VARIANTS: ReadonlyArray<
  { request: Record<string, unknown>; storeRequest?: false } | { fingerprint: string }
> = [
  { request: { orderId: 'ORD-1', amount: 30 } },
  { request: { amount: 30, orderId: 'ORD-1' } },
  { request: { orderId: 'ORD-1', amount: 31 } },
  { fingerprint: 'client-fp/ORD-1' },
  { request: { orderId: 'ORD-1', amount: 30 }, storeRequest: false },
];
const CLASS = [0, 0, 1, 2, 0];

/** `undefined` is "no result sent". The last two are equal JSON with their keys in another order. */
export const RESULTS: readonly unknown[] = [
  undefined,
  null,
  { ok: 1 },
  { ok: 2 },
  { x: 1, y: [1, 2] },
  { y: [1, 2], x: 1 },
];

export const canon = (v: unknown): string => canonicalize(v ?? null) ?? 'null';

export function fingerprintOf(variant: number): string {
  const v = VARIANTS[variant]!;
  if ('fingerprint' in v) return v.fingerprint;
  return `sha256:${createHash('sha256').update(canon(v.request), 'utf8').digest('hex')}`;
}

export interface OpModel {
  /** Learned from the first reply that shows it. */
  id: string | null;
  variantClass: number;
  fingerprint: string;
  request: unknown;
  effect: Effect;
  /** As every read shows it: rule A and approval deadlines applied. */
  status: OperationStatus;
  attempt: number;
  /** The row's lease id (kept by release and by a terminal resolve; cleared by resolve to ready). */
  leaseId: string | null;
  /** The lease's expiry has passed (in_progress and outcome_unknown only). */
  leaseExpired: boolean;
  /** The current lease was taken by recovery (rule A, dispatched read/idempotent). */
  recovered: boolean;
  dispatched: boolean;
  result: unknown;
  /** No result was sent (SQL NULL), as opposed to JSON `null`. */
  resultAbsent: boolean;
  approval: null | 'pending' | 'approved' | 'rejected' | 'expired';
  resolved: boolean;
  /** A lapse reads show but nothing has written yet. */
  unwritten: boolean;
}

export type Call =
  | {
      kind: 'begin';
      k: number;
      variant: number;
      effect?: Effect;
      dispatch: boolean;
      requireApproval: boolean;
      leaseId?: string;
    }
  | { kind: 'dispatch' | 'heartbeat' | 'release' | 'unknown'; k: number; leaseId: string }
  | { kind: 'complete'; k: number; leaseId: string; status: 'succeeded' | 'failed'; result: number }
  | { kind: 'approve'; k: number; fingerprint?: string }
  | { kind: 'reject'; k: number; withResult: boolean; note?: string }
  | {
      kind: 'resolve';
      k: number;
      status: 'succeeded' | 'failed' | 'ready';
      result: number;
      expectedAttempt?: number;
    };

export interface Expect {
  status: number;
  code?: ErrorCode;
  outcome?: 'acquired' | 'pending_approval' | 'replayed';
  recovered?: boolean;
  /** Event types this call appends to the key's log, in order. */
  events: EventType[];
  /** false: the operation must read exactly as before, byte for byte. */
  changes: boolean;
  /** The key after the call; a server-made lease id is filled in from the reply. */
  next: OpModel | undefined;
  /** begin acquired: the lease id the reply must carry (undefined: the service makes one). */
  acquiredLease?: { id: string | undefined };
  /** Other calls that succeed: the lease id the reply carries (dispatch, heartbeat), or none. */
  replyLease?: string | null;
}

export const TERMINAL = new Set<OperationStatus>(['succeeded', 'failed', 'rejected']);
export const PURGEABLE = new Set<OperationStatus>(['ready', 'succeeded', 'failed', 'rejected']);

const notFound = (): Expect => ({
  status: 404,
  code: 'NOT_FOUND',
  events: [],
  changes: false,
  next: undefined,
});
const refuse = (op: OpModel, code: ErrorCode, events: EventType[] = []): Expect => ({
  status: code === 'KEY_REUSED' ? 422 : 409,
  code,
  events,
  changes: false,
  next: op,
});
const ok = (next: OpModel, events: EventType[], changes: boolean): Expect => ({
  status: 200,
  events,
  changes,
  next,
});

/** The event a write records first when it lands on an unwritten lapse. */
export const lapseEvent = (op: OpModel): EventType[] =>
  op.unwritten ? [op.status === 'rejected' ? 'approval_expired' : 'lease_expired'] : [];

/** A repeated complete carries the same result: `null` and no result are the same (both read `null`). */
export function sameResult(op: OpModel, result: number): boolean {
  return canon(op.result) === canon(RESULTS[result]);
}

function begin(op: OpModel | undefined, c: Extract<Call, { kind: 'begin' }>): Expect {
  const variantClass = CLASS[c.variant]!;
  if (!op) {
    const v = VARIANTS[c.variant]!;
    const created: OpModel = {
      id: null,
      variantClass,
      fingerprint: fingerprintOf(c.variant),
      request: 'request' in v && v.storeRequest !== false ? v.request : null,
      effect: c.effect ?? 'unclassified',
      status: 'in_progress',
      attempt: 1,
      leaseId: c.leaseId ?? null,
      leaseExpired: false,
      recovered: false,
      dispatched: c.dispatch,
      result: null,
      resultAbsent: true,
      approval: null,
      resolved: false,
      unwritten: false,
    };
    if (c.requireApproval) {
      const next: OpModel = { ...created, status: 'pending_approval', attempt: 0, leaseId: null };
      return {
        status: 202,
        outcome: 'pending_approval',
        events: ['created'],
        changes: true,
        next: { ...next, dispatched: false, approval: 'pending' },
      };
    }
    return {
      status: 201,
      outcome: 'acquired',
      events: ['created'],
      changes: true,
      next: created,
      acquiredLease: { id: c.leaseId },
    };
  }
  // The fingerprint is checked before anything else.
  if (op.variantClass !== variantClass) return refuse(op, 'KEY_REUSED');
  // Every transition is recorded (README), the lapse to rule-A `ready` too, sweeper or not.
  const lapse = lapseEvent(op);
  const acquire = (recovered: boolean): Expect => ({
    status: 200,
    outcome: 'acquired',
    recovered,
    events: [...lapse, 'acquired'],
    changes: true,
    next: {
      ...op,
      status: 'in_progress',
      attempt: op.attempt + 1,
      leaseId: c.leaseId ?? null,
      leaseExpired: false,
      recovered,
      dispatched: c.dispatch,
      unwritten: false,
    },
    acquiredLease: { id: c.leaseId },
  });
  switch (op.status) {
    case 'ready':
      return acquire(false);
    case 'in_progress':
      // In progress with an expired lease is, by rule A, dispatched read/idempotent work.
      if (op.leaseExpired) return acquire(true);
      if (c.leaseId !== undefined && c.leaseId === op.leaseId) {
        return {
          status: 200,
          outcome: 'acquired',
          recovered: op.recovered,
          events: [],
          changes: false,
          next: op,
          acquiredLease: { id: op.leaseId },
        };
      }
      return refuse(op, 'OPERATION_IN_PROGRESS');
    case 'pending_approval':
      return { status: 202, outcome: 'pending_approval', events: [], changes: false, next: op };
    case 'outcome_unknown':
      return { ...refuse(op, 'OUTCOME_UNKNOWN', lapseEvent(op)), next: { ...op, unwritten: false } };
    default:
      return {
        status: 200,
        outcome: 'replayed',
        events: lapseEvent(op),
        changes: false,
        next: { ...op, unwritten: false },
      };
  }
}

function holder(op: OpModel | undefined, c: Extract<Call, { leaseId: string }>): Expect {
  if (!op) return notFound();
  // A superseded holder's complete, release or unknown is refused and recorded (contract section 2).
  const current = c.leaseId === op.leaseId;
  const live = current && op.status === 'in_progress' && !op.leaseExpired;
  switch (c.kind) {
    case 'dispatch':
      if (!live) return refuse(op, 'LEASE_LOST');
      return {
        ...(op.dispatched ? ok(op, [], false) : ok({ ...op, dispatched: true }, ['dispatched'], true)),
        replyLease: c.leaseId,
      };
    case 'heartbeat':
      // Not a transition: no event, but the lease's expiry moves.
      return live ? { ...ok(op, [], true), replyLease: c.leaseId } : refuse(op, 'LEASE_LOST');
    case 'complete': {
      if (!current) return refuse(op, 'LEASE_LOST', ['stale_completion_rejected']);
      if (op.status === 'in_progress' || op.status === 'outcome_unknown' || op.status === 'ready') {
        const sent = RESULTS[c.result];
        const type = op.status === 'outcome_unknown' ? 'late_completion' : 'completed';
        const next: OpModel = {
          ...op,
          status: c.status,
          result: sent ?? null,
          resultAbsent: sent === undefined,
          unwritten: false,
        };
        return ok(next, [...lapseEvent(op), type], true);
      }
      if (op.status === 'succeeded' || op.status === 'failed') {
        return op.status === c.status && sameResult(op, c.result)
          ? ok(op, [], false)
          : refuse(op, 'RESULT_MISMATCH', ['result_mismatch']);
      }
      return refuse(op, 'INVALID_STATE');
    }
    case 'release':
      if (!current) return refuse(op, 'LEASE_LOST', ['stale_completion_rejected']);
      if (op.status === 'in_progress' || op.status === 'outcome_unknown') {
        const next: OpModel = { ...op, status: 'ready', dispatched: false, unwritten: false };
        return ok(next, [...lapseEvent(op), 'released'], true);
      }
      return op.status === 'ready' ? ok(op, [], false) : refuse(op, 'INVALID_STATE');
    case 'unknown':
      if (!current) return refuse(op, 'LEASE_LOST', ['stale_completion_rejected']);
      if (op.status === 'in_progress')
        return ok({ ...op, status: 'outcome_unknown' }, ['marked_unknown'], true);
      if (op.status === 'outcome_unknown') return ok(op, [], false);
      return refuse(op, TERMINAL.has(op.status) || op.status === 'ready' ? 'INVALID_STATE' : 'LEASE_LOST');
  }
}

function operator(op: OpModel | undefined, c: Call): Expect {
  if (!op) return notFound();
  if (c.kind === 'approve') {
    const fpOk = c.fingerprint === undefined || c.fingerprint === op.fingerprint;
    if (op.status === 'pending_approval') {
      return fpOk
        ? ok({ ...op, status: 'ready', approval: 'approved' }, ['approved'], true)
        : refuse(op, 'FINGERPRINT_MISMATCH', ['approval_refused']);
    }
    // Approving what is not pending (a second approve too) is INVALID_STATE (contract section 4).
    return refuse(op, 'INVALID_STATE');
  }
  if (c.kind === 'reject') {
    if (op.status === 'pending_approval') {
      const result = c.withResult
        ? { reason: 'rejected by the model' }
        : { code: 'APPROVAL_REJECTED', note: c.note ?? null };
      const next: OpModel = { ...op, status: 'rejected', approval: 'rejected', result, resultAbsent: false };
      return ok(next, ['rejected'], true);
    }
    return refuse(op, 'INVALID_STATE');
  }
  if (c.kind !== 'resolve') throw new Error(`not an operator call: ${c.kind}`);
  // By the effective status (rule A): a lapsed, never-dispatched lease reads `ready`, sweeper or not.
  const resolvable = op.status === 'outcome_unknown' || (op.status === 'in_progress' && op.leaseExpired);
  const attemptOk = c.expectedAttempt === undefined || c.expectedAttempt === op.attempt;
  // Resolve is compare-and-set; every refusal is recorded.
  if (!resolvable || !attemptOk) return refuse(op, 'INVALID_STATE', ['resolution_refused']);
  const terminal = c.status !== 'ready';
  const sent = RESULTS[c.result];
  const next: OpModel = {
    ...op,
    status: c.status,
    result: terminal ? (sent ?? null) : null,
    resultAbsent: terminal ? sent === undefined : true,
    resolved: true,
    // A terminal resolve keeps the lease (the last holder's late complete is compared); ready supersedes it.
    leaseId: terminal ? op.leaseId : null,
    dispatched: terminal ? op.dispatched : false,
    unwritten: false,
  };
  return ok(next, [...lapseEvent(op), 'resolved'], true);
}

/** What the contract says `c` answers on `op`. */
export function predict(op: OpModel | undefined, c: Call): Expect {
  switch (c.kind) {
    case 'begin':
      return begin(op, c);
    case 'dispatch':
    case 'heartbeat':
    case 'complete':
    case 'release':
    case 'unknown':
      return holder(op, c);
    default:
      return operator(op, c);
  }
}

/** Time travel: the lease's expiry passes. Rule A decides what the reads show from now on. */
export function leaseExpires(op: OpModel | undefined): { next: OpModel | undefined; changes: boolean } {
  if (!op || op.leaseExpired || (op.status !== 'in_progress' && op.status !== 'outcome_unknown')) {
    return { next: op, changes: false };
  }
  if (op.status === 'outcome_unknown') return { next: { ...op, leaseExpired: true }, changes: true };
  const expired: OpModel = { ...op, leaseExpired: true };
  if (!op.dispatched) return { next: { ...expired, status: 'ready', unwritten: true }, changes: true };
  if (op.effect === 'non_idempotent_write' || op.effect === 'unclassified') {
    return { next: { ...expired, status: 'outcome_unknown', unwritten: true }, changes: true };
  }
  return { next: expired, changes: true };
}

/** Time travel: a pending approval's deadline passes. */
export function approvalExpires(op: OpModel | undefined): { next: OpModel | undefined; changes: boolean } {
  if (op?.status !== 'pending_approval') return { next: op, changes: false };
  const result = { code: 'APPROVAL_EXPIRED' };
  return {
    next: { ...op, status: 'rejected', approval: 'expired', result, resultAbsent: false, unwritten: true },
    changes: true,
  };
}
