/**
 * The answers' serialiser: fastify's own (fast-json-stringify over the route
 * schemas), given the schemas rewritten in two places (`answerForm`). The
 * contract's schemas (and `openapi.yaml`, rendered from them) stay as they
 * are; only what the serialiser compiles differs.
 *
 * - A nullable field is `anyOf: [schema, {type: 'null'}]` in the contract,
 *   and fast-json-stringify serialises an `anyOf` by running each branch's
 *   schema through a validator until one matches: a timestamp's `date-time`
 *   format, a lease's whole object, for every nullable field of every answer.
 *   Rewritten as `nullable: true`, it writes `null` for null and the one
 *   schema's serialisation otherwise, the same bytes for every value.
 * - A map with any member names (`metadata`, an event's `detail`: TypeBox's
 *   `Record(String, ...)`) is `patternProperties: {'^.*$': ...}`, and
 *   fast-json-stringify writes only the members whose name that pattern
 *   matches: `.` matches no line terminator, so a metadata member named
 *   `"a\nb"`, accepted and stored, was left out of every answer. Rewritten as
 *   `additionalProperties`, every member is written.
 *
 * `test/http/serializer.test.ts` holds both against fastify's own serialiser.
 */
import fastJsonStringify, { type Options } from 'fast-json-stringify';

type Json = unknown;

const isObject = (v: Json): v is Record<string, Json> =>
  v !== null && typeof v === 'object' && !Array.isArray(v);

/** `{type: 'null'}` and nothing else. */
const isNull = (s: Json) => isObject(s) && s.type === 'null' && Object.keys(s).length === 1;

/** The one pattern TypeBox writes for a record keyed by any string. */
const ANY_NAME = '^.*$';

/**
 * `schema` as the serialiser compiles it; a copy, the original is left as it
 * is. `anyOf: [S, {type: 'null'}]` (either order) becomes `S` with `nullable:
 * true` when `S` is one typed schema (its `$id` dropped: the nullable copy is
 * not the schema of that name) or a bare reference (fast-json-stringify
 * merges `nullable` into its target); any other `anyOf` is left as written.
 * `patternProperties: {'^.*$': V}` alone becomes `additionalProperties: V`.
 */
export function answerForm(schema: Json): Json {
  if (Array.isArray(schema)) return schema.map(answerForm);
  if (!isObject(schema)) return schema;
  const out: Record<string, Json> = {};
  for (const [k, v] of Object.entries(schema)) out[k] = answerForm(v);
  return anyName(nullable(out));
}

function nullable(out: Record<string, Json>): Record<string, Json> {
  const branches = out.anyOf;
  if (!Array.isArray(branches) || branches.length !== 2) return out;
  const [a, b] = branches;
  const s = isNull(b) ? a : isNull(a) ? b : undefined;
  if (!isObject(s) || 'anyOf' in s || 'oneOf' in s || 'allOf' in s || 'nullable' in s) return out;
  const typed = typeof s.type === 'string' && s.type !== 'null';
  if (!(typed || (typeof s.$ref === 'string' && Object.keys(s).length === 1))) return out;
  const { anyOf: _, ...siblings } = out;
  const { $id: __, ...inner } = s;
  return { ...siblings, ...inner, nullable: true };
}

function anyName(out: Record<string, Json>): Record<string, Json> {
  const patterns = out.patternProperties;
  if (!isObject(patterns) || 'properties' in out || 'additionalProperties' in out) return out;
  const names = Object.keys(patterns);
  if (names.length !== 1 || names[0] !== ANY_NAME) return out;
  const { patternProperties: _, ...rest } = out;
  return { ...rest, additionalProperties: patterns[ANY_NAME] };
}

/**
 * fastify's `schemaController.compilersFactory.buildSerializer`: as fastify's
 * default (`@fastify/fast-json-stringify-compiler`), over `answerForm` of the
 * shared schemas and of each route's.
 */
export function buildSerializer(externalSchemas: Record<string, Json> | undefined, serializerOpts?: Options) {
  const shared = externalSchemas
    ? Object.fromEntries(Object.entries(externalSchemas).map(([id, s]) => [id, answerForm(s)]))
    : undefined;
  return ({ schema }: { schema: Json }) => {
    const own = answerForm(schema) as Record<string, Json>;
    let schemas = shared;
    // As the default compiler: a route schema that is itself a shared one is not passed twice.
    if (shared && typeof own.$id === 'string' && own.$id in shared) {
      const { [own.$id]: _, ...rest } = shared;
      schemas = rest;
    }
    return fastJsonStringify(own as unknown as Parameters<typeof fastJsonStringify>[0], {
      ...serializerOpts,
      schema: schemas as Options['schema'],
    });
  };
}
