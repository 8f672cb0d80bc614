/**
 * The answers' serialiser (`src/http/serializer.ts`) compiles the contract's
 * schemas rewritten: nullable fields as `nullable: true` instead of `anyOf`
 * with `null`, maps of any member names as `additionalProperties`. It must
 * write every answer the ledger can give whole, the same bytes as fastify's
 * own serialiser wherever that one loses nothing, and really be rid of the
 * `anyOf`s (else it would be the same serialiser and this test would prove
 * nothing). fastify's own left out every member whose name holds a line
 * terminator (`metadata: {"a\nb": 1}`), accepted and stored: the last test
 * holds the service to answering them.
 */
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import fastJsonStringify from 'fast-json-stringify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EFFECTS, STATUSES } from '../../src/contract/index.js';
import { ref, SHARED_SCHEMAS } from '../../src/http/openapi.js';
import { answerForm, buildSerializer } from '../../src/http/serializer.js';
import { client } from '../support/http.js';
import { createTestApp, type TestApp } from '../support/service.js';

const shared = Object.fromEntries(SHARED_SCHEMAS.map((s) => [(s as { $id: string }).$id, s]));
type Serialize = (value: unknown) => string;
const contractSerializer = (id: string): Serialize =>
  fastJsonStringify(ref(shared[id] as never) as never, { schema: shared as never }) as Serialize;
const ourSerializer = (id: string): Serialize =>
  buildSerializer(shared)({ schema: ref(shared[id] as never) }) as Serialize;

const iso = fc
  .integer({ min: Date.UTC(1970, 0, 1), max: Date.UTC(9999, 11, 31) })
  .map((ms) => new Date(ms).toISOString());
const text = fc.string({ unit: 'grapheme', maxLength: 20 });
const nullable = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: null });
const json = fc.jsonValue({ maxDepth: 3 });

const operation = fc.record({
  id: fc.uuid(),
  scope: text,
  key: text,
  fingerprint: fc.stringMatching(/^[0-9a-f]{64}$/),
  effect: fc.constantFrom(...EFFECTS),
  status: fc.constantFrom(...STATUSES),
  attempt: fc.nat(),
  lease: nullable(fc.record({ expiresAt: iso, owner: nullable(text), dispatchedAt: nullable(iso) })),
  request: json,
  result: json,
  approval: nullable(
    fc.record({
      state: fc.constantFrom('pending', 'approved', 'rejected', 'expired'),
      deadline: iso,
      decidedBy: nullable(text),
      decidedAt: nullable(iso),
      note: nullable(text),
    }),
  ),
  metadata: fc.dictionary(text, json, { maxKeys: 3 }),
  resolution: nullable(fc.record({ by: text, at: iso, note: text })),
  createdAt: iso,
  updatedAt: iso,
  completedAt: nullable(iso),
  retainedUntil: nullable(iso),
});
const lease = fc.record({ id: fc.uuid(), attempt: fc.integer({ min: 1 }), expiresAt: iso });

const answers: [string, fc.Arbitrary<unknown>][] = [
  [
    'BeginResponse',
    fc.record(
      {
        outcome: fc.constantFrom('acquired', 'pending_approval', 'replayed'),
        operation,
        lease,
        recovered: fc.boolean(),
      },
      { requiredKeys: ['outcome', 'operation'] },
    ),
  ],
  ['OperationResponse', fc.record({ operation, lease }, { requiredKeys: ['operation'] })],
  ['ListResponse', fc.record({ items: fc.array(operation, { maxLength: 3 }), nextCursor: nullable(text) })],
  [
    'StatsResponse',
    fc.record({
      scopes: fc.array(
        fc.record({
          scope: text,
          counts: fc.dictionary(text, fc.nat()),
          oldestOutcomeUnknownAgeMs: nullable(fc.nat()),
        }),
        { maxLength: 3 },
      ),
    }),
  ],
];

describe('the answers serialiser', () => {
  it.each(answers)(
    'writes a %s whole, byte for byte as fastify would where it loses nothing',
    (id, arbitrary) => {
      const contract = contractSerializer(id);
      const ours = ourSerializer(id);
      let compared = 0;
      fc.assert(
        fc.property(arbitrary, (value) => {
          const written = ours(value);
          const whole = JSON.parse(JSON.stringify(value));
          expect(JSON.parse(written)).toEqual(whole);
          const theirs = contract(value);
          if (isDeepStrictEqual(JSON.parse(theirs), whole)) {
            compared++;
            expect(written).toBe(theirs);
          }
        }),
        { numRuns: 300 },
      );
      expect(compared).toBeGreaterThan(100);
    },
  );

  it('writes member names with line terminators, which fastify left out', () => {
    const value = {
      scopes: [{ scope: 's', counts: { 'a\nb': 1, '\u2028': 2, c: 3 }, oldestOutcomeUnknownAgeMs: null }],
    };
    expect(JSON.parse(contractSerializer('StatsResponse')(value)).scopes[0].counts).toEqual({ c: 3 });
    expect(JSON.parse(ourSerializer('StatsResponse')(value))).toEqual(value);
  });

  it('has no anyOf and no any-name pattern left in any shared schema, and leaves the originals (openapi.yaml) as written', () => {
    const before = JSON.stringify(shared);
    const rewritten = JSON.stringify(Object.values(shared).map(answerForm));
    expect(before).toContain('"anyOf"');
    expect(rewritten).not.toContain('"anyOf"');
    expect(before).toContain('"patternProperties"');
    expect(rewritten).not.toContain('"patternProperties"');
    expect(JSON.stringify(shared)).toBe(before);
    expect(answerForm(shared.Operation)).toMatchObject({
      $id: 'Operation',
      properties: {
        lease: { $ref: 'LeaseView#', nullable: true },
        completedAt: { type: 'string', format: 'date-time', nullable: true },
      },
    });
    // The nullable copy of a named schema is not that schema: its `$id` goes.
    const named = { type: 'object', $id: 'N', properties: { a: { type: 'string' } } };
    expect(answerForm({ anyOf: [named, { type: 'null' }] })).toEqual({
      type: 'object',
      properties: { a: { type: 'string' } },
      nullable: true,
    });
  });

  it('leaves an anyOf alone unless it is one schema (or reference) or null', () => {
    const other = { anyOf: [{ type: 'string' }, { type: 'integer' }] };
    const three = { anyOf: [{ type: 'string' }, { type: 'integer' }, { type: 'null' }] };
    const nested = { anyOf: [{ anyOf: [{ type: 'string' }, { type: 'integer' }] }, { type: 'null' }] };
    const refWithMore = { anyOf: [{ $ref: 'X#', description: 'x' }, { type: 'null' }] };
    for (const s of [other, three, nested, refWithMore]) expect(answerForm(s)).toEqual(s);
    expect(answerForm({ description: 'd', anyOf: [{ type: 'null' }, { type: 'integer' }] })).toEqual({
      description: 'd',
      type: 'integer',
      nullable: true,
    });
  });
});

describe('the service', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('answers every metadata member it stored, whatever its name', async () => {
    const api = client(t.app);
    const metadata = { 'a\nb': 1, '\u2028x': 'y', 'line\r\nbreak': { 'in\nside': true }, plain: 2 };
    const key = `serializer/${Date.now()}`;
    const begun = await api.begin({ key, request: {}, metadata });
    expect(begun.status, begun.raw).toBe(201);
    expect(begun.body.operation.metadata).toEqual(metadata);
    const read = await api.get(key);
    expect(read.status, read.raw).toBe(200);
    expect(read.body.operation.metadata).toEqual(metadata);
  });
});
