/**
 * buildApp(): the whole HTTP service, never listening (tests use `inject`;
 * `server.ts` listens). Everything it needs is passed in.
 */

import { randomUUID } from 'node:crypto';
import type { ServerOptions } from 'node:http';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import Fastify, {
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
} from 'fastify';
import { Type } from 'typebox';
import { KeyStore } from '../auth/keys.js';
import { consolePlugin } from '../console/plugin.js';
import { LIMITS } from '../contract/index.js';
import type { Database } from '../db/database.js';
import { migrationsApplied } from '../db/migrate.js';
import { IdemError } from '../errors.js';
import { createMetrics, type Metrics } from '../metrics/metrics.js';
import type { Series } from '../metrics/series-histogram.js';
import { registerAuth } from './auth.js';
import { clientErrorHandler, requireHost } from './client-errors.js';
import { registerJsonBody } from './json-body.js';
import { openapiOptions, SHARED_SCHEMAS } from './openapi.js';
import { errorHandler, sendProblem, toIdemError } from './problem.js';
import { registerRateLimit } from './rate-limit.js';
import { answer, problemResponses } from './routes/common.js';
import { operationRoutes } from './routes/operations.js';
import { operatorRoutes } from './routes/operator.js';
import { buildSerializer } from './serializer.js';
import { registerValidation } from './validation.js';

export interface AppOptions {
  db: Database;
  keys?: KeyStore;
  logger?: FastifyServerOptions['loggerInstance'] | boolean;
  /** Exposed for the sweeper and tests. */
  metrics?: Metrics;
  rateLimit?: { perSecond: number; burst: number };
}

/** Paths of secrets and payloads that must never reach a log line. */
export const LOG_REDACT = [
  'req.headers.authorization',
  'req.headers.cookie',
  'leaseId',
  '*.leaseId',
  'lease.id',
  'request',
  'result',
  'body',
];

export const VERSION = '0.1.0';

const BEGIN_ROUTE = '/v1/scopes/:scope/operations';
const TRANSITION_ROUTE =
  /\/operations\/:key\/(dispatch|heartbeat|complete|release|unknown|approve|reject|resolve)$/;

/**
 * A route's latency series, kept once found (by method, then status: each a
 * handful), and the lease-holder or operator call it is, if any.
 */
interface RouteMetrics {
  call: string | undefined;
  byMethod: Map<string, Map<number, Series>>;
}

/** Node's own Host check answers with an empty body: the `requireHost` hook makes it instead. */
const NODE_HTTP: { http: ServerOptions } = { http: { requireHostHeader: false } };

