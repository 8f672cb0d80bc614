/**
 * The MCP adapter against an in-memory MCP server of the SDK, run through the
 * executor and the real ledger.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { effectFromAnnotations, mcpTools, type ToolDefinition } from '../../src/client/index.js';
import { SETUP_TIMEOUT_MS, testExecutor, uid, useLedger } from './support.js';

const L = useLedger();
let client: Client;
const tickets = new Map<string, { id: number; title: string }>();
const seenMeta: Record<string, unknown>[] = [];
let flakyCalls = 0;
let cancelledOnServer = 0;

async function startMcp(): Promise<Client> {
  const server = new McpServer({ name: 'tickets', version: '1.0.0' });
  server.registerTool(
    'get_ticket',
    { description: 'read a ticket', inputSchema: { id: z.number() }, annotations: { readOnlyHint: true } },
    async ({ id }) => ({ content: [{ type: 'text', text: `ticket ${id}` }] }),
  );
  server.registerTool(
    'create_ticket',
    {
      description: 'create a ticket; dedupes on the idempotency key',
      inputSchema: { title: z.string() },
      annotations: { idempotentHint: true, destructiveHint: false },
    },
    async ({ title }, extra) => {
      seenMeta.push({ ...extra._meta });
      const key = String(extra._meta?.idempotencyKey);
      let ticket = tickets.get(key);
      if (!ticket) {
        ticket = { id: tickets.size + 1, title };
        tickets.set(key, ticket);
      }
      return { content: [{ type: 'text', text: JSON.stringify(ticket) }], structuredContent: ticket };
    },
  );
  server.registerTool(
    'delete_ticket',
    {
      description: 'delete a ticket',
      inputSchema: { id: z.number() },
      annotations: { destructiveHint: true },
    },
    async () => ({ content: [{ type: 'text', text: 'deleted' }] }),
  );
  server.registerTool('mystery', { description: 'who knows', inputSchema: { x: z.string() } }, async () => ({
    content: [{ type: 'text', text: 'done' }],
  }));
  server.registerTool(
    'flaky_read',
    { description: 'fails twice', inputSchema: { q: z.string() }, annotations: { readOnlyHint: true } },
    async () => {
      flakyCalls++;
      if (flakyCalls <= 2) {
        return {
          isError: true,
          content: [{ type: 'text', text: 'backend busy' }],
          structuredContent: { code: 'UPSTREAM_UNAVAILABLE', retryable: true, notApplied: true },
        };
      }
      return { content: [{ type: 'text', text: 'found' }] };
    },
  );
  server.registerTool(
    'hang',
    { description: 'never answers', inputSchema: { q: z.string() }, annotations: { readOnlyHint: true } },
    async (_args, extra) =>
      new Promise((_, reject) => {
        extra.signal.addEventListener('abort', () => {
          cancelledOnServer++;
          reject(new Error('cancelled'));
        });
      }),
  );
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const c = new Client({ name: 'idem-test', version: '1.0.0' });
  await c.connect(clientSide);
  return c;
}

beforeAll(async () => {
  client = await startMcp();
}, SETUP_TIMEOUT_MS);
afterAll(async () => {
  await client.close();
});

const executor = (tools: ToolDefinition[]) => testExecutor(L, tools, { scope: 'mcp' }).ex;
const call = (name: string, args: unknown) => ({
  sessionId: uid(),
  turnId: 't',
  toolCallId: 'c',
  name,
  arguments: args,
});

describe('effectFromAnnotations', () => {
  it.each([
    [{ readOnlyHint: true }, 'read'],
    [{ readOnlyHint: true, destructiveHint: true }, 'read'],
    [{ idempotentHint: true }, 'idempotent_write'],
    [{ idempotentHint: true, destructiveHint: true }, 'idempotent_write'],
    [{ destructiveHint: true }, 'non_idempotent_write'],
    [{ destructiveHint: false }, 'non_idempotent_write'],
    [{ readOnlyHint: false }, 'non_idempotent_write'],
    [{ openWorldHint: true }, 'unclassified'],
    [undefined, 'unclassified'],
  ] as const)('%j -> %s', (annotations, effect) => {
    expect(effectFromAnnotations(annotations)).toBe(effect);
  });
});

describe('mcpTools', () => {
  it('wraps every tool with the effect its annotations imply; an explicit policy wins', async () => {
    const tools = await mcpTools(client, {
      prefix: 'tickets.',
      policies: { delete_ticket: { effect: 'idempotent_write', requiresApproval: true } },
    });
    const byName = Object.fromEntries(tools.map((t) => [t.name, t.policy]));
    expect(byName).toMatchObject({
      'tickets.get_ticket': { effect: 'read' },
      'tickets.create_ticket': { effect: 'idempotent_write' },
      'tickets.delete_ticket': { effect: 'idempotent_write', requiresApproval: true },
      'tickets.mystery': { effect: 'unclassified' },
    });
  });

  it('passes the idempotency key in _meta; the same call replays from the ledger', async () => {
    const ex = executor(await mcpTools(client));
    const c = call('create_ticket', { title: 'printer on fire' });
    const first = await ex.execute(c);
    expect(first).toMatchObject({
      status: 'succeeded',
      effect: 'idempotent_write',
      output: { id: 1, title: 'printer on fire' },
    });
    expect(seenMeta.at(-1)).toMatchObject({ idempotencyKey: first.key });
    const again = await ex.execute(c);
    expect(again).toMatchObject({ status: 'succeeded', output: { id: 1 }, attempts: 0 });
    expect(seenMeta).toHaveLength(1);
    expect(tickets.size).toBe(1);
  });

  it("validates against the server's JSON Schema before anything is sent", async () => {
    const ex = executor(await mcpTools(client));
    const before = seenMeta.length;
    const wrongType = await ex.execute(call('create_ticket', { title: 42 }));
    const extraField = await ex.execute(call('create_ticket', { title: 'x', priority: 'urgent' }));
    expect(wrongType.error?.code).toBe('INVALID_ARGUMENT');
    expect(extraField.error?.code).toBe('INVALID_ARGUMENT');
    expect(seenMeta.length).toBe(before);
  });

  it('maps a structured isError result to a ToolError: a read is retried', async () => {
    const ex = executor(await mcpTools(client));
    const record = await ex.execute(call('flaky_read', { q: 'x' }));
    expect(record).toMatchObject({ status: 'succeeded', output: 'found', attempts: 3 });
  });

  it('a destructive tool waits for approval by default', async () => {
    const ex = executor(await mcpTools(client));
    const record = await ex.execute(call('delete_ticket', { id: 1 }));
    expect(record).toMatchObject({
      status: 'pending_approval',
      effect: 'non_idempotent_write',
      requiresApproval: true,
    });
  });

  it("the executor's timeout cancels the request on the server", async () => {
    const tools = await mcpTools(client, {
      timeoutMs: 50,
      policies: { hang: { effect: 'read', retry: { attempts: 2 } } },
    });
    const record = await executor(tools).execute(call('hang', { q: 'x' }));
    expect(record).toMatchObject({ status: 'failed', attempts: 2, error: { code: 'TIMEOUT' } });
    await expect.poll(() => cancelledOnServer).toBe(2);
  });
});
