/**
 * The real side of drill F8: the service through `app.inject` on the real
 * database, the calls the model predicts, and the checks made after every
 * command (the model's prediction, and the invariants that hold whatever the
 * model says).
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import type { Operation, OperationEvent } from '../../src/contract/index.js';
import type { Database } from '../../src/db/database.js';
import type { client, Reply } from '../support/http.js';
import {
  type Call,
  canon,
  type Expect,
  KEYS,
  type OpModel,
  PURGEABLE,
  RESULTS,
  SCOPE,
  TERMINAL,
  VARIANTS,
} from './ledger-model.js';

export type Api = ReturnType<typeof client>;

export interface Model {
  ops: (OpModel | undefined)[];
  /** Every lease id the test has seen, per key, oldest first. */
  leases: string[][];
  /** Every operation id per key, purged ones too. */
  ids: string[][];
}

interface Seen {
  op: Operation;
  events: OperationEvent[];
}

export interface Real {
  api: Api;
  db: Database;
  /** The last reads of each key. */
  seen: (Seen | undefined)[];
  /** Terminal operations as first read: they never change again. */
  frozen: Map<string, string>;
  /** Releases racing calls in an order it picks (the scheduled property only). */
  scheduler?: { schedule<T>(p: Promise<T>, label?: string): Promise<T>; waitAll(): Promise<void> };
}

export const SWEEP = { batchSize: 500, purgeBatchSize: 500, intervalMs: 1000, enabled: false };
/** Long leases: only the test's time travel ever expires one, however slow the machine. */
const LEASE_MS = 600_000;

export async function freshWorld(api: Api, db: Database) {
  await db.rows(sql`DELETE FROM idem_events`);
  await db.rows(sql`DELETE FROM idem_operations`);
  const model: Model = {
    ops: KEYS.map(() => undefined),
    leases: KEYS.map(() => []),
    ids: KEYS.map(() => []),
  };
  const real: Real = { api, db, seen: KEYS.map(() => undefined), frozen: new Map() };
  return { model, real };
}

/** The HTTP request of a call: what a failure report shows. */
export function requestOf(c: Call): { url: string; body: Record<string, unknown> } {
  const key = KEYS[c.k]!;
  const url = (action: string) => `/v1/scopes/${SCOPE}/operations/${encodeURIComponent(key)}/${action}`;
  switch (c.kind) {
    case 'begin': {
      const body: Record<string, unknown> = {
        key,
        ...VARIANTS[c.variant]!,
        leaseMs: LEASE_MS,
        dispatch: c.dispatch,
      };
      if (c.effect) body.effect = c.effect;
      if (c.requireApproval) body.requireApproval = true;
      if (c.leaseId) body.leaseId = c.leaseId;
      return { url: `/v1/scopes/${SCOPE}/operations`, body };
    }
    case 'heartbeat':
      return { url: url(c.kind), body: { leaseId: c.leaseId, leaseMs: LEASE_MS } };
    case 'dispatch':
    case 'release':
    case 'unknown':
      return { url: url(c.kind), body: { leaseId: c.leaseId } };
    case 'complete': {
      const body: Record<string, unknown> = { leaseId: c.leaseId, status: c.status };
      if (RESULTS[c.result] !== undefined) body.result = RESULTS[c.result];
      return { url: url(c.kind), body };
    }
    case 'approve':
      return { url: url(c.kind), body: c.fingerprint === undefined ? {} : { fingerprint: c.fingerprint } };
    case 'reject': {
      const body: Record<string, unknown> = {};
      if (c.note) body.note = c.note;
      if (c.withResult) body.result = { reason: 'rejected by the model' };
      return { url: url(c.kind), body };
    }
    case 'resolve': {
      const body: Record<string, unknown> = { status: c.status, note: 'checked downstream' };
      if (RESULTS[c.result] !== undefined) body.result = RESULTS[c.result];
      if (c.expectedAttempt !== undefined) body.expectedAttempt = c.expectedAttempt;
      return { url: url(c.kind), body };
    }
  }
}