export async function buildApp(opts: AppOptions): Promise<FastifyInstance> {
  const { db } = opts;
  const keys = opts.keys ?? new KeyStore();
  const metrics = opts.metrics ?? createMetrics(db);
  const loggerOpts =
    typeof opts.logger === 'object' ? { loggerInstance: opts.logger } : { logger: opts.logger ?? false };
  const app = Fastify({
    ...loggerOpts,
    bodyLimit: LIMITS.bodyBytes,
    // A 255-character key percent-encodes to at most 255 * 12 characters.
    routerOptions: { ignoreTrailingSlash: false, maxParamLength: 4096 },
    requestIdHeader: 'x-request-id',
    genReqId: () => randomUUID(),
    // One line per request, written when it is answered (the onResponse hook), instead of
    // fastify's two (one on arrival, one on the answer).
    disableRequestLogging: true,
    return503OnClosing: true,
    // Router-level failures (a bad percent-encoding, a parameter over maxParamLength)
    // never reach the error handler: answer them as problems too.
    frameworkErrors: (err: Error, request: FastifyRequest, reply: FastifyReply) => {
      const code = (err as { code?: string }).code;
      const detail =
        code === 'FST_ERR_MAX_PARAM_LENGTH'
          ? 'a path segment is too long (keys are at most 255 characters)'
          : 'malformed URL';
      return sendProblem(reply, new IdemError('INVALID_ARGUMENT', detail), request);
    },
    forceCloseConnections: 'idle',
    // Errors of Node's HTTP parser answer as problems too.
    clientErrorHandler,
    // The answers' serialiser: no validator run per nullable field, and every member of a map
    // written (`serializer.ts`).
    schemaController: { compilersFactory: { buildSerializer } },
    ...NODE_HTTP,
  } as FastifyServerOptions) as unknown as FastifyInstance;

  registerValidation(app);
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);
  registerJsonBody(app);
  app.setErrorHandler(errorHandler);
  app.addHook('onRequest', requireHost);
  app.setNotFoundHandler((request, reply) =>
    sendProblem(
      reply,
      new IdemError('NOT_FOUND', `no route ${request.method} ${request.url.split('?')[0]}`),
      request,
    ),
  );
  // The hooks every request runs take a callback, not a promise: an async hook costs a
  // promise and a turn of the microtask queue each, six of them a request.
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', request.id);
    done(null, payload);
  });
  // Every begin that ends in a problem (refused, unauthorized, database down, a bug) counts
  // under the code its reply carries; hooks throw too, so the route alone would miss some.
  app.addHook('onError', async (request, _reply, err) => {
    if (request.method === 'POST' && request.routeOptions.url === BEGIN_ROUTE) {
      metrics.beginOutcomes.inc({ outcome: toIdemError(err)?.code ?? 'INTERNAL' });
    }
  });
  const routes = new Map<string, RouteMetrics>();
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unknown';
    let r = routes.get(route);
    if (!r) {
      r = { call: TRANSITION_ROUTE.exec(route)?.[1], byMethod: new Map() };
      routes.set(route, r);
    }
    const { method } = request;
    const status = reply.statusCode;
    let byStatus = r.byMethod.get(method);
    if (!byStatus) {
      byStatus = new Map();
      r.byMethod.set(method, byStatus);
    }
    let series = byStatus.get(status);
    if (!series) {
      series = metrics.httpDuration.series({ method, route, status: String(status) });
      byStatus.set(status, series);
    }
    series.observe(reply.elapsedTime / 1000);
    if (r.call && status === 200) metrics.transitions.inc({ call: r.call });
    request.log.info({ req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed');
    done();
  });

  await app.register(swagger, openapiOptions(VERSION));
  await app.register(swaggerUi, { routePrefix: '/docs' });
  registerAuth(app, keys);
  if (opts.rateLimit) registerRateLimit(app, opts.rateLimit.perSecond, opts.rateLimit.burst);
  // Until the schema is known to be complete, the API answers 503 (a missing table is
  // no bug of the caller's); once seen complete, never asked again.
  let migrated = false;
  app.addHook('preHandler', (request, _reply, done) => {
    if (migrated || !request.routeOptions.url?.startsWith('/v1/')) {
      done();
      return;
    }
    migrationsApplied(db).then((applied) => {
      if (!applied) {
        done(new IdemError('UNAVAILABLE', 'migrations are not applied'));
        return;
      }
      migrated = true;
      done();
    }, done);
  });

  // Probes are public (no key): `security: []`. A malformed request (no Host) is 400 even here.
  const Status = Type.Object({ status: Type.String() });
  app.get(
    '/healthz',
    {
      schema: {
        operationId: 'healthz',
        tags: ['service'],
        summary: 'liveness',
        security: [],
        response: { 200: answer(Status, 'the process is up'), ...problemResponses([400]) },
      },
    },
    async () => ({ status: 'ok' }),
  );
  app.get(
    '/readyz',
    {
      schema: {
        operationId: 'readyz',
        tags: ['service'],
        summary: 'readiness: database reachable and migrations applied',
        security: [],
        response: { 200: answer(Status, 'ready to serve'), ...problemResponses([400, 503]) },
      },
    },
    async () => {
      if (!(await migrationsApplied(db))) throw new IdemError('UNAVAILABLE', 'migrations are not applied');
      return { status: 'ready' };
    },
  );
  app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
    reply.type(metrics.registry.contentType);
    return metrics.registry.metrics();
  });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  operationRoutes(app, { db, onBegin: (o) => metrics.beginOutcomes.inc({ outcome: o }) });
  operatorRoutes(app, db);
  await app.register(consolePlugin);
  return app;
}
