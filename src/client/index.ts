/**
 * `idem/client`: the client half of Idem. Imports nothing from the server
 * side and needs no Postgres driver, only `fetch` and the shared contract.
 */
export type * from '../contract/index.js';
export { logCall } from './executor/call-log.js';
export type {
  CallApproval,
  CallError,
  CallRecord,
  CallStatus,
  NextAction,
} from './executor/call-record.js';
export type { ToolCall } from './executor/call-state.js';
export { canonicalJson, inputHash, REDACTED, redactPaths, scrubMessage } from './executor/canonical.js';
export { type AttemptFailure, classify, type Decision } from './executor/classify.js';
export { DID_NOT_RUN, IN_PROGRESS_TEXT, OUTCOME_UNKNOWN_TEXT } from './executor/model-text.js';
export { SessionBudget, type SessionBudgetOptions } from './executor/session-budget.js';
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
} from './executor/tool.js';
export {
  TERMINAL_CODES,
  ToolError,
  type ToolErrorCode,
  type ToolErrorOptions,
  TRANSIENT_CODES,
} from './executor/tool-error.js';
export {
  type ExecuteOptions,
  ToolExecutor,
  type ToolExecutorOptions,
  type ToolSpec,
} from './executor/tool-executor.js';
export { backoffCeiling, backoffDelay, type Random, realSleep, type Sleep } from './ledger/backoff.js';
export {
  type BeginInput,
  type BeginResult,
  type CallOptions,
  LedgerClient,
  type LedgerClientOptions,
} from './ledger/ledger-client.js';
export {
  isLedgerError,
  LedgerError,
  type LedgerErrorCode,
  type LedgerErrorInit,
} from './ledger/ledger-error.js';
export type { LedgerRetryOptions } from './ledger/ledger-http.js';
export {
  effectFromAnnotations,
  type McpAnnotations,
  type McpToolsOptions,
  mcpTool,
  mcpTools,
} from './mcp/mcp-adapter.js';
export {
  Reconciler,
  type ReconcilerOptions,
  type ReconcileSummary,
  type ReportContext,
} from './reconciler/reconciler.js';
