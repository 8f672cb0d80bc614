/**
 * The shared contract: TypeBox schemas of the ledger's resources and bodies.
 *
 * Imported by the server (route schemas, `openapi.yaml`) and by the client
 * (`idem/client`). It must import nothing but `typebox`.
 */
import { type Static, Type } from 'typebox';

/** `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`: no `/`, so it is one path segment. */
export const SCOPE_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$';
/** 1..255 characters, no C0 control characters and no DEL. `/` is allowed. */
export const KEY_PATTERN = '^[^\\u0000-\\u001F\\u007F]{1,255}$';
/** A client-supplied opaque fingerprint: 1..128 printable ASCII characters. */
export const FINGERPRINT_PATTERN = '^[\\x20-\\x7E]{1,128}$';
/**
 * A UUID in its one canonical spelling, 8-4-4-4-12 hex digits, either case.
 * The `uuid` format alone also admits `urn:uuid:...`, which Postgres cannot cast.
 */
export const UUID_PATTERN = '^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$';
/** The largest attempt number (a Postgres `integer`). */
export const MAX_ATTEMPT = 2_147_483_647;

export const EFFECTS = ['read', 'idempotent_write', 'non_idempotent_write', 'unclassified'] as const;
export type Effect = (typeof EFFECTS)[number];

export const STATUSES = [
  'pending_approval',
  'ready',
  'in_progress',
  'outcome_unknown',
  'succeeded',
  'failed',
  'rejected',
] as const;
export type OperationStatus = (typeof STATUSES)[number];
export const TERMINAL_STATUSES: readonly OperationStatus[] = ['succeeded', 'failed', 'rejected'];

export const Scope = Type.String({ pattern: SCOPE_PATTERN, description: 'tenant / namespace' });
export const Key = Type.String({
  pattern: KEY_PATTERN,
  description: 'operation key; percent-encoded as ONE path segment',
});
export const Fingerprint = Type.String({ pattern: FINGERPRINT_PATTERN });
export const EffectSchema = Type.Enum(EFFECTS, { description: 'effect class, fixed at creation' });
export const StatusSchema = Type.Enum(STATUSES);
export const Timestamp = Type.String({ format: 'date-time' });
/** A UUID: canonical 8-4-4-4-12 hex (either case). */
export const Uuid = Type.String({ format: 'uuid', pattern: UUID_PATTERN });
const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Union([t, Type.Null()]);

export const LeaseView = Type.Object(
  {
    expiresAt: Timestamp,
    owner: Nullable(Type.String()),
    dispatchedAt: Nullable(Timestamp),
  },
  { $id: 'LeaseView', description: 'the current lease; its id is a secret returned only to the acquirer' },
);

export const ApprovalView = Type.Object(
  {
    state: Type.Enum(['pending', 'approved', 'rejected', 'expired']),
    deadline: Timestamp,
    decidedBy: Nullable(Type.String()),
    decidedAt: Nullable(Timestamp),
    note: Nullable(Type.String()),
  },
  { $id: 'ApprovalView' },
);

export const ResolutionView = Type.Object(
  {
    by: Type.String(),
    at: Timestamp,
    note: Type.String(),
  },
  { $id: 'ResolutionView' },
);

export const Operation = Type.Object(
  {
    id: Uuid,
    scope: Type.String(),
    key: Type.String(),
    fingerprint: Type.String(),
    effect: EffectSchema,
    status: StatusSchema,
    attempt: Type.Integer({ minimum: 0, description: 'fencing number' }),
    lease: Nullable(LeaseView),
    request: Type.Unknown({ description: 'the canonical request JSON, or null' }),
    result: Type.Unknown({ description: 'the stored result JSON, or null' }),
    approval: Nullable(ApprovalView),
    metadata: Type.Record(Type.String(), Type.Unknown()),
    resolution: Nullable(ResolutionView),
    createdAt: Timestamp,
    updatedAt: Timestamp,
    completedAt: Nullable(Timestamp),
    retainedUntil: Nullable(Timestamp),
  },
  { $id: 'Operation' },
);
export type Operation = Static<typeof Operation>;

/** Returned only to the acquirer of a lease. */
export const Lease = Type.Object(
  {
    id: Uuid,
    attempt: Type.Integer({ minimum: 1 }),
    expiresAt: Timestamp,
  },
  { $id: 'Lease' },
);
export type Lease = Static<typeof Lease>;

