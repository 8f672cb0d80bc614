/**
 * Authentication (Bearer API keys) and authorization (role, scope). Every
 * route names what it needs; nothing reads another scope's data unchecked.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { type KeyStore, OPEN_PRINCIPAL, type Principal, type Role, scopeAllowed } from '../auth/keys.js';
import { IdemError } from '../errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal;
  }
}

const PUBLIC_PATHS = new Set(['/healthz', '/readyz', '/metrics', '/openapi.json']);

export function registerAuth(app: FastifyInstance, keys: KeyStore): void {
  app.decorateRequest('principal', null as unknown as Principal);
  // Callback hooks, as every hook on the hot path (`app.ts`).
  app.addHook('onRequest', (request, _reply, done) => done(authenticate(keys, request)));
}

/** Sets the request's principal, or answers why not. */
function authenticate(keys: KeyStore, request: FastifyRequest): IdemError | undefined {
  const path = request.url.split('?')[0]!;
  if (PUBLIC_PATHS.has(path) || path === '/docs' || path.startsWith('/docs/')) return undefined;
  // The console's static page holds no data; its API calls carry the operator's key.
  if (path === '/console' || path.startsWith('/console/')) return undefined;
  if (keys.open) {
    request.principal = OPEN_PRINCIPAL;
    return undefined;
  }
  const header = request.headers.authorization;
  const m = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
  const principal = m ? keys.authenticate(m[1]!) : undefined;
  if (!principal)
    return new IdemError('UNAUTHENTICATED', 'a valid API key is required (Authorization: Bearer <secret>)');
  request.principal = principal;
  return undefined;
}

/**
 * A route's onRequest hook: 401/403 from the URL alone (the `scope` path
 * parameter, else the `scope` query member), before the body is read or
 * validated, so a caller without the right learns nothing about its body.
 */
export function access(role?: Role) {
  return (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    const scope =
      (request.params as { scope?: unknown }).scope ?? (request.query as { scope?: unknown } | null)?.scope;
    let refused: unknown;
    try {
      authorize(request, typeof scope === 'string' ? scope : undefined, role);
    } catch (err) {
      refused = err;
    }
    done(refused as Error | undefined);
  };
}

/** Throws 403 unless the caller may use `scope` (and has `role`, if given). */
export function authorize(request: FastifyRequest, scope: string | undefined, role?: Role): Principal {
  const p = request.principal;
  if (role === 'operator' && p.role !== 'operator') {
    throw new IdemError('SCOPE_FORBIDDEN', 'this endpoint needs an operator key');
  }
  if (scope !== undefined && !scopeAllowed(p.scopes, scope)) {
    throw new IdemError('SCOPE_FORBIDDEN', 'this key may not use this scope');
  }
  return p;
}
