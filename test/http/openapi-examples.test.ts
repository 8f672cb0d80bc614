/**
 * The OpenAPI document tells the truth about what the service accepts (issue
 * 8): every request-body example in it (what Swagger UI sends when "Try it
 * out" is pressed) passes validation, every operation has an operationId,
 * problems are `application/problem+json`, and openapi.yaml is this document
 * (`npm run openapi:check` compares them byte for byte in CI).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/service.js';

// biome-ignore lint/suspicious/noExplicitAny: the document is walked as plain JSON
type Json = any;

let t: TestApp;
let doc: Json;
beforeAll(async () => {
  t = await createTestApp();
  doc = t.app.swagger();
});
afterAll(() => t.close());

const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

function operations(): { path: string; method: string; op: Json }[] {
  const out: { path: string; method: string; op: Json }[] = [];
  for (const [path, item] of Object.entries<Json>(doc.paths)) {
    for (const method of METHODS) if (item[method]) out.push({ path, method, op: item[method] });
  }
  return out;
}

function resolve(schema: Json): Json {
  const ref: string | undefined = schema?.$ref;
  return ref ? doc.components.schemas[ref.replace('#/components/schemas/', '')] : schema;
}

/** The path with a value for each parameter: its example, else what Swagger UI fills in ("string"). */
function fill(path: string, op: Json): string {
  return path.replace(/\{(\w+)\}/g, (_, name: string) => {
    const p = (op.parameters ?? []).find((x: Json) => x.in === 'path' && x.name === name);
    const example = p?.example ?? p?.schema?.examples?.[0];
    if (example !== undefined) return encodeURIComponent(String(example));
    return p?.schema?.format === 'uuid' ? '3fa85f64-5717-4562-b3fc-2c963f66afa6' : 'string';
  });
}

describe('openapi.yaml', () => {
  it('every operation has a unique operationId', () => {
    const ids = operations().map((o) => o.op.operationId);
    expect(
      ids.every((id) => typeof id === 'string' && id.length > 0),
      JSON.stringify(ids),
    ).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('every error answer is application/problem+json with the Problem schema', () => {
    for (const { path, method, op } of operations()) {
      for (const [status, response] of Object.entries<Json>(op.responses)) {
        if (Number(status) < 400) continue;
        expect(Object.keys(response.content ?? {}), `${method} ${path} ${status}`).toEqual([
          'application/problem+json',
        ]);
        expect(response.content['application/problem+json'].schema.$ref).toBe('#/components/schemas/Problem');
      }
    }
  });

  it('every /v1 operation documents 401, 429 and 503, and x-request-id on its answers', () => {
    for (const { path, method, op } of operations()) {
      if (!path.startsWith('/v1/')) continue;
      for (const s of ['401', '429', '503']) expect(op.responses[s], `${method} ${path} ${s}`).toBeDefined();
      for (const [status, response] of Object.entries<Json>(op.responses)) {
        expect(response.headers?.['x-request-id'], `${method} ${path} ${status}`).toBeDefined();
      }
      expect(op.responses['429'].headers['retry-after']).toBeDefined();
      expect(op.responses['503'].headers['retry-after']).toBeDefined();
    }
  });

  it('has servers, and named schemas (no def-N)', () => {
    expect(doc.servers?.length).toBeGreaterThan(0);
    const names = Object.keys(doc.components.schemas);
    expect(names).toEqual(expect.arrayContaining(['Operation', 'Problem', 'BeginBody', 'BeginResponse']));
    expect(names.filter((n) => /^def-\d+$/.test(n))).toEqual([]);
  });

  it('every request body has an example, and the service accepts each one (no 400)', async () => {
    let posted = 0;
    for (const { path, method, op } of operations()) {
      const media = op.requestBody?.content?.['application/json'];
      if (!media) continue;
      const schema = resolve(media.schema);
      const examples: unknown[] = [
        ...(media.example !== undefined ? [media.example] : []),
        ...(schema.examples ?? []),
      ];
      expect(examples.length, `${method} ${path} has no example`).toBeGreaterThan(0);
      for (const example of examples) {
        const url = fill(path, op);
        const r = await t.app.inject({
          method: method.toUpperCase() as 'POST',
          url,
          payload: example as object,
        });
        // A lease-holder example names no live lease: 404 or 409 is the honest answer, 400 is not.
        expect(r.statusCode, `${method} ${url} ${JSON.stringify(example)}: ${r.body}`).not.toBe(400);
        expect(r.statusCode, `${method} ${url}: ${r.body}`).toBeLessThan(500);
        posted++;
      }
    }
    expect(posted).toBeGreaterThanOrEqual(9);
  });

  it('the begin example is acquired as documented', async () => {
    const schema = resolve(
      doc.paths['/v1/scopes/{scope}/operations'].post.requestBody.content['application/json'].schema,
    );
    const r = await t.app.inject({
      method: 'POST',
      url: '/v1/scopes/examples/operations',
      payload: schema.examples[0],
    });
    expect(r.statusCode, r.body).toBe(201);
    expect(r.json().outcome).toBe('acquired');
  });
});
