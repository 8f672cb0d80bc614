/**
 * `Reconciler`: finds calls whose outcome is unknown, asks the tool's probe
 * (or a user check) whether the effect happened, resolves them in the ledger
 * with compare-and-set, and reports the real outcome to the session once.
 *
 * Report-once rests on the ledger itself. Before it resolves operation O at
 * attempt A, a reconciler takes a marker operation
 * `reconciler-report/<O.id>/<A>` (in a marker scope of its own) through
 * begin, exactly as a tool call would:
 *
 *   begin marker ─▶ resolve O (expectedAttempt A) ─▶ dispatch marker ─▶ report ─▶ complete marker
 *
 * - Two reconcilers: one holds the marker, the other gets
 *   OPERATION_IN_PROGRESS and moves on; a completed marker replays, so a
 *   second run reports nothing new.
 * - Crash before dispatch: the marker's lease lapses undispatched, it is
 *   `ready` again, and the next run finds it in the marker scope (O is no
 *   longer `outcome_unknown`, so it could not be found through O) and reports.
 * - Crash after dispatch: the report may have gone out. The marker is a
 *   dispatched idempotent write, so the next begin re-acquires it with
 *   `recovered: true`; `wasReported(reportKey)` is asked when given, else the
 *   report is sent again under the same `reportKey` for the sink to dedupe.
 *   This is the only window where a report can repeat; none is ever lost.
 * - Fencing: dispatch needs a live lease, so a reconciler that stalled past
 *   its lease cannot report after another took over.
 */
import type { Logger } from 'pino';
import { pino } from 'pino';
import type { Operation } from '../../contract/index.js';
import type { CallRecord } from '../executor/call-record.js';
import type { ProbeResult, ToolDefinition } from '../executor/tool.js';
import type { LedgerClient } from '../ledger/ledger-client.js';
import { isLedgerError } from '../ledger/ledger-error.js';
import { rebuildCall, recordFromOperation, reportText, resolveBody } from './reconcile-report.js';
import {
  type Finding,
  type HeldMarker,
  markerBody,
  markerRef,
  markerText,
  reportKeyOf,
} from './report-marker.js';

/** Context handed to `report`. */
export interface ReportContext {
  /** Stable across re-runs: a sink that dedupes on it makes reports exactly-once. */
  reportKey: string;
  operation: Operation;
}

/** Options of a {@link Reconciler}. */
export interface ReconcilerOptions {
  ledger: LedgerClient;
  /** Tools whose `probe` answers for their calls (matched by the recorded tool name). */
  tools?: ToolDefinition[];
  /** Asked when the tool has no probe: did the effect of `key` with `args` happen? */
  check?: (key: string, args: unknown, operation: Operation) => Promise<ProbeResult>;
  /** Tells the session; must throw only when it did not deliver. */
  report: (record: CallRecord, text: string, context: ReportContext) => Promise<void>;
  /** Whether a report under `reportKey` already reached the session (consulted after a crash mid-report). */
  wasReported?: (reportKey: string) => Promise<boolean>;
  /** Where markers live. Default `<scope>.reconciler`. */
  markerScope?: (scope: string) => string;
  /** Who the note is from: "Note from <source>: ...". Default `the reconciler`. */
  source?: string;
  /** What "not applied" resolves to: `failed` (default; the model decides) or `ready` (the same call may run). */
  notApplied?: 'failed' | 'ready';
  /** Marker lease. Default 60 s. */
  leaseMs?: number;
  logger?: Logger;
  now?: () => number;
}

/** What one run did. */
export interface ReconcileSummary {
  examined: number;
  resolved: number;
  reported: number;
  /** Still unknown after asking. */
  left: number;
  /** Held by another reconciler, or failed this time (see the log). */
  skipped: number;
}

