/**
 * S9: the embedded engine. The service without `DATABASE_URL`, its data in
 * a fresh `IDEM_DATA_DIR`, migrated on start; S1 and S2 at
 * `embeddedClients` (4) clients. The floors are the same as elsewhere (the
 * floor on Postgres, the HTTP floor) at the same client count, so the
 * ratios say what the embedded engine costs against the physical limit.
 * There is no same-SQL diagnostic: pgbench cannot reach the embedded engine.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import {
  type Bench,
  errorNotes,
  figureRows,
  type Row,
  type ScenarioResult,
  type Sides,
  sideCpuRows,
} from '../lib/bench.js';
import { floorCycleScript, floorReadScript } from '../lib/floor.js';
import { floorCycle, floorReplayCycle, sampleAnswers } from '../lib/http-floor.js';
import {
  beginCompleteCycle,
  beginPath,
  closeClients,
  holderPath,
  openClients,
  post,
  replayCycle,
} from '../lib/http-load.js';
import type { Service } from '../lib/service.js';
import { BEGIN_BODY, COMPLETE_BODY } from '../lib/statements.js';
import { httpRun, pgbenchCycles, pgbenchRun, prime } from './s1-cycle.js';
import { completeKeys, REPLAY_PREFIX } from './s2-replay.js';

/** S2's keys completed through the embedded service's API (pgbench cannot reach it). */
async function completeOverHttp(svc: Service, scope: string, keys: string[], clients: number): Promise<void> {
  const conns = openClients(svc.url, clients);
  let next = 0;
  try {
    await Promise.all(
      conns.map(async (c) => {
        for (let i = next++; i < keys.length; i = next++) {
          const key = keys[i]!;
          const leaseId = randomUUID();
          const a = await post(c, beginPath(scope), { ...BEGIN_BODY, key, leaseId });
          const z = await post(c, holderPath(scope, key, 'complete'), { ...COMPLETE_BODY, leaseId });
          if (a.status !== 201 || z.status !== 200)
            throw new Error(`S9 setup ${key}: HTTP ${a.status}/${z.status}`);
        }
      }),
    );
  } finally {
    await closeClients(conns);
  }
}

export async function runS9(b: Bench): Promise<ScenarioResult> {
  const clients = b.cfg.embeddedClients;
  const notes: string[] = [];
  const rows: Row[] = [];
  const dataDir = await mkdtemp(join(b.workDir, 'embedded-'));
  const keys = Array.from({ length: b.cfg.replayKeys }, (_, i) => `${REPLAY_PREFIX}${i}`);
  await completeKeys(b, keys.length); // the floor's point reads, on Postgres
  const t = Date.now();
  const svc = await b.startService(clients + 1, { IDEM_DATA_DIR: dataDir }, null);
  b.log(`S9: embedded service ready in ${Date.now() - t} ms (migrated on start)`);
  const detail: Record<string, Sides> = {};
  try {
    await prime(b, svc, clients, beginCompleteCycle(b.scope, 'prime9'));
    const answers = await sampleAnswers(svc.url, b.scope);
    let floor = await b.startHttpFloor(answers);
    try {
      detail.s1 = await b.sides(`S9 S1 ${clients} clients`, {
        service: (run) => httpRun(b, svc.url, svc.pid, clients, beginCompleteCycle(b.scope, `e1-${run}`)),
        floor: (run) =>
          pgbenchCycles(
            b,
            clients,
            `e1f-${run}`,
            floorCycleScript(b.scope, `e1f-${run}`, run),
            notes,
            'prepared',
          ),
        http: (run) => httpRun(b, floor.url, floor.pid, clients, floorCycle(b.scope, `e1h-${run}`)),
      });
    } finally {
      await b.stopHttpFloor(floor);
    }
    const s1 = `embedded engine: begin (new key) + complete, ${clients} clients`;
    // CPU: the service process only (the embedded engine runs inside it).
    rows.push(
      ...figureRows('S9', s1, 'cycles/s', detail.s1),
      ...sideCpuRows('S9', s1, 'cycle', detail.s1).slice(0, 1),
    );
    notes.push(...errorNotes('S9 S1, service', detail.s1.service));

    const f = Date.now();
    await completeOverHttp(svc, b.scope, keys, clients);
    b.log(`S9: ${keys.length} keys completed through the embedded service in ${Date.now() - f} ms`);
    floor = await b.startHttpFloor({ begin: answers.replay, complete: answers.replay });
    try {
      const cycle = replayCycle(b.scope, keys);
      detail.s2 = await b.sides(`S9 S2 ${clients} clients`, {
        service: () => httpRun(b, svc.url, svc.pid, clients, cycle),
        floor: (run) =>
          pgbenchRun(b, floorReadScript(b.scope, REPLAY_PREFIX, keys.length, run), clients, 'prepared'),
        http: () => httpRun(b, floor.url, floor.pid, clients, floorReplayCycle(b.scope, keys)),
      });
    } finally {
      await b.stopHttpFloor(floor);
    }
    const s2 = `embedded engine: begin on a completed key (replay), ${clients} clients; floor = point read`;
    rows.push(
      ...figureRows('S9', s2, 'requests/s', detail.s2),
      ...sideCpuRows('S9', s2, 'request', detail.s2).slice(0, 1),
    );
    notes.push(...errorNotes('S9 S2, service', detail.s2.service));
  } finally {
    await b.stopService(svc);
  }
  return { id: 'S9', rows, detail, notes };
}
