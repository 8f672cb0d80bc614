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
  OperationResponse,
} from '../../contract/index.js';
import type { Database } from '../../db/database.js';
import { IdemError } from '../../errors.js';
import { begin } from '../../ledger/begin.js';
import * as holder from '../../ledger/holder.js';
import { listEvents } from '../../ledger/sql/events.js';
import { readById, readByKey } from '../../ledger/sql/read.js';
import { toOperation } from '../../ledger/sql/view.js';
import { authorize } from '../auth.js';
import { toIdemError } from '../problem.js';
import { KeyParams, problems, ScopeParams } from './common.js';

const IdParams = Type.Object({ id: Type.String({ format: 'uuid' }) });

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
      schema: {
        summary: 'begin: register an operation or re-enter it',
        tags,
        params: ScopeParams,
        body: BeginBody,
        response: {
          200: BeginResponse,
          201: BeginResponse,
          202: BeginResponse,
          ...problems(400, 401, 403, 409, 413, 422, 503),
        },
      },
    },
    async (request, reply) => {
      const p = authorize(request, request.params.scope);
      try {
        const r = await begin(db, request.params.scope, request.body, p.name);
        deps.onBegin?.(r.body.outcome);
        if (r.replayed) reply.header('idempotent-replayed', 'true');
        if (r.retryAfter !== undefined) reply.header('retry-after', String(r.retryAfter));
        return reply.code(r.status).send(r.body);
      } catch (err) {
        // As the reply will say it: a database outage counts as UNAVAILABLE, a bug as INTERNAL.
        deps.onBegin?.(toIdemError(err)?.code ?? 'INTERNAL');
        throw err;
      }
    },
  );

  app.get<{ Params: KeyParams }>(
    '/v1/scopes/:scope/operations/:key',
    {
      schema: {
        summary: 'read an operation by scope and key (rule A applied)',
        tags,
        params: KeyParams,
        response: { 200: OperationResponse, ...problems(400, 401, 403, 404, 503) },
      },
    },
    async (request) => {
      authorize(request, request.params.scope);
      const row = await readByKey(db, request.params.scope, request.params.key);
      if (!row) throw new IdemError('NOT_FOUND', 'no such operation');
      return { operation: toOperation(row) };
    },
  );

  app.get<{ Params: Static<typeof IdParams> }>(
    '/v1/operations/:id',
    {
      schema: {
        summary: 'read an operation by id',
        tags,
        params: IdParams,
        response: { 200: OperationResponse, ...problems(400, 401, 404, 503) },
      },
    },
    async (request) => {
      const row = await readById(db, request.params.id);
      // Another tenant's operation is invisible: the same 404 as a missing one.
      if (!row || !canSee(request, row.scope)) throw new IdemError('NOT_FOUND', 'no such operation');
      return { operation: toOperation(row) };
    },
  );

  app.get<{ Params: KeyParams }>(
    '/v1/scopes/:scope/operations/:key/events',
    {
      schema: {
        summary: 'the append-only event log of an operation, oldest first',
        tags,
        params: KeyParams,
        response: { 200: EventsResponse, ...problems(400, 401, 403, 404, 503) },
      },
    },
    async (request) => {
      authorize(request, request.params.scope);
      const row = await readByKey(db, request.params.scope, request.params.key);
      if (!row) throw new IdemError('NOT_FOUND', 'no such operation');
      return { events: await listEvents(db, row.scope, row.id) };
    },
  );

  const holderRoute = <B extends { leaseId: string }>(
    name: string,
    summary: string,
    body: typeof LeaseBody | typeof HeartbeatBody | typeof CompleteBody,
    run: (t: holder.HolderTarget, body: B) => Promise<unknown>,
  ) =>
    app.post<{ Params: KeyParams; Body: B }>(
      `/v1/scopes/:scope/operations/:key/${name}`,
      {
        schema: {
          summary,
          tags: ['lease holder'],
          params: KeyParams,
          body,
          response: { 200: OperationResponse, ...problems(400, 401, 403, 404, 409, 413, 503) },
        },
      },
      async (request) => {
        const p = authorize(request, request.params.scope);
        const { scope, key } = request.params;
        const b = request.body as B;
        return run({ scope, key, leaseId: b.leaseId, actor: p.name }, b);
      },
    );

  holderRoute('dispatch', 'mark the side effect as started (needs a live lease)', LeaseBody, (t) =>
    holder.dispatch(db, t),
  );
  holderRoute<Static<typeof HeartbeatBody>>(
    'heartbeat',
    'extend the lease (needs a live lease)',
    HeartbeatBody,
    (t, b) => holder.heartbeat(db, b.leaseMs === undefined ? t : { ...t, leaseMs: b.leaseMs }),
  );
  holderRoute<Static<typeof CompleteBody>>('complete', 'store the outcome; terminal', CompleteBody, (t, b) =>
    holder.complete(db, { ...t, status: b.status, result: b.result }),
  );
  holderRoute('release', 'the effect did not happen: back to ready', LeaseBody, (t) => holder.release(db, t));
  holderRoute('unknown', 'the holder cannot tell whether the effect happened', LeaseBody, (t) =>
    holder.unknown(db, t),
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
