/**
 * The report marker: an operation `reconciler-report/<O.id>/<A>` in the
 * marker scope that the reconciler takes through `begin` before it resolves
 * operation O at attempt A, so that each outcome is reported once (see
 * reconciler.ts for the sequence and the crash cases).
 */
import type { BeginBody, Operation } from '../../contract/index.js';
import type { ProbeResult } from '../executor/tool.js';
import type { BeginResult } from '../ledger/ledger-client.js';

const MARKER_PREFIX = 'reconciler-report/';

/** What a probe (or the user check) found, when it could tell. */
export type Finding = Exclude<ProbeResult, { status: 'unknown' }>;

/** A marker this reconciler holds, and the text a probe gave for the note. */
export interface HeldMarker {
  scope: string;
  reportKey: string;
  reply: BeginResult;
  text: string | undefined;
}

/** The marker key of `op` at `attempt`: also the `reportKey` a sink dedupes on. */
export function reportKeyOf(op: Pick<Operation, 'id'>, attempt: number): string {
  return `${MARKER_PREFIX}${op.id}/${attempt}`;
}

/** The begin body that takes the marker: an idempotent write, dispatched only right before the report. */
export function markerBody(
  op: Operation,
  scope: string,
  attempt: number,
  leaseMs: number,
  text: string | undefined,
): BeginBody {
  return {
    key: reportKeyOf(op, attempt),
    request: { operationId: op.id, attempt },
    effect: 'idempotent_write',
    dispatch: false,
    leaseMs,
    metadata: { operationKey: op.key, scope, ...(text ? { text } : {}) },
  };
}

/** Which operation and attempt a marker stands for; undefined for anything else in the scope. */
export function markerRef(marker: Operation): { operationId: string; attempt: number } | undefined {
  if (!marker.key.startsWith(MARKER_PREFIX)) return undefined;
  const r = marker.request as { operationId?: unknown; attempt?: unknown } | null;
  if (!r || typeof r.operationId !== 'string' || typeof r.attempt !== 'number') return undefined;
  return { operationId: r.operationId, attempt: r.attempt };
}

/** The probe's text kept with the marker, for a report sent after a crash. */
export function markerText(marker: Operation): string | undefined {
  const t = marker.metadata.text;
  return typeof t === 'string' ? t : undefined;
}
