/**
 * Ids of new operations and events: UUIDv7 (RFC 9562), a 48-bit Unix
 * millisecond time, then a 12-bit counter, then 62 random bits.
 *
 * Why not random (v4) ids: every new row puts its id into a B-tree
 * (`idem_operations_id_idx`, and `idem_events_pkey` by the operation's id).
 * A random id lands on a random leaf page, so once those indexes outgrow the
 * buffer cache each insert reads and later writes back a page of its own.
 * Time-ordered ids all land on the few right-most pages, which stay cached:
 * at 10 million operations, begin + complete in pgbench (the service's own
 * statements) kept 0.77 of its empty-ledger rate with random ids and 0.85
 * with ordered ones (`npm run bench`, S4, the runs of 16:06 and 19:11 on 2026-12-01).
 *
 * The time here is this process's clock, and it decides nothing: it only
 * orders ids. Every time the ledger compares or stores is the database's.
 * Within this process ids are strictly increasing: the counter orders ids of
 * one millisecond, and a clock that steps back keeps the last time.
 */
import { randomFillSync } from 'node:crypto';

const HEX: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/** Random bytes drawn in bulk: one `randomFillSync` per 409 ids. */
const POOL_SIZE = 4096;
const pool = Buffer.allocUnsafe(POOL_SIZE);
let at = POOL_SIZE;

let lastMs = -1;
let counter = 0;

/** 10 fresh random bytes: 2 seed the counter, 8 make the random tail (62 bits of them). */
function random10(): Buffer {
  if (at + 10 > POOL_SIZE) {
    randomFillSync(pool);
    at = 0;
  }
  const start = at;
  at += 10;
  return pool.subarray(start, start + 10);
}

/** A new UUIDv7, lower-case canonical text. */
export function newId(): string {
  const r = random10();
  let ms = Date.now();
  if (ms > lastMs) {
    lastMs = ms;
    // A random start in the lower half leaves room to count up within the millisecond.
    counter = ((r[0] as number) << 3) | ((r[1] as number) & 0x07);
  } else {
    ms = lastMs;
    counter++;
    if (counter > 0xfff) {
      // 4,096 ids in one millisecond: borrow the next one.
      ms = ++lastMs;
      counter = 0;
    }
  }
  const time = ms.toString(16).padStart(12, '0');
  return (
    `${time.slice(0, 8)}-${time.slice(8)}-7${(counter >> 8).toString(16)}${HEX[counter & 0xff]}-` +
    `${HEX[((r[2] as number) & 0x3f) | 0x80]}${HEX[r[3] as number]}-` +
    `${HEX[r[4] as number]}${HEX[r[5] as number]}${HEX[r[6] as number]}${HEX[r[7] as number]}` +
    `${HEX[r[8] as number]}${HEX[r[9] as number]}`
  );
}
