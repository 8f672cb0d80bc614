/**
 * The same-SQL diagnostic's pgbench scripts, built from the service's own
 * statements (`statements.ts`). Per-transaction values:
 *
 *   seq     = client_id * 10^9 + n      (n counts the client's transactions, from -D n=0)
 *   key     = <8 hex of md5(seq)>/<tag>/<seq>, scattered like the HTTP driver's keys
 *   id, eventId = time-ordered uuids (`orderedUuid`), as the service's ids are (UUIDv7)
 *   leaseId = <run>b<seq> as 32 hex digits; the complete uses the begin's own
 *             "leaseId" column, captured with \gset (which also checks one row came back)
 */
import { type PgbenchScript, ScriptBuilder } from './pgbench.js';
import { renderBegin, renderComplete, SENTINEL } from './statements.js';

/** A uuid made of the run number, a letter and a counter: unique per run and transaction. */
export const seqUuid = (letter: string, counter: string) =>
  `lpad(to_hex(:rn::bigint), 7, '0') || '${letter}' || lpad(to_hex(${counter}::bigint), 24, '0')`;

/**
 * A uuid ordered by the time `at` (an SQL timestamptz expression), laid out
 * like the service's UUIDv7 ids (`src/ledger/ids.ts`): 12 hex digits of Unix
 * milliseconds, a 7, then random hex. Rows written at about the same time get
 * ids on the same index pages, as the service's do.
 */
export const orderedUuid = (at: string) =>
  `(lpad(to_hex((extract(epoch FROM ${at}) * 1000)::bigint), 12, '0') || '7' || substr(md5(random()::text), 1, 19))::uuid`;

/** `<8 hex>/<tag>/<seq>`: spread over the key space like the HTTP driver's keys. */
export const SCATTERED_KEY = `substr(md5(:seq::text), 1, 8) || '/' || :kp::text || '/' || :seq::text`;

/** The counters every script starts with: `n` per client, `seq` unique over clients. */
export function counters(tag: string, run: number): ScriptBuilder {
  return new ScriptBuilder()
    .define('n', '0')
    .define('kp', tag)
    .define('rn', String(run))
    .meta('\\set n :n + 1')
    .meta('\\set seq :client_id * 1000000000 + :n');
}

const NEW_ID = orderedUuid('clock_timestamp()');

function beginThenComplete(b: ScriptBuilder, scope: string, key: string, lease: string): PgbenchScript {
  b.query(
    renderBegin(scope),
    new Map([
      [SENTINEL.key, key],
      [SENTINEL.newId, NEW_ID],
      [SENTINEL.eventId, NEW_ID],
      [SENTINEL.leaseId, seqUuid(lease, ':seq')],
    ]),
    'b_',
  );
  b.query(
    renderComplete(scope),
    new Map([
      [SENTINEL.key, key],
      [SENTINEL.eventId, NEW_ID],
      [SENTINEL.leaseId, ':b_leaseId'],
    ]),
  );
  return b.build();
}

/** S1: begin a new key, complete it with the lease the begin returned. */
export function cycleScript(scope: string, tag: string, run: number): PgbenchScript {
  return beginThenComplete(counters(tag, run), scope, SCATTERED_KEY, 'b');
}

/**
 * S2's setup: S1's two statements on keys `<prefix><i>`, i = client_id * perClient + n - 1,
 * so `pgbench -t perClient` completes keys 0 .. clients * perClient - 1.
 */
export function fillScript(scope: string, prefix: string, perClient: number, run: number): PgbenchScript {
  const b = counters(prefix, run).meta(`\\set i :client_id * ${perClient} + :n - 1`);
  return beginThenComplete(b, scope, ':kp::text || :i::text', 'f');
}

/** S2: begin on one of `keys` completed keys `<prefix><i>`: the read the service sends first for a key it has seen (a replay). */
export function replayScript(scope: string, prefix: string, keys: number, run: number): PgbenchScript {
  const b = counters(prefix, run).meta(`\\set i random(0, ${keys - 1})`);
  b.query(
    renderBegin(scope, true),
    new Map([
      [SENTINEL.key, ':kp::text || :i::text'],
      [SENTINEL.newId, NEW_ID],
      [SENTINEL.eventId, NEW_ID],
      [SENTINEL.leaseId, seqUuid('d', ':seq')],
    ]),
  );
  return b.build();
}