export const BEGIN_OUTCOMES = ['acquired', 'pending_approval', 'replayed'] as const;
export type BeginOutcome = (typeof BEGIN_OUTCOMES)[number];

export const LEASE_MS = { minimum: 1000, maximum: 3_600_000, default: 30_000 } as const;
export const APPROVAL_TIMEOUT_MS = { minimum: 1000, maximum: 2_592_000_000, default: 86_400_000 } as const;
export const RETENTION_MS = { minimum: 3_600_000, maximum: 2_592_000_000, default: 86_400_000 } as const;

/** Byte limits (UTF-8) of the contract, section 4. */
export const LIMITS = {
  bodyBytes: 512 * 1024,
  requestBytes: 64 * 1024,
  resultBytes: 256 * 1024,
  metadataBytes: 16 * 1024,
  noteChars: 4096,
  ownerChars: 200,
  reasonBytes: 1024,
  jsonDepth: 64,
} as const;

const LeaseId = Type.String({
  format: 'uuid',
  pattern: UUID_PATTERN,
  description: 'canonical 8-4-4-4-12 hex; answered in lower case',
});

export const BeginBody = Type.Object(
  {
    key: Key,
    request: Type.Optional(Type.Unknown({ description: 'the request JSON; fingerprinted with RFC 8785' })),
    fingerprint: Type.Optional(Fingerprint),
    effect: Type.Optional(EffectSchema),
    leaseMs: Type.Optional(Type.Integer(LEASE_MS)),
    leaseId: Type.Optional(LeaseId),
    dispatch: Type.Optional(Type.Boolean({ default: true })),
    owner: Type.Optional(Type.String({ minLength: 1, maxLength: LIMITS.ownerChars })),
    requireApproval: Type.Optional(Type.Boolean({ default: false })),
    approvalTimeoutMs: Type.Optional(Type.Integer(APPROVAL_TIMEOUT_MS)),
    storeRequest: Type.Optional(Type.Boolean({ default: true })),
    metadata: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    retentionMs: Type.Optional(Type.Integer(RETENTION_MS)),
  },
  {
    $id: 'BeginBody',
    additionalProperties: false,
    // Swagger UI sends the first example as is: it must be a body the service accepts.
    examples: [
      {
        key: 'session-42/turn-3/call-7',
        request: { orderId: 'ORD-1002', amount: 30 },
        effect: 'non_idempotent_write',
        leaseMs: 30000,
        owner: 'worker-7',
        metadata: { tool: 'cancel_order', sessionId: 'session-42' },
      },
    ],
  },
);
export type BeginBody = Static<typeof BeginBody>;

export const BeginResponse = Type.Object(
  {
    outcome: Type.Enum(BEGIN_OUTCOMES),
    operation: Operation,
    lease: Type.Optional(Lease),
    recovered: Type.Optional(Type.Boolean()),
  },
  { $id: 'BeginResponse' },
);
export type BeginResponse = Static<typeof BeginResponse>;

export const LeaseBody = Type.Object(
  { leaseId: LeaseId },
  {
    $id: 'LeaseBody',
    additionalProperties: false,
    examples: [{ leaseId: 'c0a80f3e-5b7d-4c1a-9e2f-0d1c2b3a4f5e' }],
  },
);
export type LeaseBody = Static<typeof LeaseBody>;

/** release and unknown: why the lease ended, recorded in the event's detail. */
export const LeaseEndBody = Type.Object(
  {
    leaseId: LeaseId,
    reason: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: LIMITS.reasonBytes,
        description: 'why the lease ended, for operators; at most 1 KiB of UTF-8',
      }),
    ),
  },
  {
    $id: 'LeaseEndBody',
    additionalProperties: false,
    examples: [{ leaseId: 'c0a80f3e-5b7d-4c1a-9e2f-0d1c2b3a4f5e', reason: 'validation failed, never sent' }],
  },
);
export type LeaseEndBody = Static<typeof LeaseEndBody>;