export function send(api: Api, c: Call): Promise<Reply> {
  const { url, body } = requestOf(c);
  return api.call('POST', url, body);
}

/** Lease ids the test knows: none may ever appear inside an operation or an event. */
const allLeases = (m: Model) => m.leases.flat();

function leaked(m: Model, text: string): string[] {
  return allLeases(m)
    .filter((id) => text.includes(id))
    .map((id) => `lease id ${id} appears in ${text.slice(0, 200)}`);
}

/** Where the real operation differs from the model's. */
export function compareOp(o: Operation, m: OpModel): string[] {
  const d: string[] = [];
  const eq = (what: string, got: unknown, want: unknown) => {
    if (canon(got) !== canon(want)) d.push(`${what}: got ${canon(got)}, model ${canon(want)}`);
  };
  if (m.id !== null) eq('id', o.id, m.id);
  eq('status', o.status, m.status);
  eq('attempt', o.attempt, m.attempt);
  eq('fingerprint', o.fingerprint, m.fingerprint);
  eq('effect', o.effect, m.effect);
  eq('request', o.request, m.request);
  eq('result', o.result, m.result);
  eq('approval.state', o.approval?.state ?? null, m.approval);
  eq('resolution', o.resolution !== null, m.resolved);
  const leased = m.status === 'in_progress' || m.status === 'outcome_unknown';
  eq('lease shown', o.lease !== null, leased);
  if (o.lease && leased) eq('lease.dispatchedAt set', o.lease.dispatchedAt !== null, m.dispatched);
  eq('completedAt set', o.completedAt !== null, TERMINAL.has(m.status));
  eq('retainedUntil set', o.retainedUntil !== null, PURGEABLE.has(m.status));
  return d;
}

/** Where a reply differs from the prediction (nothing thrown: races try several orders). */
export function compareReply(r: Reply, e: Expect, m: Model): string[] {
  const d: string[] = [];
  if (r.status !== e.status) return [`HTTP ${r.status}, model ${e.status}: ${r.raw.slice(0, 300)}`];
  const b = r.body;
  if (e.code) {
    if (b.code !== e.code) d.push(`code ${b.code}, model ${e.code}`);
    if (!String(r.headers['content-type']).includes('application/problem+json')) d.push('not problem+json');
    if (b.retryable !== (e.code === 'OPERATION_IN_PROGRESS')) d.push(`retryable ${b.retryable}`);
    if (e.code === 'OPERATION_IN_PROGRESS' && !(Number(r.headers['retry-after']) >= 1))
      d.push('no Retry-After');
  }
  if (e.outcome) {
    if (b.outcome !== e.outcome) d.push(`outcome ${b.outcome}, model ${e.outcome}`);
    if (e.outcome === 'replayed' && r.headers['idempotent-replayed'] !== 'true')
      d.push('no Idempotent-Replayed');
    if (e.outcome === 'pending_approval' && r.headers['retry-after'] !== '5') d.push('Retry-After is not 5');
    if (e.outcome !== 'acquired' && b.lease !== undefined) d.push('a lease outside an acquisition');
  }
  if (e.acquiredLease) {
    if (b.lease?.attempt !== e.next?.attempt)
      d.push(`lease.attempt ${b.lease?.attempt}, model ${e.next?.attempt}`);
    if (e.acquiredLease.id !== undefined && b.lease?.id !== e.acquiredLease.id)
      d.push(`lease.id ${b.lease?.id}, sent ${e.acquiredLease.id}`);
    if (!/^[0-9a-f-]{36}$/.test(String(b.lease?.id))) d.push('no lease id');
    if (
      (b.recovered === true) !== (e.recovered === true) ||
      (b.recovered !== undefined && b.recovered !== true)
    )
      d.push(`recovered ${b.recovered}, model ${e.recovered}`);
  }
  if (e.status === 200 && !e.outcome) {
    if (
      e.replyLease
        ? b.lease?.id !== e.replyLease || b.lease?.attempt !== e.next?.attempt
        : b.lease !== undefined
    ) {
      d.push(`lease ${JSON.stringify(b.lease)} in the reply, model ${e.replyLease ?? 'none'}`);
    }
  }
  if (b.operation !== undefined) {
    if (!e.next) d.push('an operation in a reply the model says has none');
    else d.push(...compareOp(b.operation, e.next).map((x) => `reply operation ${x}`));
    d.push(...leaked(m, JSON.stringify(b.operation)));
  } else if (e.next && e.status !== 404) d.push('no operation in the reply');
  return d;
}

