/**
 * `idem/fastify`: the `Idempotency-Key` plugin. A thin adapter over the
 * shared core: preHandler asks the ledger (replay, refuse, or run), onSend
 * stores the serialized response before it goes out (for a transactional
 * route: complete + COMMIT), onError remembers a thrown error so a 5xx can
 * tell "not applied" from "may have happened".
 *
 *   await app.register(idempotency, { ledger, scope: (req) => req.user.tenantId });
 *   app.post('/tickets', { config: { idempotency: { required: true, effect: 'non_idempotent_write' } } }, h);
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type CoreRequest, IdempotencyCore, type Run } from './core.js';
import type { IdempotencyOptions, RequestIdempotency, RouteIdempotency } from './options.js';
import type { WireResponse } from './stored-response.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set while the handler runs under an idempotency lease. */
    idempotency?: RequestIdempotency;
  }
  interface FastifyContextConfig {
    /** This route's idempotency settings; `false` never intercepts it. */
    idempotency?: RouteIdempotency<FastifyRequest> | false;
  }
}

/** Options of the fastify plugin. */
export type FastifyIdempotencyOptions = IdempotencyOptions<FastifyRequest>;

const kRun = Symbol('idem.run');
const kError = Symbol('idem.error');
type Tracked = FastifyRequest & { [kRun]?: Run; [kError]?: unknown };

function send(reply: FastifyReply, r: WireResponse): FastifyReply {
  reply.code(r.status);
  for (const [name, value] of Object.entries(r.headers)) reply.header(name, value);
  return reply.send(r.body);
}

function asBuffer(payload: unknown): Buffer | undefined {
  if (payload === null || payload === undefined) return Buffer.alloc(0);
  if (typeof payload === 'string') return Buffer.from(payload, 'utf8');
  if (Buffer.isBuffer(payload)) return payload;
  if (payload instanceof Uint8Array) return Buffer.from(payload);
  return undefined; // a stream: its bytes cannot be stored
}

async function plugin(app: FastifyInstance, options: FastifyIdempotencyOptions): Promise<void> {
  const core = new IdempotencyCore<FastifyRequest>(options);
  if (!app.hasRequestDecorator('idempotency')) app.decorateRequest('idempotency', undefined);

  app.addHook('preHandler', async (request, reply) => {
    const route = request.routeOptions.url;
    const config = request.routeOptions.config?.idempotency;
    if (route === undefined || request.is404 || !core.intercepts(request.method, config)) return;
    const incoming: CoreRequest<FastifyRequest> = {
      req: request,
      method: request.method,
      route,
      keyHeader: request.headers['idempotency-key'],
      body: request.body,
      log: request.log,
    };
    const entry = await core.enter(incoming, config);
    if (entry.kind === 'pass') return;
    if (entry.kind === 'answer') return send(reply, entry.response);
    request.idempotency = entry.run.idempotency;
    (request as Tracked)[kRun] = entry.run;
  });

  app.addHook('onError', async (request, _reply, error) => {
    (request as Tracked)[kError] = error;
  });

  app.addHook('onSend', async (request, reply, payload) => {
    const t = request as Tracked;
    const run = t[kRun];
    if (!run) return payload;
    t[kRun] = undefined;
    const body = asBuffer(payload);
    if (!body) {
      request.log.warn(
        { idempotencyKey: run.idempotency.key },
        'idempotency: a streamed body cannot be stored',
      );
      await run.abandon(t[kError]);
      return payload;
    }
    const original: WireResponse = {
      status: reply.statusCode,
      headers: reply.getHeaders() as Record<string, string>,
      body,
    };
    const sent = await run.finish(original, t[kError]);
    if (sent === original) return payload;
    // The transaction did not commit: nothing of the handler's answer is true any more.
    for (const name of Object.keys(reply.getHeaders())) reply.removeHeader(name);
    reply.code(sent.status);
    for (const [name, value] of Object.entries(sent.headers)) reply.header(name, value);
    return sent.body;
  });

  // A reply that never reached onSend (hijacked, or the request ended first) must not hold its lease.
  app.addHook('onResponse', async (request) => {
    const t = request as Tracked;
    const run = t[kRun];
    if (!run) return;
    t[kRun] = undefined;
    await run.abandon(t[kError]);
  });
}

// fastify-plugin's two symbols: the hooks apply to the registering scope's routes, named in errors.
(plugin as unknown as Record<symbol, unknown>)[Symbol.for('skip-override')] = true;
(plugin as unknown as Record<symbol, unknown>)[Symbol.for('fastify.display-name')] = 'idem-idempotency';

/**
 * The fastify plugin. Register it before the routes it guards; routes opt
 * in or tune it with `config.idempotency`.
 */
export const idempotency = plugin;
export default plugin;

export type { IdempotencyOptions, RequestIdempotency, RouteIdempotency } from './options.js';
export { notApplied } from './options.js';
