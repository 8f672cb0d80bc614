/**
 * `canonicalJson` (`src/ledger/json-value.ts`) checks a value and writes its
 * RFC 8785 text in one walk. Every fingerprint and every stored request,
 * result and metadata is that text, so it must agree with the reference it
 * replaced, `checkJsonValue` and then the `canonicalize` package, on every
 * value: the same text byte for byte, or the same error (code, field and
 * message) where the reference refuses one. Values with `toJSON` (a `Date`
 * from a library caller) take the reference's own path and are checked too.
 */
import canonicalize from 'canonicalize';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LIMITS } from '../../src/contract/index.js';
import { IdemError } from '../../src/errors.js';
import { canonicalJson, checkJsonValue } from '../../src/ledger/json-value.js';

const MAX = 1 << 20;

/** What `canonicalJson` did before the one walk. */
function reference(value: unknown, field: string, maxBytes: number): string {
  checkJsonValue(value, field);
  const text = canonicalize(value);
  if (text === undefined) throw new Error('undefined');
  if (Buffer.byteLength(text, 'utf8') > maxBytes) throw new Error('too large');
  return text;
}

type Outcome = { text: string } | { error: string };

function outcome(f: () => string): Outcome {
  try {
    return { text: f() };
  } catch (err) {
    if (err instanceof IdemError) return { error: `${err.code} ${err.status} ${err.field} ${err.message}` };
    return { error: `other: ${(err as Error).message}` };
  }
}

function agrees(value: unknown) {
  expect(outcome(() => canonicalJson(value, 'request', MAX))).toEqual(
    outcome(() => reference(value, 'request', MAX)),
  );
}

/** Strings of any UTF-16 code units: NUL, lone surrogates, astral pairs, escapes. */
const text = fc.oneof(
  fc.string({ unit: 'grapheme' }),
  fc.string({ unit: 'binary' }),
  fc.constantFrom(
    '',
    '\u0000',
    '\ud800',
    'a\udc00b',
    '😀',
    '\u2028',
    '"\\/\b\f\n\r\t',
    '\u007f',
    'é',
    'e\u0301',
  ),
);
const number = fc.oneof(
  fc.double(),
  fc.integer(),
  fc.constantFrom(-0, 0, 1e21, 1e-7, 2 ** 53, 2 ** 53 - 1, -(2 ** 53), 5e-324, Number.MAX_VALUE, 0.1 + 0.2),
);

describe('canonicalJson', () => {
  it('writes what checkJsonValue and canonicalize wrote, or refuses as they did, for any value', () => {
    const { value } = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        fc.constantFrom(null, true, false, undefined),
        number,
        text,
        fc.array(tie('value'), { maxLength: 5 }),
        fc.dictionary(text, tie('value'), { maxKeys: 6 }),
      ),
    }));
    fc.assert(fc.property(value, agrees), { numRuns: 20_000 });
  });

  it('agrees on JSON.parse output (what every request body is)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => agrees(JSON.parse(JSON.stringify(v)))),
      { numRuns: 10_000 },
    );
  });

  it('sorts members by UTF-16 code units, not by code points or locale', () => {
    const v = { '\ud83d\ude00': 1, '\uffff': 2, b: 3, B: 4, '10': 5, '2': 6, é: 7 };
    expect(canonicalJson(v, 'request', MAX)).toBe(canonicalize(v));
    expect(canonicalJson(v, 'request', MAX)).toBe('{"10":5,"2":6,"B":4,"b":3,"é":7,"😀":1,"\uffff":2}');
  });

  it('refuses at the same depth and with the same first error', () => {
    let deep: unknown = 1;
    for (let i = 0; i < LIMITS.jsonDepth; i++) deep = [deep];
    agrees(deep);
    agrees([deep]);
    agrees({ a: [deep], b: 'x\u0000' });
    agrees({ b: 'x\u0000', a: [deep] });
    agrees({ a: Number.POSITIVE_INFINITY, b: '\ud800' });
    agrees(new Array(3).fill(1, 0, 1)); // [1, hole, hole]: holes read as undefined
    agrees({ a: () => 1 });
    agrees({ a: 10n });
    agrees({ a: Symbol('s') });
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    agrees(cycle);
  });

  it('takes the reference path for values with toJSON', () => {
    agrees({ at: new Date(0), n: 1 });
    agrees([new Date(Date.UTC(2026, 0, 1)), { toJSON: () => ({ b: 1, a: 2 }) }]);
    agrees({ bad: { toJSON: () => 'x\u0000' } });
    agrees({ toJSON: 1, a: 2 });
    agrees(new Map([['a', 1]]));
    agrees(new Uint8Array([3, 1, 2]));
  });

  it('refuses a text over the limit in canonical bytes', () => {
    expect(() => canonicalJson({ a: 'é'.repeat(10) }, 'request', 27)).toThrow(
      /is 28 bytes in canonical form/,
    );
    expect(canonicalJson({ a: 'é'.repeat(10) }, 'request', 28)).toBe(`{"a":"${'é'.repeat(10)}"}`);
  });
});
