/**
 * Parsing and validating what the model proposed, before anything reaches the
 * ledger: an invalid call is refused here and leaves no trace there.
 */
import type { TSchema } from 'typebox';
import { Errors } from 'typebox/value';
import { canonicalJson } from './canonical.js';
import type { Json } from './tool.js';

/** Parsed arguments, or why they are unusable. */
export type ParsedArgs = { ok: true; value: Json } | { ok: false; message: string };

/**
 * Accepts the arguments as the model protocol delivers them: a JSON string
 * (most chat APIs) or an already parsed value. An empty string or nothing at
 * all means "no arguments".
 */
export function parseArguments(raw: unknown): ParsedArgs {
  let value: unknown = raw;
  if (typeof raw === 'string') {
    if (raw.trim() === '') return { ok: true, value: {} };
    try {
      value = JSON.parse(raw);
    } catch {
      return { ok: false, message: 'the arguments are not valid JSON' };
    }
  }
  if (value === undefined) return { ok: true, value: {} };
  try {
    // Round-trip through the canonical form: what cannot be stored as JSON
    // (functions, bigint, cycles) is refused instead of half-stored.
    return { ok: true, value: JSON.parse(canonicalJson(value)) as Json };
  } catch {
    return { ok: false, message: 'the arguments cannot be represented as JSON' };
  }
}

/**
 * A copy of `schema` in which every object schema that does not say
 * `additionalProperties` refuses unknown fields, so the model cannot smuggle
 * in fields the tool does not declare.
 */
export function strictSchema<S extends TSchema>(schema: S): S {
  return closeObjects(schema) as S;
}

function closeObjects(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(closeObjects);
  if (node === null || typeof node !== 'object') return node;
  const copy: Record<string, unknown> = { ...(node as Record<string, unknown>) };
  if (copy.properties && typeof copy.properties === 'object') {
    copy.properties = Object.fromEntries(
      Object.entries(copy.properties as Record<string, unknown>).map(([k, v]) => [k, closeObjects(v)]),
    );
  }
  for (const key of ['items', 'anyOf', 'oneOf', 'allOf']) {
    if (key in copy) copy[key] = closeObjects(copy[key]);
  }
  if (copy.type === 'object' && !('additionalProperties' in copy)) copy.additionalProperties = false;
  return copy;
}

/** Up to three readable validation errors, or an empty list when `value` fits. Values are never quoted. */
export function validationErrors(schema: TSchema, value: unknown): string[] {
  const errors = Errors(schema, value);
  // `additionalProperties: false` reports an unknown field twice; keep the entry that names it
  // (but never filter down to nothing: an empty list means "valid").
  const named = errors.filter((e) => e.keyword !== 'additionalProperties');
  return (named.length > 0 ? named : errors)
    .map((e) =>
      e.message === 'schema is false'
        ? `${e.instancePath} is not a known field`
        : `${e.instancePath || '/'} ${e.message}`,
    )
    .slice(0, 3);
}
