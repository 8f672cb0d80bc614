/**
 * A bare HTTP client for drills: one TCP connection per request (so a proxy
 * or a kill decides the fate of exactly one response), the raw body bytes as
 * received (to compare replays byte for byte), and transport failures as
 * rejections with the errno (ECONNRESET, ECONNREFUSED, ...).
 */
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';

export interface RawReply {
  status: number;
  headers: IncomingHttpHeaders;
  /** The body exactly as received, decoded as UTF-8. */
  raw: string;
  // biome-ignore lint/suspicious/noExplicitAny: a parsed JSON body, checked field by field
  body: any;
  ms: number;
}

export class TransportError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export function send(
  baseUrl: string,
  method: 'GET' | 'POST',
  path: string,
  payload?: unknown,
  timeoutMs = 15_000,
): Promise<RawReply> {
  const started = performance.now();
  const u = new URL(path, baseUrl);
  const data = payload === undefined ? undefined : Buffer.from(JSON.stringify(payload));
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: u.hostname,
        port: u.port,
        method,
        path: u.pathname + u.search,
        agent: false, // a fresh connection, closed after the response
        headers: data ? { 'content-type': 'application/json', 'content-length': data.length } : {},
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', (err: NodeJS.ErrnoException) =>
          reject(new TransportError(err.code ?? 'ERESPONSE', err.message)),
        );
        res.on('end', () => {
          // A response cut short (FIN before content-length) is a lost response, not an answer.
          if (!res.complete) {
            reject(new TransportError('ETRUNCATED', 'response ended before its body was complete'));
            return;
          }
          const raw = Buffer.concat(chunks).toString('utf8');
          let body: unknown = raw;
          try {
            body = JSON.parse(raw);
          } catch {
            // not JSON: kept as text
          }
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            raw,
            body,
            ms: performance.now() - started,
          });
        });
      },
    );
    req.setTimeout(timeoutMs, () =>
      req.destroy(new TransportError('ETIMEDOUT', `no answer in ${timeoutMs} ms`)),
    );
    req.on('error', (err: NodeJS.ErrnoException) =>
      reject(err instanceof TransportError ? err : new TransportError(err.code ?? 'EUNKNOWN', err.message)),
    );
    req.end(data);
  });
}

/** The ledger endpoints over `send`, for one scope. */
export function ledger(baseUrl: () => string, scope = 'orders', timeoutMs?: number) {
  const op = (key: string, action = '') =>
    `/v1/scopes/${scope}/operations/${encodeURIComponent(key)}${action ? `/${action}` : ''}`;
  return {
    begin: (body: Record<string, unknown>) =>
      send(baseUrl(), 'POST', `/v1/scopes/${scope}/operations`, body, timeoutMs),
    get: (key: string) => send(baseUrl(), 'GET', op(key), undefined, timeoutMs),
    events: (key: string) => send(baseUrl(), 'GET', op(key, 'events'), undefined, timeoutMs),
    dispatch: (key: string, leaseId: string) =>
      send(baseUrl(), 'POST', op(key, 'dispatch'), { leaseId }, timeoutMs),
    heartbeat: (key: string, leaseId: string, leaseMs: number) =>
      send(baseUrl(), 'POST', op(key, 'heartbeat'), { leaseId, leaseMs }, timeoutMs),
    complete: (key: string, leaseId: string, status: 'succeeded' | 'failed', result: unknown) =>
      send(baseUrl(), 'POST', op(key, 'complete'), { leaseId, status, result }, timeoutMs),
    unknown: (key: string, leaseId: string) =>
      send(baseUrl(), 'POST', op(key, 'unknown'), { leaseId }, timeoutMs),
  };
}

export type Ledger = ReturnType<typeof ledger>;

/** A small seeded PRNG (mulberry32): a failing drill can be re-run with the seed it printed. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
