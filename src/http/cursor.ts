/**
 * The list's keyset cursor: the last row's creation time in epoch
 * microseconds and its id, base64url-encoded. Opaque to clients; a cursor this
 * service did not issue is refused with 400 before it reaches SQL.
 */
import { UUID_PATTERN } from '../contract/index.js';
import { invalid } from '../errors.js';

const UUID = new RegExp(UUID_PATTERN);
/**
 * 16 digits of microseconds reach the year 2286: every row was created by
 * `now()`, so a longer number was never issued (and would overflow the
 * interval arithmetic of the keyset condition).
 */
const CURSOR = /^(\d{1,16})\.(.{36})$/;

/** The cursor for the row after `(createdUs, id)`. */
export function encodeCursor(createdUs: string, id: string): string {
  return Buffer.from(`${createdUs}.${id}`).toString('base64url');
}

/** The row position a cursor names; 400 INVALID_ARGUMENT (field `cursor`) for anything else. */
export function decodeCursor(cursor: string): { createdUs: string; id: string } {
  const m = CURSOR.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!m || !UUID.test(m[2]!)) throw invalid('cursor', 'not a cursor this service issued');
  return { createdUs: m[1]!, id: m[2]!.toLowerCase() };
}
