/**
 * Per-key rate limiting: a token bucket per API key name (per client address
 * in open mode), in this replica's memory. With N replicas behind a balancer
 * a key gets up to N times the rate; the limit protects the database from one
 * runaway client, it is not a billing meter.
 */
import type { FastifyInstance } from 'fastify';
import { IdemError } from '../errors.js';

interface Bucket {
  tokens: number;
  at: number;
}

const MAX_BUCKETS = 100_000;

export function registerRateLimit(app: FastifyInstance, perSecond: number, burst: number): void {
  if (perSecond <= 0) return;
  const capacity = burst > 0 ? burst : Math.max(1, 2 * perSecond);
  const buckets = new Map<string, Bucket>();
  // onRequest, after authentication and before the route's authorization and the body:
  // a limited client costs no parsing, and its refused calls count like the others.
  // A callback hook, as every hook on the hot path (`app.ts`).
  app.addHook('onRequest', (request, reply, done) => {
    if (!request.principal) {
      done(); // public endpoints
      return;
    }
    const id = request.principal.name === 'anonymous' ? `ip:${request.ip}` : `key:${request.principal.name}`;
    const now = performance.now();
    let b = buckets.get(id);
    if (!b) {
      if (buckets.size >= MAX_BUCKETS) buckets.clear();
      b = { tokens: capacity, at: now };
      buckets.set(id, b);
    }
    b.tokens = Math.min(capacity, b.tokens + ((now - b.at) / 1000) * perSecond);
    b.at = now;
    if (b.tokens >= 1) {
      b.tokens -= 1;
      done();
      return;
    }
    const wait = Math.max(1, Math.ceil((1 - b.tokens) / perSecond));
    reply.header('retry-after', String(wait));
    done(
      new IdemError('RATE_LIMITED', `rate limit of ${perSecond}/s (burst ${capacity}) exceeded`, {
        retryAfter: wait,
      }),
    );
  });
}
