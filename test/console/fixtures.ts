/**
 * The service the browser talks to (real HTTP on 127.0.0.1, a real database),
 * its API keys, and operations seeded through the public API.
 */
import { expect } from 'vitest';
import { type ApiKey, hashSecret, newSecret, type Role } from '../../src/auth/keys.js';
import { client } from '../support/http.js';
import { type RunningService, startService } from '../support/service.js';

/** Untrusted text as agents might send it: each would run if the console parsed it as HTML. */
export const XSS = {
  script: '<script>alert(document.domain)</script>',
  img: '<img src=x onerror=alert(document.domain)>',
};

export const SECRETS: Record<string, string> = {};
function key(name: string, role: Role, scopes: string[]): ApiKey {
  SECRETS[name] = newSecret();
  return { name, role, scopes, sha256: hashSecret(SECRETS[name]!) };
}

export const KEYS: ApiKey[] = [
  key('ops-alice', 'operator', ['*']),
  key('ops-bob', 'operator', ['*']),
  key('agent-7', 'client', ['orders']),
];

export async function startConsoleService(): Promise<RunningService> {
  return startService({ keys: KEYS });
}

export type Api = ReturnType<typeof client>;
export const as = (svc: RunningService, name: string, scope = 'orders'): Api =>
  client(svc.app, scope, SECRETS[name]);

/** An operation whose outcome nobody knows: begun, dispatched, then reported unknown. */
export async function seedUnknown(api: Api, k: string, extra: Record<string, unknown> = {}): Promise<void> {
  const r = await api.begin({
    key: k,
    request: { orderId: 'ORD-1' },
    effect: 'non_idempotent_write',
    ...extra,
  });
  expect(r.status).toBe(201);
  expect((await api.unknown(k, r.body.lease.id)).status).toBe(200);
}

/** An operation waiting for an operator's approval. */
export async function seedPending(api: Api, k: string, preview: string): Promise<void> {
  const r = await api.begin({
    key: k,
    request: { refund: 30 },
    effect: 'non_idempotent_write',
    requireApproval: true,
    metadata: { tool: 'refund', preview },
  });
  expect(r.status).toBe(202);
}
