/**
 * A worker process of an agent runtime: runs ONE call through the executor.
 * The D3 drill kills it with SIGKILL in the middle of the call.
 *
 * WORKER_CONFIG (JSON): { ledgerUrl, scope, serviceUrl, tool, effect?, leaseMs, call }
 */
import { pino } from 'pino';
import { getOrderTool, refundOrderTool } from '../../../examples/agent-loop/tools.js';
import { createTicketTool } from '../../../examples/ticket-service/client.js';
import { LedgerClient, type ToolCall, type ToolDefinition, ToolExecutor } from '../../../src/client/index.js';
import type { Effect } from '../../../src/contract/index.js';

interface WorkerConfig {
  ledgerUrl: string;
  scope: string;
  serviceUrl: string;
  tool: 'get_order' | 'refund_order' | 'create_ticket';
  effect?: Effect;
  leaseMs: number;
  call: ToolCall;
}

const cfg = JSON.parse(process.env.WORKER_CONFIG ?? '{}') as WorkerConfig;
const tools: Record<WorkerConfig['tool'], () => ToolDefinition> = {
  get_order: () => getOrderTool(cfg.serviceUrl) as unknown as ToolDefinition,
  refund_order: () =>
    refundOrderTool(cfg.serviceUrl, { requiresApproval: false }) as unknown as ToolDefinition,
  create_ticket: () => createTicketTool(cfg.serviceUrl) as unknown as ToolDefinition,
};
const base = tools[cfg.tool]();
const tool = cfg.effect ? { ...base, policy: { ...base.policy, effect: cfg.effect } } : base;
const executor = new ToolExecutor({
  ledger: new LedgerClient({ baseUrl: cfg.ledgerUrl }),
  scope: cfg.scope,
  tools: [tool],
  leaseMs: cfg.leaseMs,
  logger: pino({ level: 'silent' }),
});
console.log('worker ready');
const record = await executor.execute(cfg.call);
console.log(`record ${JSON.stringify(record)}`);
