/**
 * Is the reference doing the service's work? One S1 cycle through the HTTP
 * service and one pgbench transaction of the S1 script, then the two rows
 * and their events are compared on everything that is not per-key (ids,
 * keys, times). A difference means the pgbench script no longer runs what
 * the service runs (e.g. a default changed in `begin.ts`): the ratios would
 * compare different work, so the report says so.
 */
import type { Bench } from './bench.js';
import { beginCompleteCycle, closeClients, openClients } from './http-load.js';
import { runPgbench } from './pgbench.js';
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
  const script = cycleScript(b.scope, pgbTag, b.nextRun());
  await runPgbench({
    url: b.db.url,
    script,
    clients: 1,
    mode: b.cfg.pgbenchMode,
    workDir: b.workDir,
    transactions: 1,
  });
  const [s] = await b.db.query<Record<string, unknown>>(SHAPE, [b.scope, svcTag]);
  const [r] = await b.db.query<Record<string, unknown>>(SHAPE, [b.scope, pgbTag]);
  const scriptNotes = script.notes;
  if (!s || !r) {
    return { ok: false, differences: [`missing row: service ${!!s}, pgbench ${!!r}`], scriptNotes };
  }
  const differences = Object.keys(s)
    .filter((k) => JSON.stringify(s[k]) !== JSON.stringify(r[k]))
    .map((k) => `${k}: service ${JSON.stringify(s[k])} vs pgbench ${JSON.stringify(r[k])}`);
  return { ok: differences.length === 0, differences, scriptNotes, service: s, reference: r };
}