export const HeartbeatBody = Type.Object(
  { leaseId: LeaseId, leaseMs: Type.Optional(Type.Integer(LEASE_MS)) },
  {
    $id: 'HeartbeatBody',
    additionalProperties: false,
    examples: [{ leaseId: 'c0a80f3e-5b7d-4c1a-9e2f-0d1c2b3a4f5e', leaseMs: 60000 }],
  },
);
export type HeartbeatBody = Static<typeof HeartbeatBody>;

export const CompleteBody = Type.Object(
  {
    leaseId: LeaseId,
    status: Type.Enum(['succeeded', 'failed']),
    result: Type.Optional(Type.Unknown()),
  },
  {
    $id: 'CompleteBody',
    additionalProperties: false,
    examples: [
      { leaseId: 'c0a80f3e-5b7d-4c1a-9e2f-0d1c2b3a4f5e', status: 'succeeded', result: { ticket: 'T-1001' } },
    ],
  },
);
export type CompleteBody = Static<typeof CompleteBody>;

export const Note = Type.String({ minLength: 1, maxLength: LIMITS.noteChars });

export const ApproveBody = Type.Object(
  { fingerprint: Type.Optional(Fingerprint), note: Type.Optional(Note) },
  { $id: 'ApproveBody', additionalProperties: false, examples: [{ note: 'refund under the limit' }] },
);
export type ApproveBody = Static<typeof ApproveBody>;

export const RejectBody = Type.Object(
  { note: Type.Optional(Note), result: Type.Optional(Type.Unknown()) },
  { $id: 'RejectBody', additionalProperties: false, examples: [{ note: 'duplicate of ORD-1001' }] },
);
export type RejectBody = Static<typeof RejectBody>;

export const ResolveBody = Type.Object(
  {
    status: Type.Enum(['succeeded', 'failed', 'ready']),
    note: Note,
    result: Type.Optional(Type.Unknown()),
    expectedAttempt: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_ATTEMPT })),
  },
  {
    $id: 'ResolveBody',
    additionalProperties: false,
    examples: [{ status: 'failed', note: 'checked upstream: never charged', expectedAttempt: 1 }],
  },
);
export type ResolveBody = Static<typeof ResolveBody>;

/** Lease-holder and operator calls answer `{ operation, lease? }`. */
export const OperationResponse = Type.Object(
  {
    operation: Operation,
    lease: Type.Optional(Lease),
  },
  { $id: 'OperationResponse' },
);
export type OperationResponse = Static<typeof OperationResponse>;

export const EVENT_TYPES = [
  'created',
  'acquired',
  'dispatched',
  'completed',
  'late_completion',
  'released',
  'marked_unknown',
  'lease_expired',
  'approved',
  'rejected',
  'approval_expired',
  'resolved',
  'stale_completion_rejected',
  'result_mismatch',
  'approval_refused',
  'resolution_refused',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export const OperationEvent = Type.Object(
  {
    type: Type.Enum(EVENT_TYPES),
    at: Timestamp,
    actor: Type.String(),
    attempt: Type.Integer(),
    detail: Type.Record(Type.String(), Type.Unknown()),
  },
  { $id: 'OperationEvent' },
);
export type OperationEvent = Static<typeof OperationEvent>;

export const EventsResponse = Type.Object({ events: Type.Array(OperationEvent) }, { $id: 'EventsResponse' });
export type EventsResponse = Static<typeof EventsResponse>;

export const ListQuery = Type.Object(
  {
    status: Type.Optional(StatusSchema),
    scope: Type.Optional(Scope),
    effect: Type.Optional(EffectSchema),
    createdBefore: Type.Optional(Timestamp),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
    cursor: Type.Optional(Type.String({ maxLength: 512 })),
  },
  { additionalProperties: false },
);
export type ListQuery = Static<typeof ListQuery>;

export const ListResponse = Type.Object(
  {
    items: Type.Array(Operation),
    nextCursor: Nullable(Type.String()),
  },
  { $id: 'ListResponse' },
);
export type ListResponse = Static<typeof ListResponse>;

export const ScopeStats = Type.Object(
  {
    scope: Type.String(),
    counts: Type.Record(Type.String(), Type.Integer()),
    oldestOutcomeUnknownAgeMs: Nullable(Type.Integer()),
  },
  { $id: 'ScopeStats' },
);
export const StatsResponse = Type.Object({ scopes: Type.Array(ScopeStats) }, { $id: 'StatsResponse' });
export type StatsResponse = Static<typeof StatsResponse>;
