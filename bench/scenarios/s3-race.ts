/**
 * S3: `raceClients` concurrent begins on one new key, `raceRounds` times per
 * run. Every round must have exactly one winner (201); the others must see
 * the winner's live lease (409 OPERATION_IN_PROGRESS). Latency is per begin;
 * a round's duration is first send to last answer.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Client } from 'undici';
import type { Bench, Row, ScenarioResult } from '../lib/bench.js';
import { beginPath, closeClients, openClients, post } from '../lib/http-load.js';
import { BEGIN_BODY } from '../lib/statements.js';
import { spread, summarize } from '../lib/stats.js';

interface RaceRun {
  rounds: number;
  oneWinner: number;
  unexpected: string[];
  latency: ReturnType<typeof summarize>;
  roundMs: ReturnType<typeof summarize>;
}

async function race(b: Bench, clients: Client[], run: number, rounds: number): Promise<RaceRun> {
  const latencies: number[] = [];
  const roundMs: number[] = [];
  const unexpected: string[] = [];
  let oneWinner = 0;
  for (let round = 0; round < rounds; round++) {
    const key = `race/${run}/${round}`;
    const t0 = performance.now();
    const answers = await Promise.all(
      clients.map(async (c) => {
        const start = performance.now();
        const a = await post(c, beginPath(b.scope), { ...BEGIN_BODY, key, leaseId: randomUUID() });
        latencies.push(performance.now() - start);
        return a;
      }),
    );
    roundMs.push(performance.now() - t0);
    const winners = answers.filter((a) => a.status === 201).length;
    if (winners === 1) oneWinner++;
    for (const a of answers) {
      const ok = a.status === 201 || (a.status === 409 && a.text.includes('OPERATION_IN_PROGRESS'));
      if (!ok && unexpected.length < 5)
        unexpected.push(`round ${round}: HTTP ${a.status} ${a.text.slice(0, 120)}`);
    }
    if (winners !== 1 && unexpected.length < 5) unexpected.push(`round ${round}: ${winners} winners`);
  }
  return {
    rounds,
    oneWinner,
    unexpected,
    latency: summarize(latencies),
    roundMs: summarize(roundMs),
  };
}

export async function runS3(b: Bench): Promise<ScenarioResult> {
  const n = b.cfg.raceClients;
  const svc = await b.startService(n + 1);
  const clients = openClients(svc.url, n);
  const runs: RaceRun[] = [];
  // The rounds are spread over the runs: 50 rounds in 3 runs is 17 each.
  const perRun = Math.ceil(b.cfg.raceRounds / b.cfg.runs);
  try {
    // Connect every client (and warm the service) before the first race.
    await Promise.all(
      clients.map((c) => c.request({ method: 'GET', path: '/healthz' }).then((r) => r.body.dump())),
    );
    await race(b, clients, b.nextRun(), 3);
    for (let r = 0; r < b.cfg.runs; r++) {
      await b.db.checkpoint();
      const m = await race(b, clients, b.nextRun(), perRun);
      runs.push(m);
      b.log(
        `S3 run ${r + 1}/${b.cfg.runs}: ${m.oneWinner}/${m.rounds} rounds with one winner, begin p50 ${m.latency.p50.toFixed(1)} ms, p99 ${m.latency.p99.toFixed(1)} ms, round p50 ${m.roundMs.p50.toFixed(1)} ms`,
      );
    }
  } finally {
    await closeClients(clients);
    await b.stopService(svc);
  }
  const scenario = `${n} concurrent begins on one new key, ${perRun * b.cfg.runs} rounds`;
  const total = runs.reduce((a, r) => a + r.rounds, 0);
  const good = runs.reduce((a, r) => a + r.oneWinner, 0);
  const rows: Row[] = [
    { id: 'S3', scenario, figure: 'rounds with exactly one winner', unit: '', text: `${good}/${total}` },
    { id: 'S3', scenario, figure: 'begin p50', unit: 'ms', service: spread(runs.map((r) => r.latency.p50)) },
    { id: 'S3', scenario, figure: 'begin p99', unit: 'ms', service: spread(runs.map((r) => r.latency.p99)) },
    {
      id: 'S3',
      scenario,
      figure: 'round (first send to last answer) p50',
      unit: 'ms',
      service: spread(runs.map((r) => r.roundMs.p50)),
    },
  ];
  const notes = runs.flatMap((r) => r.unexpected);
  if (good !== total) notes.unshift(`S3: ${total - good} of ${total} rounds did not have exactly one winner`);
  return { id: 'S3', rows, detail: runs, notes };
}
