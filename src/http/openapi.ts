/**
 * The OpenAPI document's frame: what the route schemas cannot say. Components
 * are named by their TypeBox `$id` (`Operation`, `Problem`, `BeginBody` ...),
 * not `def-0`. `npm run openapi` writes it to openapi.yaml; CI lints that file.
 */
import type { SwaggerOptions } from '@fastify/swagger';
import type { TSchema } from 'typebox';
import {
  ApprovalView,
  ApproveBody,
  BeginBody,
  BeginResponse,
  CompleteBody,
  EventsResponse,
  HeartbeatBody,
  Lease,
  LeaseBody,
  LeaseEndBody,
  LeaseView,
  ListResponse,
  Operation,
  OperationEvent,
  OperationResponse,
  Problem,
  RejectBody,
  ResolutionView,
  ResolveBody,
  ScopeStats,
  StatsResponse,
} from '../contract/index.js';

/** Request bodies: shared with the validator, which resolves the routes' `$ref`s to them. */
export const BODY_SCHEMAS: TSchema[] = [
  BeginBody,
  LeaseBody,
  LeaseEndBody,
  HeartbeatBody,
  CompleteBody,
  ApproveBody,
  RejectBody,
  ResolveBody,
];

const NAMED: TSchema[] = [
  Problem,
  Operation,
  Lease,
  LeaseView,
  ApprovalView,
  ResolutionView,
  BeginResponse,
  OperationResponse,
  OperationEvent,
  EventsResponse,
  ListResponse,
  ScopeStats,
  StatsResponse,
  ...BODY_SCHEMAS,
];
const NAMES = new Set(NAMED.map((s) => idOf(s)));

function idOf(schema: unknown): string | undefined {
  const id = (schema as { $id?: unknown } | null)?.$id;
  return typeof id === 'string' ? id : undefined;
}

/**
 * A copy of `schema` whose nested named schemas are `$ref`s to their
 * components, so `Operation` is described once, not inside every response.
 * The contract itself keeps plain nesting: its types and the client need it.
 */
function withRefs(value: unknown, top = true): unknown {
  if (Array.isArray(value)) return value.map((v) => withRefs(v, false));
  if (value === null || typeof value !== 'object') return value;
  const id = idOf(value);
  if (!top && id && NAMES.has(id)) return { $ref: `${id}#` };
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withRefs(v, false)]));
}

/** Every schema with an `$id`, each one component of openapi.yaml: added to the app (`addSchema`). */
export const SHARED_SCHEMAS = NAMED.map((s) => withRefs(s) as TSchema);

/** A reference to a shared schema, by its `$id`. */
export function ref(schema: TSchema): { $ref: string } {
  const id = idOf(schema);
  if (!id) throw new Error('ref() needs a schema with an $id');
  return { $ref: `${id}#` };
}

export function openapiOptions(version: string): SwaggerOptions {
  return {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Idem ledger',
        version,
        description:
          'A Postgres ledger that makes retries safe. Errors are RFC 9457 application/problem+json ' +
          'with `code` and `retryable`. See README.md for the choices made where the contract is silent.',
        license: { name: 'MIT', identifier: 'MIT' },
      },
      // Relative: the document describes the service that serves it, wherever it runs.
      servers: [{ url: '/', description: 'the service serving this document' }],
      tags: [
        { name: 'operations', description: 'begin, read and list operations' },
        { name: 'lease holder', description: 'calls of the holder of a live lease' },
        { name: 'operator', description: 'decisions and overview; operator keys only' },
        { name: 'service', description: 'probes' },
      ],
      components: {
        securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      },
      security: [{ bearer: [] }],
    },
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) =>
        typeof json.$id === 'string' ? json.$id : `def-${i}`,
    },
  };
}
