/**
 * Is the same-SQL diagnostic doing the service's work? One S1 cycle through
 * the HTTP service and one pgbench transaction of the same-SQL script, then
 * the two rows and their events are compared on everything that is not
 * per-key (ids, keys, times). A difference means the pgbench script no
 * longer runs what the service runs (e.g. a default changed in `begin.ts`):
 * the diagnostic would compare different work, so the report says so.
 *
 * The floor writes less by design (no lapse rules, its own event details),
 * so it is not compared column by column; its row and event sizes are
 * reported next to the service's, to show the payloads are the same size.
 */
import type { Bench } from './bench.js';
import { floorCycleScript } from './floor.js';
import { beginCompleteCycle, closeClients, openClients } from './http-load.js';
import { type PgbenchScript, runPgbench } from './pgbench.js';
import { cycleScript } from './scripts.js';

const SHAPE = `
  SELECT fingerprint, effect, status, attempt, version, lease_owner, lease_recovered, request, result,
    metadata, retention_ms, approval_state, approval_deadline IS NULL AS no_deadline,
    round(extract(epoch FROM lease_expires_at - created_at) * 1000) AS lease_ms,
    dispatched_at = created_at AS dispatched_at_begin,
    round(extract(epoch FROM retained_until - completed_at) * 1000) AS retained_ms,
    (SELECT json_agg(json_build_object('type', type, 'actor', actor, 'version', version,
       'attempt', attempt, 'detail', detail) ORDER BY version, type)
     FROM idem_events e WHERE e.scope = o.scope AND e.operation_id = o.id) AS events
  FROM idem_operations o WHERE scope = $1 AND split_part(key, '/', 2) = $2`;

export interface Parity {
  ok: boolean;
  differences: string[];
  /** How the S1 script's text had to be adapted for pgbench, if at all. */
  scriptNotes: string[];
  /** Bytes of the operation row and of its events, as stored: service, same SQL, floor. */
  sizes: string;
  service?: Record<string, unknown>;
  reference?: Record<string, unknown>;
}

export async function checkParity(b: Bench): Promise<Parity> {
  const svcTag = 'parity-svc';
  const pgbTag = 'parity-pgb';
  const svc = await b.startService(2);
  try {
    const [client] = openClients(svc.url, 1);
    await beginCompleteCycle(b.scope, svcTag)(client!, 0, 0);
    await closeClients([client!]);
  } finally {
    await b.stopService(svc);
  }
  const once = (script: PgbenchScript, mode: 'prepared' | 'extended') =>
    runPgbench({ url: b.db.url, script, clients: 1, mode, workDir: b.workDir, transactions: 1 });
  const script = cycleScript(b.scope, pgbTag, b.nextRun());
  await once(script, b.cfg.pgbenchMode);
  await once(floorCycleScript(b.scope, 'parity-flo', b.nextRun()), 'prepared');
  const [s] = await b.db.query<Record<string, unknown>>(SHAPE, [b.scope, svcTag]);
  const [r] = await b.db.query<Record<string, unknown>>(SHAPE, [b.scope, pgbTag]);
  const scriptNotes = script.notes;
  const sizes = await sizesOf(b, { service: svcTag, 'same SQL': pgbTag, floor: 'parity-flo' });
  if (!s || !r) {
    return { ok: false, differences: [`missing row: service ${!!s}, pgbench ${!!r}`], scriptNotes, sizes };
  }
  const differences = Object.keys(s)
    .filter((k) => JSON.stringify(s[k]) !== JSON.stringify(r[k]))
    .map((k) => `${k}: service ${JSON.stringify(s[k])} vs pgbench ${JSON.stringify(r[k])}`);
  return { ok: differences.length === 0, differences, scriptNotes, sizes, service: s, reference: r };
}

async function sizesOf(b: Bench, tags: Record<string, string>): Promise<string> {
  const out: string[] = [];
  for (const [side, tag] of Object.entries(tags)) {
    const [z] = await b.db.query<{ row: number; events: number; n: number }>(
      `SELECT pg_column_size(o.*)::int AS row,
         (SELECT sum(pg_column_size(e.*))::int FROM idem_events e WHERE e.scope = o.scope AND e.operation_id = o.id) AS events,
         (SELECT count(*)::int FROM idem_events e WHERE e.scope = o.scope AND e.operation_id = o.id) AS n
       FROM idem_operations o WHERE scope = $1 AND split_part(key, '/', 2) = $2`,
      [b.scope, tag],
    );
    out.push(z ? `${side} row ${z.row} B + ${z.n} events ${z.events} B` : `${side}: no row`);
  }
  return out.join('; ');
}