/** Reconciles `outcome_unknown` calls of a scope; safe to run twice, concurrently, or after a crash. */
export class Reconciler {
  readonly #o: ReconcilerOptions;
  readonly #tools: Map<string, ToolDefinition>;
  readonly #logger: Logger;
  readonly #now: () => number;

  constructor(options: ReconcilerOptions) {
    this.#o = options;
    this.#tools = new Map((options.tools ?? []).map((t) => [t.name, t]));
    this.#logger = options.logger ?? pino({ name: 'idem-reconciler' });
    this.#now = options.now ?? Date.now;
  }

  /** One pass over `scope`: unfinished reports first, then new unknown outcomes. */
  async run({ scope, signal }: { scope: string; signal?: AbortSignal }): Promise<ReconcileSummary> {
    const sum: ReconcileSummary = { examined: 0, resolved: 0, reported: 0, left: 0, skipped: 0 };
    const markerScope = this.#markerScope(scope);
    const seen = new Set<string>();
    for (const status of ['ready', 'in_progress'] as const) {
      for await (const marker of this.#o.ledger.listAll({ scope: markerScope, status }, { signal })) {
        const ref = markerRef(marker);
        if (!ref || seen.has(ref.operationId)) continue;
        seen.add(ref.operationId);
        const op = await this.#tryStep(() => this.#o.ledger.getById(ref.operationId, { signal }));
        if (op) await this.#reconcile(sum, scope, op, ref.attempt, signal);
      }
    }
    for await (const op of this.#o.ledger.listAll({ scope, status: 'outcome_unknown' }, { signal })) {
      if (seen.has(op.id)) continue;
      seen.add(op.id);
      await this.#reconcile(sum, scope, op, op.attempt, signal);
    }
    this.#logger.info({ scope, ...sum }, 'reconciliation pass');
    return sum;
  }

