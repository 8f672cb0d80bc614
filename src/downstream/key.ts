/**
 * The `Idempotency-Key` request header (draft-ietf-httpapi-idempotency-key-header-07):
 * an RFC 8941 sf-string (`"..."`, printable ASCII, `\"` and `\\` escapes), or,
 * as many clients send it, a bare token of printable characters (a UUID
 * unquoted). Either way the key is 1..255 characters. Two header lines, or a
 * list, are malformed: one request names one operation.
 */

/** What the header said. */
export type KeyParse = { ok: true; key: string } | { ok: false; reason: 'missing' | 'invalid' };

const MAX_KEY = 255;
/** Visible ASCII without the characters that delimit structured fields. */
const BARE = /^[\x21\x23-\x2B\x2D-\x7E]{1,255}$/;

function parseSfString(v: string): string | undefined {
  let out = '';
  for (let i = 1; i < v.length; i++) {
    const c = v[i] as string;
    if (c === '"') return i === v.length - 1 ? out : undefined;
    if (c === '\\') {
      const next = v[++i];
      if (next !== '"' && next !== '\\') return undefined;
      out += next;
      continue;
    }
    const code = c.charCodeAt(0);
    if (code < 0x20 || code > 0x7e) return undefined;
    out += c;
  }
  return undefined; // no closing quote
}

/** Parses the header value as node's HTTP parser hands it over. */
export function parseIdempotencyKey(header: string | string[] | undefined): KeyParse {
  if (header === undefined) return { ok: false, reason: 'missing' };
  if (Array.isArray(header)) return { ok: false, reason: header.length === 0 ? 'missing' : 'invalid' };
  const v = header.trim();
  if (v.startsWith('"')) {
    const key = parseSfString(v);
    if (key === undefined || key.length === 0 || key.length > MAX_KEY)
      return { ok: false, reason: 'invalid' };
    return { ok: true, key };
  }
  return BARE.test(v) ? { ok: true, key: v } : { ok: false, reason: 'invalid' };
}
