/**
 * S2: begin on an already completed key, answered by a replay of the stored
 * result. `replayKeys` keys are completed first; every side then picks one
 * at random per request, at `scenarioClients` clients. References: the HTTP
 * floor answering with the service's replay body (what the HTTP layer alone
 * can do: the target's reference), the floor's point read of the row, and
 * the same-SQL diagnostic (the service's begin statement on those keys).
 */
import {
  type Bench,
  errorNotes,
  figureRows,
  type Row,
  type ScenarioResult,
  sideCpuRows,
} from '../lib/bench.js';
import { floorReadScript } from '../lib/floor.js';
import { floorReplayCycle, sampleAnswers } from '../lib/http-floor.js';
import { replayCycle } from '../lib/http-load.js';
import { runPgbench } from '../lib/pgbench.js';
import { fillScript, replayScript } from '../lib/scripts.js';
import { httpRun, pgbenchRun, prime } from './s1-cycle.js';

export const REPLAY_PREFIX = 'replay/';

/**
 * Completes the keys with pgbench running S1's statements (the parity check
 * shows they write what the service writes): through HTTP this setup took
 * longer than the measurement on a busy 2-core machine.
 */
export async function completeKeys(b: Bench, count: number): Promise<void> {
  const done = () =>
    b.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM idem_operations WHERE scope = $1 AND starts_with(key, $2) AND status = 'succeeded'`,
      [b.scope, REPLAY_PREFIX],
    );
  if (((await done())[0]?.n ?? 0) >= count) return;
  const clients = 16;
  const perClient = Math.ceil(count / clients);
  await runPgbench({
    url: b.db.url,
    script: fillScript(b.scope, REPLAY_PREFIX, perClient, b.nextRun()),
    clients,
    mode: b.cfg.pgbenchMode,
    workDir: b.workDir,
    transactions: perClient,
  });
  const [made] = await done();
  if ((made?.n ?? 0) < count) throw new Error(`S2 setup: ${made?.n} of ${count} keys completed`);
}

export async function runS2(b: Bench): Promise<ScenarioResult> {
  const keys = Array.from({ length: b.cfg.replayKeys }, (_, i) => `${REPLAY_PREFIX}${i}`);
  const t = Date.now();
  await completeKeys(b, keys.length);
  b.log(`S2: ${keys.length} keys completed in ${Date.now() - t} ms`);
  const rows: Row[] = [];
  const notes: string[] = [];
  const clients = b.cfg.scenarioClients;
  const cycle = replayCycle(b.scope, keys);
  const svc = await b.startService(clients + 1);
  const answers = await sampleAnswers(svc.url, b.scope);
  const floor = await b.startHttpFloor({ begin: answers.replay, complete: answers.replay });
  notes.push(`S2 HTTP floor answer: ${answers.replay.length} B (the service's replay)`);
  const pgbench = async <T>(run: () => Promise<T>) => {
    await b.releaseServiceConnections();
    return run();
  };
  let p: Awaited<ReturnType<typeof b.sides>>;
  try {
    await prime(b, svc, clients, cycle);
    p = await b.sides(`S2 ${clients} clients`, {
      service: () => httpRun(b, svc.url, svc.pid, clients, cycle),
      floor: (run) =>
        pgbench(() =>
          pgbenchRun(b, floorReadScript(b.scope, REPLAY_PREFIX, keys.length, run), clients, 'prepared'),
        ),
      http: () => httpRun(b, floor.url, floor.pid, clients, floorReplayCycle(b.scope, keys)),
      sameSql: (run) =>
        pgbench(() => pgbenchRun(b, replayScript(b.scope, REPLAY_PREFIX, keys.length, run), clients)),
    });
  } finally {
    await b.stopService(svc);
    await b.stopHttpFloor(floor);
  }
  const scenario = `begin on a completed key (replay), ${clients} clients; floor = point read`;
  rows.push(...figureRows('S2', scenario, 'requests/s', p), ...sideCpuRows('S2', scenario, 'request', p));
  notes.push(...errorNotes(`S2 ${clients} clients, service`, p.service));
  return { id: 'S2', rows, detail: p, notes };
}
