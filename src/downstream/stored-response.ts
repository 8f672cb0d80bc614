/**
 * What the middleware stores as an operation's result, and replays: the
 * status, the body bytes (base64, so any content replays byte for byte) and
 * the allow-listed headers. `set-cookie` and hop-by-hop headers are never
 * stored, whatever a route asks for: a replay must not hand one client's
 * session to another, and hop-by-hop headers describe one connection.
 */

/** A response as sent on the wire. */
export interface WireResponse {
  status: number;
  /** Lower-case names. */
  headers: Record<string, string>;
  body: Buffer;
}

/** The stored form (the operation's `result`). Versioned so the format can change. */
export interface StoredResponse {
  v: 1;
  status: number;
  headers: Record<string, string>;
  /** base64 of the body bytes. */
  body: string;
}

/** Always stored when present. */
export const DEFAULT_STORED_HEADERS = ['content-type', 'location'] as const;

const NEVER_STORED = new Set([
  'set-cookie',
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  // Recomputed for every send; a stored one could contradict the replayed bytes.
  'content-length',
  'date',
]);

/** The headers of `all` that may be stored: the allow-list, minus what is never stored. */
export function storableHeaders(
  all: Record<string, string | number | string[] | undefined>,
  allow: readonly string[],
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of allow) {
    const n = name.toLowerCase();
    if (NEVER_STORED.has(n)) continue;
    const v = all[n];
    if (v === undefined) continue;
    out[n] = Array.isArray(v) ? v.join(', ') : String(v);
  }
  return out;
}

export function encodeResponse(r: WireResponse): StoredResponse {
  return { v: 1, status: r.status, headers: r.headers, body: r.body.toString('base64') };
}

/** The stored response, or undefined when the result is not one (e.g. an operator's resolution). */
export function decodeResponse(result: unknown): WireResponse | undefined {
  if (typeof result !== 'object' || result === null) return undefined;
  const r = result as Partial<StoredResponse>;
  if (r.v !== 1 || typeof r.status !== 'number' || typeof r.body !== 'string') return undefined;
  if (typeof r.headers !== 'object' || r.headers === null) return undefined;
  return { status: r.status, headers: { ...r.headers }, body: Buffer.from(r.body, 'base64') };
}

/** The stored body as JSON, for status pages that show "what was answered". */
export function storedJson(result: unknown): unknown {
  const r = decodeResponse(result);
  if (!r) return result;
  try {
    return JSON.parse(r.body.toString('utf8'));
  } catch {
    return r.body.toString('utf8');
  }
}
