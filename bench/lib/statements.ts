/**
 * The service's own statements, rendered for pgbench. Nothing here retypes
 * SQL: `beginStatement` and `transitionStatement(completeSpec(...))` are
 * imported from the service and rendered by drizzle's `PgDialect`, the same
 * path `db.execute()` takes. Only the per-transaction values (key, ids,
 * lease) are marked with sentinels so the pgbench script can put variables
 * in their place; every other parameter keeps the value the service sends.
 */
import { PgDialect } from 'drizzle-orm/pg-core';
import { OPEN_PRINCIPAL } from '../../src/auth/keys.js';
import {
  APPROVAL_TIMEOUT_MS,
  type BeginBody,
  type CompleteBody,
  LEASE_MS,
  LIMITS,
  RETENTION_MS,
} from '../../src/contract/index.js';
import { canonicalJson, fingerprintOf } from '../../src/ledger/json-value.js';
import { type BeginInput, beginStatement } from '../../src/ledger/sql/begin.js';
import { completeSpec } from '../../src/ledger/sql/lease-holder.js';
import { transitionStatement } from '../../src/ledger/sql/transition.js';

/** What every benchmark begin asks for: a small agent tool call. */
export const REQUEST = { tool: 'cancel_order', orderId: 'ORD-1002', amount: 30, currency: 'EUR' };
export const EFFECT = 'non_idempotent_write' as const;
/** What every benchmark complete stores. */
export const RESULT = { ok: true, refundId: 'RF-77' };

/** The begin body the HTTP load sends (minus `key` and `leaseId`, set per request). */
export const BEGIN_BODY: Omit<BeginBody, 'key'> = { request: REQUEST, effect: EFFECT };
export const COMPLETE_BODY: Omit<CompleteBody, 'leaseId'> = { status: 'succeeded', result: RESULT };

/** Values that vary per transaction; pgbench puts its own expressions where they appear. */
export const SENTINEL = {
  key: '\u0001bench-key\u0001',
  newId: 'b0000000-0000-4000-8000-00000000000a',
  leaseId: 'b0000000-0000-4000-8000-00000000000b',
} as const;

export interface RenderedQuery {
  sql: string;
  params: unknown[];
}

const dialect = new PgDialect();

/**
 * The `BeginInput` the service builds for `BEGIN_BODY` from an open
 * (key-less) caller. `src/ledger/begin.ts` does not export this step, so its
 * defaults are applied here from the contract's constants; the parity check
 * (`parity.ts`) compares the rows both paths write, so a drift is reported.
 */
export function beginInputFor(scope: string, key: string, newId: string, leaseId: string): BeginInput {
  const body = { ...BEGIN_BODY, key } as BeginBody;
  const request = canonicalJson(body.request, 'request', LIMITS.requestBytes);
  return {
    scope,
    key,
    newId,
    fingerprint: fingerprintOf(request),
    effect: body.effect ?? 'unclassified',
    leaseId,
    leaseMs: body.leaseMs ?? LEASE_MS.default,
    dispatch: body.dispatch ?? true,
    owner: body.owner ?? null,
    requireApproval: body.requireApproval ?? false,
    approvalTimeoutMs: body.approvalTimeoutMs ?? APPROVAL_TIMEOUT_MS.default,
    request: body.storeRequest === false ? null : request,
    metadata: canonicalJson(body.metadata ?? {}, 'metadata', LIMITS.metadataBytes),
    retentionMs: body.retentionMs ?? RETENTION_MS.default,
    actor: OPEN_PRINCIPAL.name,
  };
}

/** The service's begin statement with the per-transaction values as sentinels. */
export function renderBegin(scope: string): RenderedQuery {
  return dialect.sqlToQuery(
    beginStatement(beginInputFor(scope, SENTINEL.key, SENTINEL.newId, SENTINEL.leaseId)),
  );
}

/** The service's complete statement (`holder.complete` canonicalizes the result first). */
export function renderComplete(scope: string): RenderedQuery {
  return dialect.sqlToQuery(
    transitionStatement(
      completeSpec({
        scope,
        key: SENTINEL.key,
        leaseId: SENTINEL.leaseId,
        actor: OPEN_PRINCIPAL.name,
        status: COMPLETE_BODY.status,
        result: canonicalJson(COMPLETE_BODY.result, 'result', LIMITS.resultBytes),
      }),
    ),
  );
}
