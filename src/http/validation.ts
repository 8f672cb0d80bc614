/**
 * Schema validation. Bodies are validated strictly: no type coercion, no
 * silent removal of unknown fields (fastify's defaults), so a client can never
 * smuggle `status` or `attempt` in, and `"leaseMs": "5000"` is an error.
 * Query strings and path parameters are text, so they are coerced.
 *
 * After the schema, every part passes the one value rule (`value-rule.ts`):
 * storable text, finite numbers.
 */
import { Ajv, type ErrorObject } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifyInstance } from 'fastify';
import { BODY_SCHEMAS } from './openapi.js';
import { findBadValue } from './value-rule.js';

/**
 * RFC 3339 date-times that JavaScript can also read: ajv-formats accepts a
 * leap second (`23:59:60Z`) and an hour-only offset (`+00`), which
 * `Date.parse` cannot read. Such a value is refused rather than guessed at.
 */
function readableDateTime(ajv: Ajv): void {
  const rfc3339 = ajv.formats['date-time'] as { validate: (s: string) => boolean } | undefined;
  if (!rfc3339) throw new Error('ajv-formats did not register date-time');
  ajv.addFormat('date-time', {
    type: 'string',
    validate: (s: string) => rfc3339.validate(s) && !Number.isNaN(Date.parse(s)),
  });
}

function makeAjv(coerce: boolean) {
  const ajv = new Ajv({
    coerceTypes: coerce,
    useDefaults: false,
    removeAdditional: false,
    allErrors: false,
    // Unknown keywords (`example`, `description` ...) are documentation ...
    strict: false,
    // ... but `strict: false` also lets Infinity and NaN through as numbers: not here.
    strictNumbers: true,
  });
  (addFormats as unknown as { default: (a: Ajv) => void }).default(ajv);
  readableDateTime(ajv);
  // The routes refer to their bodies by `$id` (so openapi.yaml names them).
  for (const schema of BODY_SCHEMAS) ajv.addSchema(schema);
  return ajv;
}

type Validator = ((data: unknown) => boolean) & { errors?: ErrorObject[] | null };

export function registerValidation(app: FastifyInstance): void {
  const strict = makeAjv(false);
  const coercing = makeAjv(true);
  app.setValidatorCompiler(({ schema, httpPart }) => {
    const schemaCheck = (httpPart === 'body' ? strict : coercing).compile(schema as object);
    const validate: Validator = (data) => {
      if (!schemaCheck(data)) {
        validate.errors = schemaCheck.errors ?? null;
        return false;
      }
      const bad = findBadValue(data);
      validate.errors = bad
        ? [
            {
              instancePath: bad.field ? `/${bad.field}` : '',
              schemaPath: '#/text',
              keyword: 'text',
              params: {},
              message: bad.reason,
            },
          ]
        : null;
      return !bad;
    };
    return validate;
  });
}