/** Learns what only the service knows (ids, server-made lease ids) from a reply that matched. */
export function learn(m: Model, k: number, e: Expect, r: Reply): void {
  const next = e.next ? { ...e.next } : undefined;
  if (next && e.acquiredLease && e.acquiredLease.id === undefined) next.leaseId = r.body.lease.id;
  if (next && next.id === null) {
    // A new operation (a key reused after a purge too) gets a new id.
    if (m.ids[k]!.includes(r.body.operation.id)) fail('an id came back', [r.body.operation.id]);
    next.id = r.body.operation.id;
  }
  if (next?.leaseId && !m.leases[k]!.includes(next.leaseId)) m.leases[k]!.push(next.leaseId);
  if (next?.id && !m.ids[k]!.includes(next.id)) m.ids[k]!.push(next.id);
  m.ops[k] = next;
}

export const cloneModel = (m: Model): Model => ({
  ...m,
  ops: [...m.ops],
  leases: m.leases.map((l) => [...l]),
  ids: m.ids.map((l) => [...l]),
});

export interface KeyRead {
  get: Reply;
  events: Reply;
}

export async function readKey(r: Real, k: number): Promise<KeyRead> {
  const [get, events] = await Promise.all([r.api.get(KEYS[k]!), r.api.events(KEYS[k]!)]);
  return { get, events };
}

const sortTypes = (ts: readonly string[]) => [...ts].sort().join(',');

/**
 * Checks one key's reads against the model and the invariants:
 *   - the operation reads as the model says (and exactly as before when nothing changed);
 *   - lease ids never appear in an operation or an event;
 *   - attempt never decreases, and equals the acquisitions the log records;
 *   - the log is append-only: what was listed is still listed, first, unchanged,
 *     and the new events are the predicted ones; one `created` per operation id;
 *   - a terminal operation never changes again.
 */
