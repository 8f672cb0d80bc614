/**
 * MCP adapter: the tools of an MCP server (through an `@modelcontextprotocol/sdk`
 * `Client`) as executor tools. Only types are imported from the SDK, so the
 * client entry point does not load it unless the caller does.
 *
 * The effect class comes from an explicit policy when one is given (the policy
 * beats framework metadata), else from the tool's annotations:
 * `readOnlyHint` -> read, `idempotentHint` -> idempotent_write, any other write
 * hint -> non_idempotent_write, no hints -> unclassified.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Tool as McpTool } from '@modelcontextprotocol/sdk/types.js';
import type { TSchema } from 'typebox';
import type { Effect } from '../../contract/index.js';
import { DEFAULT_TOOL_TIMEOUT_MS, type ToolDefinition, type ToolPolicy } from '../executor/tool.js';
import { ToolError } from '../executor/tool-error.js';

/** Options of {@link mcpTools}. */
export interface McpToolsOptions {
  /** Per MCP tool name: explicit policy fields, which win over the annotations. */
  policies?: Record<string, Partial<ToolPolicy>>;
  /** Per MCP tool name: a probe for the reconciler. */
  probes?: Record<string, NonNullable<ToolDefinition['probe']>>;
  /** Per-attempt timeout. Default 30 s. */
  timeoutMs?: number;
  /** Prepended to every tool name (e.g. `tickets.`). */
  prefix?: string;
  /** The `_meta` field that carries the idempotency key. Default `idempotencyKey`. */
  metaKey?: string;
  /** Which tools to wrap. Default: all. */
  filter?: (tool: McpTool) => boolean;
}

/** The annotations of an MCP tool that say what calling it does. */
export type McpAnnotations = McpTool['annotations'];

/** The effect class the MCP annotations imply. */
export function effectFromAnnotations(annotations: McpAnnotations): Effect {
  if (!annotations) return 'unclassified';
  if (annotations.readOnlyHint === true) return 'read';
  if (annotations.idempotentHint === true) return 'idempotent_write';
  // The server says it writes (not read-only, or says how destructive it is) but not idempotently.
  if (annotations.readOnlyHint === false || annotations.destructiveHint !== undefined)
    return 'non_idempotent_write';
  return 'unclassified';
}

/** Lists the server's tools (every page) and wraps each as an executor tool. */
export async function mcpTools(client: Client, options: McpToolsOptions = {}): Promise<ToolDefinition[]> {
  const tools: McpTool[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor === undefined ? {} : { cursor });
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  return tools.filter((t) => options.filter?.(t) ?? true).map((t) => mcpTool(client, t, options));
}

/** Wraps one MCP tool. */
export function mcpTool(client: Client, tool: McpTool, options: McpToolsOptions = {}): ToolDefinition {
  const explicit = options.policies?.[tool.name] ?? {};
  const policy: ToolPolicy = {
    ...explicit,
    effect: explicit.effect ?? effectFromAnnotations(tool.annotations),
  };
  const timeoutMs = options.timeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS;
  const metaKey = options.metaKey ?? 'idempotencyKey';
  const name = `${options.prefix ?? ''}${tool.name}`.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 64);
  const definition: ToolDefinition = {
    name,
    description: tool.description ?? tool.title ?? tool.name,
    input: tool.inputSchema as unknown as TSchema,
    policy,
    timeoutMs,
    async run(args, ctx) {
      let result: Awaited<ReturnType<Client['callTool']>>;
      try {
        result = await client.callTool(
          {
            name: tool.name,
            arguments: args as Record<string, unknown>,
            _meta: { [metaKey]: ctx.idempotencyKey },
          },
          undefined,
          // The executor's signal carries the timeout; the SDK's own must not fire first.
          { signal: ctx.signal, timeout: timeoutMs + 1000 },
        );
      } catch (err) {
        throw fromProtocolError(err);
      }
      if ('toolResult' in result) return result.toolResult;
      if (result.isError) throw fromErrorResult(result.content, result.structuredContent);
      return result.structuredContent ?? contentOutput(result.content);
    },
  };
  const probe = options.probes?.[tool.name];
  if (probe) definition.probe = probe;
  return definition;
}

type Content = { type: string; text?: string }[];

function contentOutput(content: Content): unknown {
  if (content.every((c) => c.type === 'text')) return content.map((c) => c.text ?? '').join('\n');
  return { content };
}

/** An `isError` result: a structured `{ code, retryable, notApplied }` is honoured, else it is an opaque failure. */
function fromErrorResult(content: Content, structured: Record<string, unknown> | undefined): ToolError {
  const text = content
    .filter((c) => c.type === 'text')
    .map((c) => c.text ?? '')
    .join(' ')
    .trim();
  const message = text || 'the MCP tool reported an error';
  if (structured && typeof structured.code === 'string') {
    return new ToolError(structured.code, message, {
      ...(typeof structured.retryable === 'boolean' ? { retryable: structured.retryable } : {}),
      notApplied: structured.notApplied === true,
    });
  }
  return new ToolError('TOOL_ERROR', message, { retryable: false });
}

// JSON-RPC error codes of the MCP SDK (ErrorCode), compared by value so the
// SDK need not be loaded here.
const INVALID_PARAMS = -32602;
const METHOD_NOT_FOUND = -32601;
const REQUEST_TIMEOUT = -32001;
const CONNECTION_CLOSED = -32000;

function fromProtocolError(err: unknown): unknown {
  const code = (err as { code?: unknown })?.code;
  if (typeof code !== 'number') return err;
  // The server refused the request before running the tool.
  if (code === INVALID_PARAMS)
    return new ToolError('INVALID_ARGUMENT', 'the MCP server refused the arguments', { notApplied: true });
  if (code === METHOD_NOT_FOUND)
    return new ToolError('NOT_FOUND', 'the MCP server has no such tool', { notApplied: true });
  if (code === REQUEST_TIMEOUT) return new ToolError('TIMEOUT', 'the MCP server did not answer in time');
  if (code === CONNECTION_CLOSED) return new ToolError('UPSTREAM_UNAVAILABLE', 'the MCP connection closed');
  return err;
}
