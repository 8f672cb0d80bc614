/**
 * The pgbench scripts of the scenarios, built from the service's statements
 * (`statements.ts`). Per-transaction values:
 *
 *   seq     = client_id * 10^9 + n      (n counts the client's transactions, from -D n=0)
 *   key     = <8 hex of md5(seq)>/<tag>/<seq>, scattered like the HTTP driver's keys
 *   newId   = <run>a<seq> as 32 hex digits, leaseId = <run>b<seq>
 *   lease   = the begin's own "leaseId" column, captured with \gset
 */
import { type PgbenchScript, ScriptBuilder } from './pgbench.js';
import { renderBegin, renderComplete, SENTINEL } from './statements.js';

const id = (letter: string, counter: string) =>
  `lpad(to_hex(:rn::bigint), 7, '0') || '${letter}' || lpad(to_hex(${counter}::bigint), 24, '0')`;

/** S1: begin a new key, complete it with the lease the begin returned. */
export function cycleScript(scope: string, tag: string, run: number): PgbenchScript {
  const key = `substr(md5(:seq::text), 1, 8) || '/' || :kp::text || '/' || :seq::text`;
  const b = new ScriptBuilder().define('n', '0').define('kp', tag).define('rn', String(run));
  b.meta('\\set n :n + 1').meta('\\set seq :client_id * 1000000000 + :n');
  b.query(
    renderBegin(scope),
    new Map([
      [SENTINEL.key, key],
      [SENTINEL.newId, id('a', ':seq')],
      [SENTINEL.leaseId, id('b', ':seq')],
    ]),
    'b_',
  );
  b.query(
    renderComplete(scope),
    new Map([
      [SENTINEL.key, key],
      [SENTINEL.leaseId, ':b_leaseId'],
    ]),
  );
  return b.build();
}

/**
 * S2's setup: S1's two statements on keys `<prefix><i>`, i = client_id * perClient + n - 1,
 * so `pgbench -t perClient` completes keys 0 .. clients * perClient - 1.
 */
export function fillScript(scope: string, prefix: string, perClient: number, run: number): PgbenchScript {
  const key = ':kp::text || :i::text';
  const b = new ScriptBuilder().define('n', '0').define('kp', prefix).define('rn', String(run));
  b.meta('\\set n :n + 1')
    .meta('\\set seq :client_id * 1000000000 + :n')
    .meta(`\\set i :client_id * ${perClient} + :n - 1`);
  b.query(
    renderBegin(scope),
    new Map([
      [SENTINEL.key, key],
      [SENTINEL.newId, id('e', ':seq')],
      [SENTINEL.leaseId, id('f', ':seq')],
    ]),
    'b_',
  );
  b.query(
    renderComplete(scope),
    new Map([
      [SENTINEL.key, key],
      [SENTINEL.leaseId, ':b_leaseId'],
    ]),
  );
  return b.build();
}

/** S2: begin on one of `keys` completed keys `<prefix><i>`: the conflict arm reads it back (a replay). */
export function replayScript(scope: string, prefix: string, keys: number, run: number): PgbenchScript {
  const b = new ScriptBuilder().define('n', '0').define('kp', prefix).define('rn', String(run));
  b.meta('\\set n :n + 1')
    .meta('\\set seq :client_id * 1000000000 + :n')
    .meta(`\\set i random(0, ${keys - 1})`);
  b.query(
    renderBegin(scope),
    new Map([
      [SENTINEL.key, ':kp::text || :i::text'],
      [SENTINEL.newId, id('c', ':seq')],
      [SENTINEL.leaseId, id('d', ':seq')],
    ]),
  );
  return b.build();
}
