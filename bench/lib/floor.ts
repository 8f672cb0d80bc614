/**
 * The floor: the least durable SQL that does a scenario's work, written by
 * hand on purpose (that is its point), against the service's own tables
 * with the same payloads, and run with `pgbench -M prepared`:
 *
 *   begin    = one operation row and one event row inserted, committed
 *   complete = one guarded row update (scope, key, lease, status) and one
 *              event row, committed
 *   replay   = one primary-key read of the row
 *
 * No conflict handling, no lapse rules, no projection: whatever the service
 * spends beyond this is its own weight. The values are the service's
 * (fingerprint, canonical request and result, defaults), bound as
 * parameters; the event details are what the service writes for them. The
 * stack floor (`stack-floor-server.ts`) runs the same begin and complete
 * behind HTTP routes.
 */
import { OPEN_PRINCIPAL } from '../../src/auth/keys.js';
import { LEASE_MS, RETENTION_MS } from '../../src/contract/index.js';
import type { PgbenchScript, ScriptBuilder } from './pgbench.js';
import { counters, orderedUuid, SCATTERED_KEY, seqUuid } from './scripts.js';
import { COMPLETE_BODY, EFFECT, FINGERPRINT, REQUEST_TEXT, RESULT_TEXT } from './statements.js';

/** The constants of the floor's statements: `-D` variables for pgbench, parameters for the stack floor. */
export function floorConstants(scope: string): Record<string, string> {
  return {
    scope,
    fp: FINGERPRINT,
    effect: EFFECT,
    leasems: String(LEASE_MS.default),
    request: REQUEST_TEXT,
    metadata: '{}',
    retention: String(RETENTION_MS.default),
    actor: OPEN_PRINCIPAL.name,
    status: COMPLETE_BODY.status,
    result: RESULT_TEXT,
    created: JSON.stringify({ status: 'in_progress', owner: null, dispatched: true }),
    completed: JSON.stringify({ from: 'in_progress', to: COMPLETE_BODY.status }),
  };
}

function constants(b: ScriptBuilder, scope: string): ScriptBuilder {
  for (const [name, value] of Object.entries(floorConstants(scope))) b.define(name, value);
  return b;
}

const seqLease = `(${seqUuid('b', ':seq')})::uuid`;
/** Time-ordered, like the service's ids: a random uuid would cost the floor a random index page per insert. */
const id = orderedUuid('clock_timestamp()');

/** One new operation and its `created` event. */
const floorBegin = (key: string, lease: string) => `
WITH o AS (
  INSERT INTO idem_operations (scope, key, id, fingerprint, effect, status, attempt, version,
    lease_id, lease_expires_at, dispatched_at, lease_recovered, request, metadata, retention_ms,
    created_at, updated_at)
  VALUES (:scope, ${key}, ${id}, :fp, :effect, 'in_progress', 1, 1,
    ${lease}, now() + :leasems::int * interval '1 millisecond', now(), false,
    :request::jsonb, :metadata::jsonb, :retention::bigint, now(), now())
  RETURNING scope, id, key, created_at
)
INSERT INTO idem_events (scope, id, operation_id, key, version, type, at, actor, attempt, detail)
SELECT scope, ${id}, id, key, 1, 'created', created_at, :actor, 1, :created::jsonb FROM o`;

/**
 * The guarded update of a complete and its `completed` event. The status
 * guard compares under `COLLATE "C"` (the same equality for these ASCII
 * values) so that the primary key is the only way to the row: written plainly,
 * `status = 'in_progress'` matches the predicates of the partial indexes, and
 * on statistics that show few in-progress rows (a ledger analyzed while
 * mostly completed, or never analyzed) the planner walks the whole
 * lease-expiry or open index and filters the key, a plan whose cost grows with
 * the index. That cost the floor up to 28% of its rate in S4's empty half; the
 * service's statements find the row by `(scope, key)` alone and never had it.
 */
const floorComplete = (key: string, lease: string) => `
WITH u AS (
  UPDATE idem_operations SET status = :status, result = :result::jsonb, completed_at = now(),
    retained_until = now() + retention_ms * interval '1 millisecond', version = version + 1, updated_at = now()
  WHERE scope = :scope AND key = (${key}) AND lease_id = ${lease} AND status = 'in_progress' COLLATE "C"
  RETURNING scope, id, key, version, attempt
)
INSERT INTO idem_events (scope, id, operation_id, key, version, type, at, actor, attempt, detail)
SELECT scope, ${id}, id, key, version, 'completed', now(), :actor, attempt, :completed::jsonb FROM u`;

export const FLOOR_BEGIN = floorBegin(SCATTERED_KEY, seqLease);
export const FLOOR_COMPLETE = floorComplete(SCATTERED_KEY, seqLease);

/**
 * The same two statements with the key and lease as variables (`:key`,
 * `:lease`), for the stack floor (`stack-floor-server.ts`), which takes them
 * from the request as the service does.
 */
export const STACK_FLOOR_SQL = {
  begin: floorBegin(':key::text', ':lease::uuid'),
  complete: floorComplete(':key::text', ':lease::uuid'),
};

/** S1's floor: a begin and a complete, two commits, like the service's cycle. */
export function floorCycleScript(scope: string, tag: string, run: number): PgbenchScript {
  return constants(counters(tag, run), scope).sql(FLOOR_BEGIN).sql(FLOOR_COMPLETE).build();
}

/** S2's floor: the point read of one of `keys` completed keys `<prefix><i>`. */
export function floorReadScript(scope: string, prefix: string, keys: number, run: number): PgbenchScript {
  return constants(counters(prefix, run), scope)
    .meta(`\\set i random(0, ${keys - 1})`)
    .sql('SELECT * FROM idem_operations WHERE scope = :scope AND key = (:kp::text || :i::text)')
    .build();
}
