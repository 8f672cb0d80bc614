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

function checkString(s: string, field: string): void {
  if (s.includes('\u0000')) throw invalid(field, 'strings may not contain NUL (U+0000)');
  if (!s.isWellFormed()) throw invalid(field, 'strings may not contain lone surrogates');
}

export function checkJsonValue(value: unknown, field: string, depth = 0): void {
  if (depth > LIMITS.jsonDepth) throw invalid(field, `nested deeper than ${LIMITS.jsonDepth} levels`);
  if (value === null || typeof value === 'boolean') return;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw invalid(field, 'numbers must be finite');
    if (Number.isInteger(value) && !Number.isSafeInteger(value)) {
      throw invalid(field, 'integers beyond 2^53 lose precision; send them as strings');
    }
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

/** Checks the value and its UTF-8 size; returns the RFC 8785 canonical text. */
export function canonicalJson(value: unknown, field: string, maxBytes: number): string {
  checkJsonValue(value, field);
  const text = canonicalize(value);
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
