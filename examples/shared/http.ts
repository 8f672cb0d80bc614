/**
 * The little HTTP kit the example services share: JSON in and out, a
 * listening helper, and a way to "lose" a response after the work is done.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A route handler: answers by calling `send` or `lose`. */
export type Handler = (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<void>;

/** Reads a JSON body (at most 64 KiB); undefined when it is not JSON. */
export async function readJson(req: IncomingMessage): Promise<unknown> {
  let text = '';
  for await (const chunk of req) {
    text += chunk;
    if (text.length > 65_536) return undefined;
  }
  try {
    return text === '' ? undefined : JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Sends `body` as JSON with `status` and extra headers. */
export function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

/** Sends an RFC 9457 problem. */
export function problem(
  res: ServerResponse,
  status: number,
  code: string,
  detail: string,
  headers: Record<string, string> = {},
) {
  res.writeHead(status, { 'content-type': 'application/problem+json', ...headers });
  res.end(JSON.stringify({ type: 'about:blank', title: code, status, code, detail }));
}

/** Drops the connection without an answer: the work is done, the response is lost. */
export function lose(res: ServerResponse): void {
  res.socket?.destroy();
}

/** A started service: its base URL and how to stop it. */
export interface Listening {
  url: string;
  server: Server;
  close(): Promise<void>;
}

/** Serves `handler` on `host:port` (0: any free port). */
export async function listen(handler: Handler, port = 0, host = '127.0.0.1'): Promise<Listening> {
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', `http://${req.headers.host ?? host}`);
    handler(req, res, url).catch((err: unknown) => {
      if (!res.headersSent) problem(res, 500, 'INTERNAL', err instanceof Error ? err.name : 'error');
    });
  });
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${bound}`,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The ledger's address for the examples: `LEDGER_URL`, else a ledger started with `npx tsx src/server.ts`. */
export function ledgerUrl(): string {
  return process.env.LEDGER_URL ?? 'http://127.0.0.1:8080';
}
