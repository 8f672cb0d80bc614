/**
 * A scripted `fetch` for transport-level tests of the ledger client: every
 * request is recorded, every answer comes from the script in order.
 */

/** One scripted answer: a response, or a thrown transport error. */
export type Scripted =
  | { status: number; body?: unknown; headers?: Record<string, string>; raw?: string }
  | { throw: unknown };

/** A request as the fake saw it. */
export interface Seen {
  method: string;
  url: URL;
  body: unknown;
  headers: Headers;
}

/** Builds a fetch that answers from `script` and records what it was asked. */
export function scriptedFetch(script: Scripted[]): { fetch: typeof fetch; seen: Seen[] } {
  const seen: Seen[] = [];
  const fake = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = new URL(input instanceof Request ? input.url : input.toString());
    const text = typeof init?.body === 'string' ? init.body : undefined;
    seen.push({
      method: init?.method ?? 'GET',
      url,
      body: text === undefined ? undefined : JSON.parse(text),
      headers: new Headers(init?.headers),
    });
    const next = script.shift();
    if (!next) throw new Error(`unscripted request ${init?.method} ${url.pathname}`);
    if ('throw' in next) throw next.throw;
    const isProblem = next.status >= 400;
    const headers = new Headers(next.headers);
    if (!headers.has('content-type')) {
      headers.set('content-type', isProblem ? 'application/problem+json' : 'application/json');
    }
    return new Response(next.raw ?? JSON.stringify(next.body ?? {}), { status: next.status, headers });
  };
  return { fetch: fake as typeof fetch, seen };
}

/** A transport failure as undici reports it: `TypeError('fetch failed')` with a coded cause. */
export function fetchFailed(code: string): TypeError {
  const cause = Object.assign(new Error(code), { code });
  return new TypeError('fetch failed', { cause });
}

/** A minimal operation document in the contract's shape. */
export function operationDoc(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const now = new Date().toISOString();
  return {
    id: '00000000-0000-4000-8000-000000000001',
    scope: 'agents',
    key: 'k',
    fingerprint: `sha256:${'0'.repeat(64)}`,
    effect: 'read',
    status: 'in_progress',
    attempt: 1,
    lease: null,
    request: {},
    result: null,
    approval: null,
    metadata: {},
    resolution: null,
    createdAt: now,
    updatedAt: now,
    completedAt: null,
    retainedUntil: null,
    ...overrides,
  };
}
