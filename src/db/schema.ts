/**
 * The ledger's tables, as drizzle-kit sees them. Migrations in `drizzle/` are
 * generated from this file and are append-only once landed.
 *
 * Scale-out rules (see ARCHITECTURE.md): `(scope, key)` is the primary key and
 * `scope` the distribution column; ids are UUIDs made by the service; no
 * sequences, triggers or PL/pgSQL.
 */
import { sql } from 'drizzle-orm';
import {
  bigint,
  boolean,
  check,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uuid,
} from 'drizzle-orm/pg-core';

// Millisecond precision: what the API shows is exactly what is stored and ordered by.
const tz = (name: string) => timestamp(name, { withTimezone: true, precision: 3 });

export const operations = pgTable(
  'idem_operations',
  {
    scope: text('scope').notNull(),
    key: text('key').notNull(),
    id: uuid('id').notNull(),
    fingerprint: text('fingerprint').notNull(),
    effect: text('effect').notNull(),
    status: text('status').notNull(),
    /** Fencing number: +1 on every acquisition. */
    attempt: integer('attempt').notNull(),
    /** +1 on every state change; orders the events of one operation. */
    version: integer('version').notNull(),
    leaseId: uuid('lease_id'),
    leaseOwner: text('lease_owner'),
    leaseExpiresAt: tz('lease_expires_at'),
    dispatchedAt: tz('dispatched_at'),
    leaseRecovered: boolean('lease_recovered').notNull().default(false),
    request: jsonb('request'),
    result: jsonb('result'),
    metadata: jsonb('metadata').notNull(),
    approvalState: text('approval_state'),
    approvalDeadline: tz('approval_deadline'),
    approvalDecidedBy: text('approval_decided_by'),
    approvalDecidedAt: tz('approval_decided_at'),
    approvalNote: text('approval_note'),
    resolutionBy: text('resolution_by'),
    resolutionAt: tz('resolution_at'),
    resolutionNote: text('resolution_note'),
    retentionMs: bigint('retention_ms', { mode: 'number' }).notNull(),
    createdAt: tz('created_at').notNull(),
    updatedAt: tz('updated_at').notNull(),
    completedAt: tz('completed_at'),
    retainedUntil: tz('retained_until'),
  },
  (t) => [
    primaryKey({ name: 'idem_operations_pkey', columns: [t.scope, t.key] }),
    index('idem_operations_id_idx').on(t.id),
    // Listing is keyset-paginated oldest first within a scope. Partial (on a predicate
    // every row meets, which the list query states) so that a statement naming
    // (scope, key) can only use the primary key: on a young, never-analyzed table the
    // planner tied the two, and a generic plan of the prepared begin and complete kept
    // this index with `scope = $1` alone, reading every row of the scope on each call
    // (measured: 4.9 million index entries read in 5 s of begin+complete).
    index('idem_operations_scope_created_idx')
      .on(t.scope, t.createdAt, t.id)
      .where(sql`created_at IS NOT NULL`),
    // The sweeper looks for expired leases and approval deadlines.
    index('idem_operations_lease_expiry_idx').on(t.leaseExpiresAt).where(sql`status = 'in_progress'`),
    index('idem_operations_approval_deadline_idx')
      .on(t.approvalDeadline)
      .where(sql`status = 'pending_approval'`),
    // Purge works in indexed batches.
    index('idem_operations_retained_idx')
      .on(t.retainedUntil)
      .where(sql`status IN ('succeeded', 'failed', 'rejected', 'ready')`),
    // Stats, metrics and the reconciler look only at open operations.
    index('idem_operations_open_idx')
      .on(t.scope, t.status, t.createdAt)
      .where(sql`status IN ('pending_approval', 'ready', 'in_progress', 'outcome_unknown')`),
    check(
      'idem_operations_status_check',
      sql`status IN ('pending_approval', 'ready', 'in_progress', 'outcome_unknown', 'succeeded', 'failed', 'rejected')`,
    ),
    check(
      'idem_operations_effect_check',
      sql`effect IN ('read', 'idempotent_write', 'non_idempotent_write', 'unclassified')`,
    ),
    check(
      'idem_operations_lease_check',
      sql`status <> 'in_progress' OR (lease_id IS NOT NULL AND lease_expires_at IS NOT NULL)`,
    ),
  ],
);

export const events = pgTable(
  'idem_events',
  {
    scope: text('scope').notNull(),
    id: uuid('id').notNull(),
    operationId: uuid('operation_id').notNull(),
    key: text('key').notNull(),
    /** The operation's version after this event (unchanged for rejected calls). */
    version: integer('version').notNull(),
    type: text('type').notNull(),
    // Microseconds here: events are ordered by version, lapse last, then `at`
    // (`EVENT_ORDER` in `ledger/sql/events.ts`), and two events of one operation
    // can fall in the same millisecond.
    at: timestamp('at', { withTimezone: true, precision: 6 }).notNull(),
    actor: text('actor').notNull(),
    attempt: integer('attempt').notNull(),
    detail: jsonb('detail').notNull(),
  },
  (t) => [
    // One index, which is also how events are read (an operation's, in version
    // order) and purged (an operation's, all at once). The id ends the key, so
    // it stays unique within an operation's version; a lapse's id is derived
    // from the operation and the version, so a second writer of the same lapse
    // hits this key. Two indexes (scope, id) and (scope, operation_id, version,
    // at) cost every transition one more B-tree insert: 13% more WAL per begin
    // + complete and 6% more per lapse (pg_waldump, 2026-12-02).
    primaryKey({ name: 'idem_events_pkey', columns: [t.scope, t.operationId, t.version, t.id] }),
  ],
);
