/**
 * Canonical JSON (RFC 8785, the same scheme the ledger fingerprints with) and
 * the helpers that keep arguments out of logs and secrets out of the ledger.
 */
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import type { Json } from './tool.js';

/** RFC 8785 canonical form of a JSON value. Throws on values JSON cannot carry. */
export function canonicalJson(value: unknown): string {
  const text = canonicalize(value);
  if (text === undefined) throw new TypeError('the value has no JSON form');
  return text;
}

/** `sha256:<hex>` of the canonical JSON: equal to the ledger's fingerprint of the same request. */
export function inputHash(value: unknown): string {
  return `sha256:${createHash('sha256').update(canonicalJson(value), 'utf8').digest('hex')}`;
}

/** The placeholder that replaces a redacted value. */
export const REDACTED = '[REDACTED]';

/** A deep copy of `value` with each dot-separated path replaced by `"[REDACTED]"` where present. */
export function redactPaths(value: Json, paths: readonly string[]): Json {
  const copy = JSON.parse(JSON.stringify(value)) as Json;
  for (const path of paths) {
    const parts = path.split('.');
    let node: unknown = copy;
    for (let i = 0; i < parts.length - 1 && node !== null && typeof node === 'object'; i++) {
      node = (node as Record<string, unknown>)[parts[i] as string];
    }
    const last = parts[parts.length - 1] as string;
    if (node !== null && typeof node === 'object' && Object.hasOwn(node, last)) {
      (node as Record<string, unknown>)[last] = REDACTED;
    }
  }
  return copy;
}

// Credentials in URLs (scheme://user:secret@host) and bearer tokens: the
// usual ways a secret slips into an exception message.
const SECRET_PATTERNS: [RegExp, string][] = [
  [/([a-z][a-z0-9+.-]*:\/\/)[^/\s:@]+:[^/\s@]+@/gi, '$1[REDACTED]@'],
  [/(bearer\s+)[A-Za-z0-9._~+/=-]+/gi, '$1[REDACTED]'],
  [/((?:api[_-]?key|token|secret|password)\s*[=:]\s*)\S+/gi, '$1[REDACTED]'],
];

/**
 * A message fit for the model or a log: first line only (no stack), URL
 * credentials and bearer tokens removed, at most 500 characters.
 */
export function scrubMessage(message: string): string {
  let text = message.split('\n', 1)[0] ?? '';
  for (const [pattern, replacement] of SECRET_PATTERNS) text = text.replace(pattern, replacement);
  return text.length > 500 ? `${text.slice(0, 497)}...` : text;
}