  /** Settles one operation at one attempt: decide, hold the marker, resolve, report. */
  async #reconcile(
    sum: ReconcileSummary,
    scope: string,
    op: Operation,
    attempt: number,
    signal?: AbortSignal,
  ): Promise<void> {
    sum.examined++;
    const stillUnknown = op.status === 'outcome_unknown' && op.attempt === attempt;
    let finding: Finding | undefined;
    if (stillUnknown) {
      finding = await this.#decide(op, signal);
      if (!finding) {
        sum.left++;
        return;
      }
    }
    const markerScope = this.#markerScope(scope);
    const reportKey = reportKeyOf(op, attempt);
    const text = finding?.text;
    const marker = await this.#tryStep(() =>
      this.#o.ledger.begin(markerScope, markerBody(op, scope, attempt, this.#o.leaseMs ?? 60_000, text), {
        signal,
      }),
    );
    // A replayed marker means the report went out already: nothing to count.
    if (marker?.outcome === 'replayed') return;
    if (marker?.outcome !== 'acquired') {
      sum.skipped++;
      return;
    }
    const held: HeldMarker = { scope: markerScope, reportKey, reply: marker, text };
    const ok = await this.#tryStep(() =>
      this.#settleAndReport(sum, scope, op, attempt, finding, held, signal),
    );
    if (ok !== true) sum.skipped++;
  }

  /**
   * Under the marker: resolve (or re-read) the operation, then report it once.
   * False when it is still unknown (the marker is given back).
   */
  async #settleAndReport(
    sum: ReconcileSummary,
    scope: string,
    op: Operation,
    attempt: number,
    finding: Finding | undefined,
    held: HeldMarker,
    signal?: AbortSignal,
  ): Promise<boolean> {
    const { ledger } = this.#o;
    const leaseId = held.reply.leaseId;
    let current = op;
    if (finding) {
      current = await this.#resolve(scope, op, attempt, finding, signal);
      if (current.status !== 'outcome_unknown' && current.resolution) sum.resolved++;
    } else {
      current = await ledger.getById(op.id, { signal });
    }
    if (current.attempt !== attempt) {
      // Re-armed and run again since: that later attempt is what the session
      // must hear about (its own marker), not this one.
      const result = { superseded: true, attempt: current.attempt };
      await ledger.complete(held.scope, held.reportKey, { leaseId, status: 'succeeded', result }, { signal });
      return true;
    }
    if (current.status === 'outcome_unknown') {
      // Not settled (the resolve did not happen): give the marker back.
      await ledger.release(held.scope, held.reportKey, leaseId, { signal });
      return false;
    }
    await ledger.dispatch(held.scope, held.reportKey, leaseId, { signal });
    const note = await this.#report(sum, current, held, signal);
    await ledger.complete(
      held.scope,
      held.reportKey,
      {
        leaseId,
        status: 'succeeded',
        result: { reportedAt: new Date(this.#now()).toISOString(), text: note },
      },
      { signal },
    );
    return true;
  }

  /** Tells the session, unless a crashed run already did; answers the note. */
  async #report(
    sum: ReconcileSummary,
    current: Operation,
    held: HeldMarker,
    signal?: AbortSignal,
  ): Promise<string> {
    const { reportKey, reply } = held;
    const already = reply.recovered === true && (await this.#o.wasReported?.(reportKey)) === true;
    const note = reportText(
      current,
      this.#o.source ?? 'the reconciler',
      held.text ?? markerText(reply.operation),
    );
    if (already) return note;
    try {
      await this.#o.report(recordFromOperation(current, this.#now()), note, {
        reportKey,
        operation: current,
      });
    } catch (err) {
      // The sink says it did not deliver: the marker goes back, the next run retries.
      await this.#o.ledger.release(held.scope, reportKey, reply.leaseId, { signal });
      throw err;
    }
    sum.reported++;
    return note;
  }

  /** Asks the tool's probe or the user check. Undefined when nobody can tell. */
  async #decide(op: Operation, signal?: AbortSignal): Promise<Finding | undefined> {
    const call = rebuildCall(op);
    const tool = this.#tools.get(call.tool);
    try {
      let found: ProbeResult | undefined;
      if (tool?.probe) {
        const ctx = {
          idempotencyKey: call.key,
          scope: op.scope,
          signal: signal ?? new AbortController().signal,
        };
        found = await tool.probe(call.args as never, ctx);
      } else if (this.#o.check) {
        found = await this.#o.check(call.key, call.args, op);
      }
      return found && found.status !== 'unknown' ? found : undefined;
    } catch (err) {
      this.#logger.warn({ key: op.key, err: err instanceof Error ? err.name : typeof err }, 'probe failed');
      return undefined;
    }
  }

  /** Resolve with compare-and-set; when someone else won, answers the operation as it now stands. */
  async #resolve(scope: string, op: Operation, attempt: number, p: Finding, signal?: AbortSignal) {
    const { ledger } = this.#o;
    const body = resolveBody(p, attempt, this.#o.notApplied ?? 'failed');
    try {
      return (await ledger.resolve(scope, op.key, body, { signal })).operation;
    } catch (err) {
      if (!isLedgerError(err, 'INVALID_STATE', 'LEASE_LOST', 'RESULT_MISMATCH')) throw err;
      return ledger.getById(op.id, { signal });
    }
  }

  #markerScope(scope: string): string {
    return this.#o.markerScope ? this.#o.markerScope(scope) : `${scope}.reconciler`;
  }

  /**
   * Runs one step of a reconciliation; a failure is logged and answered as
   * undefined (the caller counts it as skipped), never thrown, so one bad
   * operation cannot stop the pass.
   */
  async #tryStep<T>(fn: () => Promise<T>): Promise<T | undefined> {
    try {
      return await fn();
    } catch (err) {
      if (isLedgerError(err, 'OPERATION_IN_PROGRESS')) return undefined;
      this.#logger.warn(
        { err: isLedgerError(err) ? err.code : err instanceof Error ? err.name : typeof err },
        'reconciliation step failed',
      );
      return undefined;
    }
  }
}