export function checkKey(
  r: Real,
  m: Model,
  k: number,
  read: KeyRead,
  want: { events: readonly string[]; ordered: boolean; changes: boolean },
): string[] {
  const d: string[] = [];
  const mop = m.ops[k];
  const prev = r.seen[k];
  if (!mop) {
    if (read.get.status !== 404 || read.get.body.code !== 'NOT_FOUND')
      d.push(`GET: HTTP ${read.get.status}, model 404`);
    if (read.events.status !== 404) d.push(`GET events: HTTP ${read.events.status}, model 404`);
    return d;
  }
  if (read.get.status !== 200) return [`GET: HTTP ${read.get.status}, model 200 ${mop.status}`];
  const op = read.get.body.operation as Operation;
  d.push(...compareOp(op, mop).map((x) => `GET ${x}`));
  d.push(...leaked(m, read.get.raw), ...leaked(m, read.events.raw));
  const same = prev !== undefined && prev.op.id === op.id;
  if (same && !want.changes && JSON.stringify(op) !== JSON.stringify(prev.op)) {
    d.push(
      `nothing was to change, but the operation reads ${JSON.stringify(op)}, was ${JSON.stringify(prev.op)}`,
    );
  }
  if (same && op.attempt < prev.op.attempt) d.push(`attempt went down: ${prev.op.attempt} -> ${op.attempt}`);
  const frozen = r.frozen.get(op.id);
  if (frozen !== undefined && frozen !== JSON.stringify(op))
    d.push(`terminal operation changed: was ${frozen}`);

  const events = read.events.body.events as OperationEvent[];
  const types = events.map((e) => e.type);
  if (types.filter((t) => t === 'created').length !== 1 || types[0] !== 'created') {
    d.push(`not exactly one created event, first: ${types}`);
  }
  const acquisitions = events.filter(
    (e) => e.type === 'acquired' || (e.type === 'created' && e.attempt === 1),
  );
  if (
    acquisitions.map((e) => e.attempt).join() !== Array.from({ length: op.attempt }, (_, i) => i + 1).join()
  ) {
    d.push(
      `attempt ${op.attempt}, but the log records acquisitions at attempts ${acquisitions.map((e) => e.attempt)}`,
    );
  }
  let added = events;
  if (same) {
    const before = prev.events.map((e) => JSON.stringify(e));
    const now = events.map((e) => JSON.stringify(e));
    const prefix = before.every((e, i) => now[i] === e);
    if (!prefix) {
      d.push(`events are not append-only: listed before ${prev.events.map((e) => e.type)}, now ${types}`);
    }
    added = events.slice(prev.events.length);
  }
  // Oldest first: in a sequential run every event is dated no earlier than the one listed before it.
  if (want.ordered) {
    const at = events.map((e) => Date.parse(e.at));
    const i = at.findIndex((x, j) => j > 0 && x < at[j - 1]!);
    if (i > 0) d.push(`events not oldest first: ${events.map((e) => `${e.type}@${e.at}`).join(', ')}`);
  }
  const low = same ? prev.op.attempt : 0;
  // A lapse recorded by the begin that takes the row over belongs to the lease that lapsed.
  const acquiredNow = added.some((e) => e.type === 'acquired');
  const lapseOfPrevious = (e: OperationEvent) =>
    acquiredNow && e.type === 'lease_expired' && e.attempt === op.attempt - 1;
  const odd = added.filter(
    (e) => !lapseOfPrevious(e) && (e.attempt > op.attempt || e.attempt < (want.ordered ? op.attempt : low)),
  );
  if (odd.length) d.push(`new events at attempts ${added.map((e) => e.attempt)}, operation at ${op.attempt}`);
  const got = added.map((e) => e.type);
  if (want.ordered ? got.join() !== want.events.join() : sortTypes(got) !== sortTypes(want.events)) {
    d.push(`new events ${got}, model ${want.events}`);
  }
  return d;
}

/** Remembers what was read, for the next command's comparisons. */
export function commitKey(r: Real, k: number, read: KeyRead): void {
  if (read.get.status !== 200) {
    r.seen[k] = undefined;
    return;
  }
  const op = read.get.body.operation as Operation;
  r.seen[k] = { op, events: read.events.body.events };
  if (TERMINAL.has(op.status) && !r.frozen.has(op.id)) r.frozen.set(op.id, JSON.stringify(op));
}

export function fail(what: string, diffs: string[], extra: Record<string, unknown> = {}): never {
  const lines = [`${what}:`, ...diffs.map((x) => `  - ${x}`)];
  for (const [k, v] of Object.entries(extra))
    lines.push(`  ${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`);
  throw new Error(lines.join('\n'));
}

/** A lease id for a holder call, chosen at run time from what the test knows. */
export function pickLease(m: Model, k: number, pick: 'current' | 'stale' | 'bogus'): string {
  const current = m.ops[k]?.leaseId ?? null;
  const known = m.leases[k]!;
  if (pick === 'current') return current ?? known[known.length - 1] ?? randomUUID();
  if (pick === 'stale') return [...known].reverse().find((id) => id !== current) ?? randomUUID();
  return randomUUID();
}
