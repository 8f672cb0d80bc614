/**
 * S2: begin on an already completed key, answered by a replay of the stored
 * result. `replayKeys` keys are completed first; both sides then pick one
 * at random per request, at `scenarioClients` clients.
 */
import { type Bench, cpuRows, errorNotes, pairedRows, type Row, type ScenarioResult } from '../lib/bench.js';
import { closedLoop, replayCycle } from '../lib/http-load.js';
import { runPgbench } from '../lib/pgbench.js';
import { fillScript, replayScript } from '../lib/scripts.js';
import { prime } from './s1-cycle.js';

const PREFIX = 'replay/';

/**
 * Completes the keys with pgbench running S1's statements (the parity check
 * shows they write what the service writes): through HTTP this setup took
 * longer than the measurement on a busy 2-core machine.
 */
async function completeKeys(b: Bench, count: number): Promise<void> {
  const clients = 16;
  const perClient = Math.ceil(count / clients);
  await runPgbench({
    url: b.db.url,
    script: fillScript(b.scope, PREFIX, perClient, b.nextRun()),
    clients,
    mode: b.cfg.pgbenchMode,
    workDir: b.workDir,
    transactions: perClient,
  });
  const [made] = await b.db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM idem_operations WHERE scope = $1 AND starts_with(key, $2) AND status = 'succeeded'`,
    [b.scope, PREFIX],
  );
  if ((made?.n ?? 0) < count) throw new Error(`S2 setup: ${made?.n} of ${count} keys completed`);
}

export async function runS2(b: Bench): Promise<ScenarioResult> {
  const keys = Array.from({ length: b.cfg.replayKeys }, (_, i) => `${PREFIX}${i}`);
  const t = Date.now();
  await completeKeys(b, keys.length);
  b.log(`S2: ${keys.length} keys completed in ${Date.now() - t} ms`);
  const rows: Row[] = [];
  const notes: string[] = [];
  const clients = b.cfg.scenarioClients;
  const cycle = replayCycle(b.scope, keys);
  const svc = await b.startService(clients + 1);
  let p: Awaited<ReturnType<typeof b.paired>>;
  try {
    await prime(b, svc, clients, cycle);
    p = await b.paired(
      `S2 ${clients} clients`,
      () =>
        closedLoop({
          url: svc.url,
          clients,
          warmupMs: b.cfg.warmupSeconds * 1000,
          measureMs: b.cfg.seconds * 1000,
          cycle,
          cpu: b.serviceCpu(svc.pid),
        }),
      async (run) => {
        await b.releaseServiceConnections();
        return runPgbench({
          url: b.db.url,
          script: replayScript(b.scope, PREFIX, keys.length, run),
          clients,
          mode: b.cfg.pgbenchMode,
          workDir: b.workDir,
          warmupSeconds: b.cfg.warmupSeconds,
          seconds: b.cfg.seconds,
          cpu: b.pgbenchCpu,
        });
      },
    );
  } finally {
    await b.stopService(svc);
  }
  const scenario = `begin on a completed key (replay), ${clients} clients`;
  rows.push(...pairedRows('S2', scenario, 'requests/s', p), ...cpuRows('S2', scenario, 'request', p));
  notes.push(...errorNotes(`S2 ${clients} clients, service`, p.service));
  return { id: 'S2', rows, detail: p, notes };
}
