/**
 * Checks a client JSON value before it is fingerprinted or stored, so that
 * what reaches Postgres is always storable and what is hashed is exactly what
 * is stored. Rejected here, with the field named:
 * - integers beyond 2^53: JSON.parse has already rounded them, so two
 *   different amounts would share one fingerprint;
 * - NUL in strings and keys: `jsonb` cannot hold it;
 * - lone surrogates: not UTF-8, Postgres refuses them;
 * - nesting deeper than LIMITS.jsonDepth.
 */

import * as crypto from 'node:crypto';
import canonicalize from 'canonicalize';
import { LIMITS } from '../contract/index.js';
import { IdemError, invalid } from '../errors.js';

// The rules, each written once: both walks below (`checkJsonValue`, `checkedCanonical`) call them.

function checkString(s: string, field: string): void {
  if (s.includes('\u0000')) throw invalid(field, 'strings may not contain NUL (U+0000)');
  if (!s.isWellFormed()) throw invalid(field, 'strings may not contain lone surrogates');
}

function checkNumber(n: number, field: string): void {
  if (!Number.isFinite(n)) throw invalid(field, 'numbers must be finite');
  if (Number.isInteger(n) && !Number.isSafeInteger(n)) {
    throw invalid(field, 'integers beyond 2^53 lose precision; send them as strings');
  }
}

function checkDepth(depth: number, field: string): void {
  if (depth > LIMITS.jsonDepth) throw invalid(field, `nested deeper than ${LIMITS.jsonDepth} levels`);
}

export function checkJsonValue(value: unknown, field: string, depth = 0): void {
  checkDepth(depth, field);
  if (value === null || typeof value === 'boolean') return;
  if (typeof value === 'number') {
    checkNumber(value, field);
    return;
  }
  if (typeof value === 'string') {
    checkString(value, field);
    return;
  }
  if (Array.isArray(value)) {
    for (const v of value) checkJsonValue(v, field, depth + 1);
    return;
  }
  if (typeof value === 'object') {
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      checkString(k, field);
      checkJsonValue(v, field, depth + 1);
    }
    return;
  }
  throw invalid(field, 'not a JSON value');
}

/** Met an object with `toJSON` (a `Date` from a library caller): `canonicalJson` takes the general path. */
const HAS_TO_JSON = Symbol('toJSON');

/** A member's name and its canonical text, to be sorted by name. */
type Member = [name: string, text: string];
const byName = (a: Member, b: Member) => (a[0] < b[0] ? -1 : 1);

/**
 * `checkJsonValue` and RFC 8785 in one walk, for the values JSON.parse makes
 * (every request body): the same checks in the same order (members in their
 * own order, depth first), so the same first error, and the same text as the
 * `canonicalize` package (members sorted by UTF-16 code units, strings and
 * numbers as `JSON.stringify` writes them). The two walks, `canonicalize`'s set
 * of the objects it is inside and its second scan of every string took the
 * bench's request 3.4 µs against 1.9 in one walk, its result 1.0 against 0.65
 * (and 1.6% of the service's busy time under S8's load went to `canonicalize`
 * alone). Throws `HAS_TO_JSON` on an object with `toJSON`, which only a library
 * caller can pass.
 */
function checkedCanonical(value: unknown, field: string, depth: number): string {
  checkDepth(depth, field);
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      checkNumber(value, field);
      // Number-to-string is JSON.stringify's for every finite number, -0 included ("0").
      return String(value);
    case 'string':
      checkString(value, field);
      return JSON.stringify(value);
    case 'object': {
      if (typeof (value as { toJSON?: unknown }).toJSON === 'function') throw HAS_TO_JSON;
      if (Array.isArray(value)) {
        let out = '[';
        for (let i = 0; i < value.length; i++) {
          if (i > 0) out += ',';
          out += checkedCanonical(value[i], field, depth + 1);
        }
        return `${out}]`;
      }
      const o = value as Record<string, unknown>;
      const names = Object.keys(o);
      const members: Member[] = new Array(names.length);
      for (let i = 0; i < names.length; i++) {
        const name = names[i] as string;
        checkString(name, field);
        members[i] = [name, checkedCanonical(o[name], field, depth + 1)];
      }
      if (members.length > 1) members.sort(byName);
      let out = '{';
      for (let i = 0; i < members.length; i++) {
        const m = members[i] as Member;
        if (i > 0) out += ',';
        out += `${JSON.stringify(m[0])}:${m[1]}`;
      }
      return `${out}}`;
    }
    default:
      throw invalid(field, 'not a JSON value');
  }
}

/** Checks the value and its UTF-8 size; returns the RFC 8785 canonical text. */
export function canonicalJson(value: unknown, field: string, maxBytes: number): string {
  let text: string | undefined;
  try {
    text = checkedCanonical(value, field, 0);
  } catch (err) {
    if (err !== HAS_TO_JSON) throw err;
    // What an object's toJSON makes of it is canonicalize's to find out, as before the one walk.
    checkJsonValue(value, field);
    text = canonicalize(value);
  }
  if (text === undefined) throw invalid(field, 'not a JSON value');
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > maxBytes) {
    throw new IdemError(
      'PAYLOAD_TOO_LARGE',
      `${field} is ${bytes} bytes in canonical form; the limit is ${maxBytes}`,
      {
        field,
      },
    );
  }
  return text;
}

/**
 * SHA-256 of UTF-8 text, in hex: Node's one-shot `crypto.hash` (20.12 and
 * later; about 0.3 µs for a small request here against 0.8 through a `Hash`
 * object), else the `Hash` object.
 */
const sha256Hex: (text: string) => string =
  typeof crypto.hash === 'function'
    ? (text) => crypto.hash('sha256', text, 'hex')
    : (text) => crypto.createHash('sha256').update(text, 'utf8').digest('hex');

/** `sha256:<hex>` of the canonical text. */
export function fingerprintOf(canonical: string): string {
  return `sha256:${sha256Hex(canonical)}`;
}
