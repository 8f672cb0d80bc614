/**
 * What the executor knows about one call while it runs it: handed from the
 * begin loop (tool-executor.ts) to the acquired phase (call-runner.ts).
 */
import type { Logger } from 'pino';
import type { Effect } from '../../contract/index.js';
import type { Random, Sleep } from '../ledger/backoff.js';
import type { LedgerClient } from '../ledger/ledger-client.js';
import type { CallApproval } from './call-record.js';
import type { SessionBudget } from './session-budget.js';
import type { Json, ToolDefinition } from './tool.js';

/** One proposed call as the runtime hands it over. */
export interface ToolCall {
  sessionId: string;
  turnId: string;
  /** The model protocol's id of this request. */
  toolCallId: string;
  /** The tool's name. */
  name: string;
  /** A JSON string or a parsed value. */
  arguments?: unknown;
}

/** What the executor knows about a call in flight. */
export interface CallState {
  call: ToolCall;
  key: string;
  scope: string;
  tool: ToolDefinition;
  args: Json;
  effect: Effect;
  requiresApproval: boolean;
  approval: CallApproval;
  startedMs: number;
  deadline: number;
  attempts: number;
  /** The lease was taken over from a worker that dispatched and lapsed: an earlier attempt may have run. */
  recovered: boolean;
  signal: AbortSignal | undefined;
  logger: Logger;
  /** An exception a tool raised, kept for the log line only. */
  cause?: unknown;
}

/** What the runner needs from the executor. */
export interface RunnerDeps {
  ledger: LedgerClient;
  budget: SessionBudget;
  leaseMs: number;
  sleep: Sleep;
  random: Random;
  now: () => number;
}
