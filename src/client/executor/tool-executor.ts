/**
 * `ToolExecutor`: runs every tool call a model proposes through the ledger.
 * The model proposes; the executor decides and records; the ledger makes the
 * decision durable. See docs/executor.md.
 */
import { hostname } from 'node:os';
import { type Logger, pino } from 'pino';
import type { TSchema } from 'typebox';
import { KEY_PATTERN } from '../../contract/index.js';
import { type Random, realSleep, type Sleep } from '../ledger/backoff.js';
import type { BeginResult, LedgerClient } from '../ledger/ledger-client.js';
import { isLedgerError } from '../ledger/ledger-error.js';
import { adoptRecorded, beginBody, beginFailure } from './begin-call.js';
import { parseArguments, strictSchema, validationErrors } from './call-args.js';
import { logCall } from './call-log.js';
import { buildRecord, type CallRecord, callKey, type Outcome } from './call-record.js';
import { runAcquired } from './call-runner.js';
import type { CallState, ToolCall } from './call-state.js';
import { inputHash } from './canonical.js';
import { outOfBudget } from './out-of-budget.js';
import { inProgressOutcome, notRun, outcomeFromOperation, unknownOutcome } from './outcome.js';
import { SessionBudget, type SessionBudgetOptions } from './session-budget.js';
import { approvalRequired, type ToolDefinition } from './tool.js';

/** Options of a {@link ToolExecutor}. */
export interface ToolExecutorOptions {
  ledger: LedgerClient;
  /** The ledger scope of every call: trusted configuration, never the model's arguments. */
  scope: string;
  tools?: ToolDefinition[];
  /** Gets one line per call. Default: pino at `info`. */
  logger?: Logger;
  /** Shown to operators as the lease owner. Default `executor@<host>:<pid>`. */
  owner?: string;
  /** Lease length; heartbeats every third of it. Default 30 s. */
  leaseMs?: number;
  /** How long one call may take, waits and retries included. Default 2 min. */
  callTimeoutMs?: number;
  /** `wait`: block until a pending approval is decided (within the call deadline). Default: return at once. */
  approval?: { wait?: boolean; pollMs?: number; timeoutMs?: number };
  /** How often to look again at a call another worker holds. Default 500 ms. */
  pollMs?: number;
  /** Per-session limits, or a shared instance. */
  budget?: SessionBudget | SessionBudgetOptions;
  /** How long the ledger keeps finished calls. Default: the ledger's (24 h). */
  retentionMs?: number;
  /** Injected by tests. */
  sleep?: Sleep;
  random?: Random;
  now?: () => number;
}

/** Per-call options. */
export interface ExecuteOptions {
  /** Cancels the call: waits end, the running attempt is aborted. */
  signal?: AbortSignal;
  traceId?: string;
}

/** A tool as offered to a model: name, description, JSON Schema. */
export interface ToolSpec {
  name: string;
  description: string;
  inputSchema: TSchema;
}

const TOOL_NAME = /^[A-Za-z0-9_.-]{1,64}$/;
const KEY = new RegExp(KEY_PATTERN, 'u');

/** Runs tool calls through the ledger, per the client contract (docs/executor.md). */
export class ToolExecutor {
  /** Attempts and wall time per session. */
  readonly budget: SessionBudget;
  readonly #tools = new Map<string, ToolDefinition>();
  readonly #schemas = new Map<string, TSchema>();
  readonly #ledger: LedgerClient;
  readonly #scope: string;
  readonly #logger: Logger;
  readonly #owner: string;
  readonly #leaseMs: number;
  readonly #callTimeoutMs: number;
  readonly #approval: { wait: boolean; pollMs: number; timeoutMs: number | undefined };
  readonly #pollMs: number;
  readonly #retentionMs: number | undefined;
  readonly #sleep: Sleep;
  readonly #random: Random;
  readonly #now: () => number;

  constructor(options: ToolExecutorOptions) {
    this.#ledger = options.ledger;
    this.#scope = options.scope;
    this.#logger = options.logger ?? pino({ name: 'idem-executor' });
    this.#owner = options.owner ?? `executor@${hostname()}:${process.pid}`;
    this.#leaseMs = options.leaseMs ?? 30_000;
    this.#callTimeoutMs = options.callTimeoutMs ?? 120_000;
    this.#approval = {
      wait: options.approval?.wait ?? false,
      pollMs: options.approval?.pollMs ?? 1000,
      timeoutMs: options.approval?.timeoutMs,
    };
    this.#pollMs = options.pollMs ?? 500;
    this.#retentionMs = options.retentionMs;
    this.#sleep = options.sleep ?? realSleep;
    this.#random = options.random ?? Math.random;
    this.#now = options.now ?? Date.now;
    this.budget =
      options.budget instanceof SessionBudget
        ? options.budget
        : new SessionBudget({ now: this.#now, ...options.budget });
    for (const tool of options.tools ?? []) this.register(tool);
  }

  /** Adds a tool. Its schema is closed (`additionalProperties: false`) unless it says otherwise. */
  register(tool: ToolDefinition): this {
    if (!TOOL_NAME.test(tool.name)) throw new TypeError(`invalid tool name "${tool.name}"`);
    if (this.#tools.has(tool.name)) throw new TypeError(`tool "${tool.name}" is already registered`);
    this.#tools.set(tool.name, tool);
    this.#schemas.set(tool.name, strictSchema(tool.input));
    return this;
  }

  /** The tools as a model API wants them. */
  specs(): ToolSpec[] {
    return [...this.#tools.values()].map((t) => ({
      name: t.name,
      description: t.description,
      inputSchema: this.#schemas.get(t.name) as TSchema,
    }));
  }

