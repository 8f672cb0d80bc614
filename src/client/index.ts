/**
 * `idem/client`: the client half of Idem. Imports nothing from the server
 * side and needs no Postgres driver, only `fetch` and the shared contract.
 */
export type * from '../contract/index.js';
export { backoffCeiling, backoffDelay, type Random, realSleep, type Sleep } from './backoff.js';
export { logCall } from './call-log.js';
export {
  type CallApproval,
  type CallError,
  type CallRecord,
  type CallStatus,
  DID_NOT_RUN,
  IN_PROGRESS_TEXT,
  type NextAction,
  OUTCOME_UNKNOWN_TEXT,
} from './call-record.js';
export type { ToolCall } from './call-runner.js';
export { canonicalJson, inputHash, REDACTED, redactPaths, scrubMessage } from './canonical.js';
export { type AttemptFailure, classify, type Decision } from './classify.js';
export {
  type BeginInput,
  type BeginResult,
  type CallOptions,
  LedgerClient,
  type LedgerClientOptions,
} from './ledger-client.js';
export { isLedgerError, LedgerError, type LedgerErrorCode, type LedgerErrorInit } from './ledger-error.js';
export type { LedgerRetryOptions } from './ledger-http.js';
export {
  effectFromAnnotations,
  type McpAnnotations,
  type McpToolsOptions,
  mcpTool,
  mcpTools,
} from './mcp-adapter.js';
export {
  Reconciler,
  type ReconcilerOptions,
  type ReconcileSummary,
  type ReportContext,
} from './reconciler.js';
export { SessionBudget, type SessionBudgetOptions } from './session-budget.js';
export {
  approvalRequired,
  DEFAULT_TOOL_RETRY,
  DEFAULT_TOOL_TIMEOUT_MS,
  defineTool,
  isRepeatable,
  type Json,
  type ProbeContext,
  type ProbeResult,
  type ToolContext,
  type ToolDefinition,
  type ToolPolicy,
} from './tool.js';
export {
  TERMINAL_CODES,
  ToolError,
  type ToolErrorCode,
  type ToolErrorOptions,
  TRANSIENT_CODES,
} from './tool-error.js';
export {
  type ExecuteOptions,
  ToolExecutor,
  type ToolExecutorOptions,
  type ToolSpec,
} from './tool-executor.js';
