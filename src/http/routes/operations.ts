/**
 * The client and lease-holder endpoints of the ledger (contract section 2).
 * Each handler authorizes, calls one ledger function, and shapes the reply.
 */
import type { FastifyInstance } from 'fastify';
import { type Static, Type } from 'typebox';
import {
  BeginBody,
  BeginResponse,
  CompleteBody,
  EventsResponse,
  HeartbeatBody,
  LeaseBody,
  LeaseEndBody,
  LIMITS,
  OperationResponse,
  Uuid,
} from '../../contract/index.js';
import type { Database } from '../../db/database.js';
import { IdemError, invalid } from '../../errors.js';
import { begin } from '../../ledger/begin.js';
import * as holder from '../../ledger/holder.js';
import { eventsOf, getById, getByKey } from '../../ledger/read.js';
import { access, authorize } from '../auth.js';
import { ref } from '../openapi.js';
import { answer, HEADERS, KeyParams, problems, ScopeParams } from './common.js';

const IdParams = Type.Object({ id: Uuid });

/** Lease ids are compared as stored (lower case), whatever case the client wrote them in. */
const lower = (id: string) => id.toLowerCase();

/**
 * `t` with `extra`'s fields added, in place: `t` is the fresh target each
 * holder call builds. Not `{ ...t, ...extra }`: on this V8 a spread followed
 * by more properties costs microseconds a call (the object takes the slow path).
 */
function extend<T extends object, E extends object>(t: T, extra: E): T & E {
  return Object.assign(t, extra);
}

function reasonOf(b: LeaseEndBody): { reason?: string } {
  if (b.reason === undefined) return {};
  if (Buffer.byteLength(b.reason, 'utf8') > LIMITS.reasonBytes) {
    throw invalid('reason', `at most ${LIMITS.reasonBytes} bytes of UTF-8`);
  }
  return { reason: b.reason };
}

const tags = ['operations'];

export interface RouteDeps {
  db: Database;
  onBegin?: (outcome: string) => void;
}