  /**
   * Runs one proposed call and answers its record; never throws for anything
   * the tool, the model or the ledger does. Executing the same call again
   * (same ids, same arguments) re-enters it: a finished call is replayed, an
   * approved one runs.
   */
  async execute(call: ToolCall, options: ExecuteOptions = {}): Promise<CallRecord> {
    const key = callKey(call);
    // The ids come from the runtime, not the model: a bad one is a programming error.
    if (!KEY.test(key)) throw new TypeError(`the call key "${key}" is not a valid ledger key`);
    const startedMs = this.#now();
    const tool = this.#tools.get(call.name);
    const c: CallState = {
      call,
      key,
      scope: this.#scope,
      tool: tool as ToolDefinition,
      args: {},
      effect: tool?.policy.effect ?? 'unclassified',
      requiresApproval: tool ? approvalRequired(tool.policy) : false,
      approval: null,
      startedMs,
      deadline: startedMs + this.#callTimeoutMs,
      attempts: 0,
      recovered: false,
      signal: options.signal,
      logger: this.#logger.child({ tool: call.name, key }),
    };
    let hash = 'sha256:';
    const leave = this.budget.enter(call.sessionId);
    try {
      const outcome = await (async (): Promise<Outcome> => {
        if (!tool) return notRun('NOT_FOUND', `there is no tool named "${call.name}"`, 'fix_arguments');
        const parsed = parseArguments(call.arguments);
        if (!parsed.ok) {
          hash = inputHash(String(call.arguments));
          return notRun('INVALID_ARGUMENT', parsed.message, 'fix_arguments');
        }
        c.args = parsed.value;
        hash = inputHash(parsed.value);
        const problems = validationErrors(this.#schemas.get(tool.name) as TSchema, parsed.value);
        if (problems.length > 0) {
          return notRun(
            'INVALID_ARGUMENT',
            `the arguments do not match the schema: ${problems.join('; ')}`,
            'fix_arguments',
          );
        }
        const exhausted = this.budget.exhausted(call.sessionId);
        if (exhausted !== undefined) return await outOfBudget(this.#ledger, c, hash, exhausted);
        try {
          return await this.#drive(c, hash, options.traceId);
        } catch (err) {
          // A bug, not a tool failure: say no more than whether the tool ran.
          c.logger.error({ err }, 'executor failure');
          return c.attempts > 0
            ? unknownOutcome('INTERNAL', 'the executor failed while the tool was running')
            : notRun('INTERNAL', 'the executor failed before running the tool');
        }
      })();
      return this.#finish(c, hash, outcome, options.traceId);
    } finally {
      leave();
    }
  }

  /** The begin loop: acquire, replay, wait for approval or for another worker. */
  async #drive(c: CallState, hash: string, traceId: string | undefined): Promise<Outcome> {
    const body = beginBody(c, hash, traceId, {
      leaseMs: this.#leaseMs,
      owner: this.#owner,
      approvalTimeoutMs: this.#approval.timeoutMs,
      retentionMs: this.#retentionMs,
    });
    for (;;) {
      if (c.signal?.aborted) return notRun('CANCELLED', 'the call was cancelled before it ran');
      let begun: BeginResult;
      try {
        begun = await this.#ledger.begin(this.#scope, body, { signal: c.signal });
      } catch (err) {
        if (isLedgerError(err, 'OPERATION_IN_PROGRESS')) {
          if (err.operation) adoptRecorded(c, err.operation);
          const wait = Math.max(10, Math.min(this.#pollMs, err.retryAfterMs ?? this.#pollMs));
          if (await this.#pause(c, wait)) continue;
          return inProgressOutcome();
        }
        return beginFailure(c, err);
      }
      adoptRecorded(c, begun.operation);
      if (begun.outcome === 'replayed') return outcomeFromOperation(begun.operation, c.effect);
      if (begun.outcome === 'pending_approval') {
        if (this.#approval.wait && (await this.#pause(c, this.#approval.pollMs))) continue;
        return outcomeFromOperation(begun.operation, c.effect);
      }
      c.recovered = begun.recovered === true;
      const ran = await runAcquired(
        {
          ledger: this.#ledger,
          budget: this.budget,
          leaseMs: this.#leaseMs,
          sleep: this.#sleep,
          random: this.#random,
          now: this.#now,
        },
        c,
        begun.leaseId,
      );
      if (ran !== 'begin_again') return ran;
      // Our lease lapsed before dispatch: nothing ran; begin again while there is time.
      if (this.#now() >= c.deadline)
        return notRun('DEADLINE_EXCEEDED', 'the call ran out of time before it ran');
    }
  }

  /** Sleeps `ms` unless that passes the deadline or the call is cancelled; false when it may not. */
  async #pause(c: CallState, ms: number): Promise<boolean> {
    if (this.#now() + ms > c.deadline) return false;
    try {
      await this.#sleep(ms, c.signal);
      return true;
    } catch {
      return false;
    }
  }

  #finish(c: CallState, hash: string, outcome: Outcome, traceId: string | undefined): CallRecord {
    const record = buildRecord(
      {
        callId: c.call.toolCallId,
        key: c.key,
        scope: c.scope,
        tool: c.call.name,
        effect: c.effect,
        requiresApproval: c.requiresApproval,
        attempts: c.attempts,
        approval: c.approval,
        inputHash: hash,
        startedMs: c.startedMs,
        finishedMs: this.#now(),
      },
      outcome,
    );
    logCall(this.#logger, record, { cause: c.cause, traceId, sessionId: c.call.sessionId });
    return record;
  }
}
