/**
 * Schema validation. Bodies are validated strictly: no type coercion, no
 * silent removal of unknown fields (fastify's defaults), so a client can never
 * smuggle `status` or `attempt` in, and `"leaseMs": "5000"` is an error.
 * Query strings and path parameters are text, so they are coerced.
 */
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifyInstance } from 'fastify';

function makeAjv(coerce: boolean) {
  const ajv = new Ajv({
    coerceTypes: coerce,
    useDefaults: false,
    removeAdditional: false,
    allErrors: false,
    strict: false,
  });
  (addFormats as unknown as { default: (a: Ajv) => void }).default(ajv);
  return ajv;
}

export function registerValidation(app: FastifyInstance): void {
  const strict = makeAjv(false);
  const coercing = makeAjv(true);
  app.setValidatorCompiler(({ schema, httpPart }) =>
    (httpPart === 'body' ? strict : coercing).compile(schema as object),
  );
}
