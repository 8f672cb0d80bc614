/**
 * A begin's input as `sql/begin.ts` takes it (what `ledger/begin.ts` makes of
 * a request), for tests that run begin's statements directly.
 */
import { randomUUID } from 'node:crypto';
import { LEASE_MS, RETENTION_MS } from '../../src/contract/index.js';
import { canonicalJson, fingerprintOf } from '../../src/ledger/json-value.js';
import type { NewOperation } from '../../src/ledger/sql/begin.js';

/** The request every input below carries, canonical. */
export const REQUEST = canonicalJson({ n: 1 }, 'request', 1 << 20);

/** A new-key begin of `REQUEST` in `scope`, dispatched, a non-idempotent write; `over` changes any field. */
export function newOperation(scope: string, key: string, over: Partial<NewOperation> = {}): NewOperation {
  return {
    scope,
    key,
    fingerprint: fingerprintOf(REQUEST),
    effect: 'non_idempotent_write',
    leaseId: randomUUID(),
    leaseMs: LEASE_MS.default,
    dispatch: true,
    owner: null,
    requireApproval: false,
    approvalTimeoutMs: 60_000,
    request: REQUEST,
    metadata: '{}',
    retentionMs: RETENTION_MS.default,
    actor: 'test',
    ...over,
  };
}