export function operationRoutes(app: FastifyInstance, deps: RouteDeps): void {
  const { db } = deps;

  app.post<{ Params: Static<typeof ScopeParams>; Body: BeginBody }>(
    '/v1/scopes/:scope/operations',
    {
      onRequest: access(),
      schema: {
        operationId: 'begin',
        summary: 'begin: register an operation or re-enter it',
        tags,
        params: ScopeParams,
        body: ref(BeginBody),
        response: {
          200: answer(BeginResponse, 'replayed: the stored outcome (no lease)', HEADERS.replayed),
          201: answer(BeginResponse, 'acquired: a lease for the caller, who runs the effect'),
          202: answer(
            BeginResponse,
            'pending_approval: an operator must approve it first',
            HEADERS.retryAfter,
          ),
          ...problems(400, 403, 409, 413, 415, 422),
        },
      },
    },
    async (request, reply) => {
      const b = request.body;
      // The parsed body is this request's own: the lease id is normalised in place.
      if (b.leaseId !== undefined) b.leaseId = lower(b.leaseId);
      const r = await begin(db, request.params.scope, b, request.principal.name);
      // Refusals and failures are counted by the app's onError hook, under their code.
      deps.onBegin?.(r.body.outcome);
      if (r.replayed) reply.header('idempotent-replayed', 'true');
      if (r.retryAfter !== undefined) reply.header('retry-after', String(r.retryAfter));
      return reply.code(r.status).send(r.body);
    },
  );

  app.get<{ Params: KeyParams }>(
    '/v1/scopes/:scope/operations/:key',
    {
      onRequest: access(),
      schema: {
        operationId: 'getOperation',
        summary: 'read an operation by scope and key (rule A applied)',
        tags,
        params: KeyParams,
        response: { 200: answer(OperationResponse, 'the operation'), ...problems(400, 403, 404) },
      },
    },
    async (request) => {
      const operation = await getByKey(db, request.params.scope, request.params.key);
      if (!operation) throw new IdemError('NOT_FOUND', 'no such operation');
      return { operation };
    },
  );

  app.get<{ Params: Static<typeof IdParams> }>(
    '/v1/operations/:id',
    {
      schema: {
        operationId: 'getOperationById',
        summary: 'read an operation by id',
        tags,
        params: IdParams,
        response: { 200: answer(OperationResponse, 'the operation'), ...problems(400, 404) },
      },
    },
    async (request) => {
      const operation = await getById(db, request.params.id);
      // Another tenant's operation is invisible: the same 404 as a missing one.
      if (!operation || !canSee(request, operation.scope))
        throw new IdemError('NOT_FOUND', 'no such operation');
      return { operation };
    },
  );

  app.get<{ Params: KeyParams }>(
    '/v1/scopes/:scope/operations/:key/events',
    {
      onRequest: access(),
      schema: {
        operationId: 'listEvents',
        summary: 'the append-only event log of an operation, oldest first',
        tags,
        params: KeyParams,
        response: {
          200: answer(
            EventsResponse,
            'the events, oldest first: a new event lists after every older one, also when their `at` is equal',
          ),
          ...problems(400, 403, 404),
        },
      },
    },
    async (request) => {
      const events = await eventsOf(db, request.params.scope, request.params.key);
      if (!events) throw new IdemError('NOT_FOUND', 'no such operation');
      return { events };
    },
  );

  const holderRoute = <B extends { leaseId: string }>(
    name: string,
    operationId: string,
    summary: string,
    body: typeof LeaseBody | typeof LeaseEndBody | typeof HeartbeatBody | typeof CompleteBody,
    run: (t: holder.HolderTarget, body: B) => Promise<unknown>,
  ) =>
    app.post<{ Params: KeyParams; Body: B }>(
      `/v1/scopes/:scope/operations/:key/${name}`,
      {
        onRequest: access(),
        schema: {
          operationId,
          summary,
          tags: ['lease holder'],
          params: KeyParams,
          body: ref(body),
          response: {
            200: answer(OperationResponse, 'the operation after the call'),
            ...problems(400, 403, 404, 409, 413, 415),
          },
        },
      },
      async (request) => {
        const { scope, key } = request.params;
        const b = request.body as B;
        return run({ scope, key, leaseId: lower(b.leaseId), actor: request.principal.name }, b);
      },
    );

  holderRoute(
    'dispatch',
    'dispatch',
    'mark the side effect as started (needs a live lease)',
    LeaseBody,
    (t) => holder.dispatch(db, t),
  );
  holderRoute<Static<typeof HeartbeatBody>>(
    'heartbeat',
    'heartbeat',
    'extend the lease (needs a live lease)',
    HeartbeatBody,
    (t, b) => holder.heartbeat(db, b.leaseMs === undefined ? t : extend(t, { leaseMs: b.leaseMs })),
  );
  holderRoute<Static<typeof CompleteBody>>(
    'complete',
    'complete',
    'store the outcome; terminal',
    CompleteBody,
    (t, b) => holder.complete(db, extend(t, { status: b.status, result: b.result })),
  );
  // The reason rides along in the target; the ledger records it in the event's detail.
  holderRoute<LeaseEndBody>(
    'release',
    'release',
    'the effect did not happen: back to ready',
    LeaseEndBody,
    (t, b) => {
      const target = extend(t, reasonOf(b));
      return holder.release(db, target);
    },
  );
  holderRoute<LeaseEndBody>(
    'unknown',
    'markUnknown',
    'the holder cannot tell whether the effect happened',
    LeaseEndBody,
    (t, b) => {
      const target = extend(t, reasonOf(b));
      return holder.markUnknown(db, target);
    },
  );
}

function canSee(request: Parameters<typeof authorize>[0], scope: string): boolean {
  try {
    authorize(request, scope);
    return true;
  } catch {
    return false;
  }
}
