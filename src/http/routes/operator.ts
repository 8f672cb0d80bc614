/**
 * Operator endpoints (approve, reject, resolve, stats) and the listing.
 * Approve, reject and resolve need an operator key: an agent must never
 * approve its own calls.
 */
import type { FastifyInstance } from 'fastify';
import type { Static } from 'typebox';
import { scopeAllowed } from '../../auth/keys.js';
import {
  ApproveBody,
  ListQuery,
  ListResponse,
  OperationResponse,
  RejectBody,
  ResolveBody,
  StatsResponse,
} from '../../contract/index.js';
import type { Database } from '../../db/database.js';
import * as operator from '../../ledger/operator.js';
import { listPage, openCounts } from '../../ledger/read.js';
import { access } from '../auth.js';
import { decodeCursor, encodeCursor } from '../cursor.js';
import { ref } from '../openapi.js';
import { answer, KeyParams, problems } from './common.js';

export function operatorRoutes(app: FastifyInstance, db: Database): void {
  const route = <B>(
    name: string,
    summary: string,
    body: typeof ApproveBody | typeof RejectBody | typeof ResolveBody,
    run: (t: operator.OperatorTarget, b: B) => Promise<unknown>,
  ) =>
    app.post<{ Params: KeyParams; Body: B }>(
      `/v1/scopes/:scope/operations/:key/${name}`,
      {
        // Operator role and scope from the URL, before the body is read: a client key is 403 whatever it sends.
        onRequest: access('operator'),
        schema: {
          operationId: name,
          summary,
          tags: ['operator'],
          params: KeyParams,
          body: ref(body),
          response: {
            200: answer(OperationResponse, 'the operation after the decision'),
            ...problems(400, 403, 404, 409, 413, 415),
          },
        },
      },
      async (request) => {
        return run(
          { scope: request.params.scope, key: request.params.key, actor: request.principal.name },
          request.body as B,
        );
      },
    );

  route<ApproveBody>('approve', 'pending_approval to ready (operator)', ApproveBody, (t, b) =>
    operator.approve(db, { ...t, ...b }),
  );
  route<RejectBody>('reject', 'pending_approval to rejected (operator)', RejectBody, (t, b) =>
    operator.reject(db, { ...t, ...b }),
  );
  route<ResolveBody>(
    'resolve',
    'outcome_unknown (or an expired in_progress) to succeeded, failed or ready (operator)',
    ResolveBody,
    (t, b) => operator.resolve(db, { ...t, ...b }),
  );

  app.get<{ Querystring: ListQuery }>(
    '/v1/operations',
    {
      onRequest: access(),
      schema: {
        operationId: 'listOperations',
        summary: "list operations in the caller's scopes, oldest first, keyset-paginated",
        tags: ['operations'],
        querystring: ListQuery,
        response: {
          200: answer(ListResponse, 'one page; nextCursor is null on the last'),
          ...problems(400, 403),
        },
      },
    },
    async (request) => {
      const q = request.query;
      const limit = q.limit ?? 100;
      const page = await listPage(db, {
        patterns: request.principal.scopes,
        scope: q.scope,
        status: q.status,
        effect: q.effect,
        createdBeforeMs: q.createdBefore === undefined ? undefined : Date.parse(q.createdBefore),
        after: q.cursor === undefined ? undefined : decodeCursor(q.cursor),
        limit,
      });
      return {
        items: page.items,
        nextCursor: page.next ? encodeCursor(page.next.createdUs, page.next.id) : null,
      };
    },
  );

  app.get(
    '/v1/stats',
    {
      onRequest: access('operator'),
      schema: {
        operationId: 'stats',
        summary: 'per scope: counts of open operations, age of the oldest outcome_unknown (operator)',
        tags: ['operator'],
        response: { 200: answer(StatsResponse, 'open operations per scope'), ...problems(403) },
      },
    },
    async (request) => {
      const p = request.principal;
      const rows = await openCounts(db, (s) => scopeAllowed(p.scopes, s));
      const byScope = new Map<string, Static<typeof StatsResponse>['scopes'][number]>();
      for (const r of rows) {
        const s = byScope.get(r.scope) ?? { scope: r.scope, counts: {}, oldestOutcomeUnknownAgeMs: null };
        s.counts[r.status] = r.n;
        if (r.status === 'outcome_unknown') s.oldestOutcomeUnknownAgeMs = Math.round(r.oldestMs ?? 0);
        byScope.set(r.scope, s);
      }
      return { scopes: [...byScope.values()] };
    },
  );
}
