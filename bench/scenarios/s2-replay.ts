/**
 * S2: begin on an already completed key, answered by a replay of the stored
 * result. `replayKeys` keys are completed first; every side then picks one
 * at random per request, at `scenarioClients` clients. References: the HTTP
 * floor answering with the service's replay body (what the HTTP layer alone
 * can do: the target's reference), the floor's point read of the row, and
 * the same-SQL diagnostic (the service's begin statement on those keys).
 * A second service with `IDEM_DB_COALESCE=0` runs the same replays with
 * every read alone: what folding concurrent reads is worth.
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
import type { Service } from '../lib/service.js';
import { spread } from '../lib/stats.js';
import { coalescingNote, httpRun, pgbenchRun, prime } from './s1-cycle.js';

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
  let alone: Service | undefined;
  try {
    await prime(b, svc, clients, cycle);
    // The same replays with every read sent alone: what folding the reads is worth.
    alone = await b.startService(clients + 1, { IDEM_DB_COALESCE: '0' });
    await prime(b, alone, clients, cycle);
    const aloneSvc = alone;
    p = await b.sides(`S2 ${clients} clients`, {
      service: () => httpRun(b, svc.url, svc.pid, clients, cycle),
      alone: () => httpRun(b, aloneSvc.url, aloneSvc.pid, clients, cycle),
      floor: (run) =>
        pgbench(() =>
          pgbenchRun(b, floorReadScript(b.scope, REPLAY_PREFIX, keys.length, run), clients, 'prepared'),
        ),
      http: () => httpRun(b, floor.url, floor.pid, clients, floorReplayCycle(b.scope, keys)),
      sameSql: (run) =>
        pgbench(() => pgbenchRun(b, replayScript(b.scope, REPLAY_PREFIX, keys.length, run), clients)),
    });
    const folded = await coalescingNote(svc.url, { idem_read_by_key: 'reads by key' });
    if (folded) notes.push(`S2 ${clients} clients: ${folded}`);
  } finally {
    await b.stopService(svc);
    if (alone) await b.stopService(alone);
    await b.stopHttpFloor(floor);
  }
  const scenario = `begin on a completed key (replay), ${clients} clients; floor = point read`;
  rows.push(...figureRows('S2', scenario, 'requests/s', p), ...sideCpuRows('S2', scenario, 'request', p));
  if (p.alone) {
    const off = `begin on a completed key (replay), ${clients} clients, coalescing off (IDEM_DB_COALESCE=0)`;
    const q = { service: p.alone, floor: p.floor, http: p.http, sameSql: p.sameSql };
    rows.push(...figureRows('S2', off, 'requests/s', q), ...sideCpuRows('S2', off, 'request', q));
    const gain = spread(p.service.map((m, i) => m.perSecond / p.alone![i]!.perSecond));
    notes.push(
      `S2 ${clients} clients: coalescing on / off (the default against IDEM_DB_COALESCE=0, same rounds), requests/s: ${gain.median.toFixed(2)} [${gain.min.toFixed(2)}–${gain.max.toFixed(2)}]`,
    );
    notes.push(...errorNotes(`S2 ${clients} clients, coalescing off`, p.alone));
  }
  notes.push(...errorNotes(`S2 ${clients} clients, service`, p.service));
  return { id: 'S2', rows, detail: p, notes };
}
