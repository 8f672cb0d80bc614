/**
 * S10: what the `Idempotency-Key` middleware adds per request. One fastify
 * route that does nothing (201 + a small JSON body), served four ways in this
 * process and called one request at a time over loopback, each request with
 * a new key (begin, then complete: the middleware's whole cost):
 *
 *   bare        the route without the plugin (the reference)
 *   remote      idem/fastify + LedgerClient -> the ledger service process
 *   pg          idem/fastify + PgLedger on the bench database (autocommit statements)
 *   pg-tx       the same with `transactional: true` (BEGIN, begin, complete, COMMIT)
 *
 * The figure is the added median: p50(variant) - p50(bare), per round, then
 * the median over rounds. The order of the variants rotates each round.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import Fastify, { type FastifyInstance } from 'fastify';
import pg from 'pg';
import type { Bench, Row, ScenarioResult } from '../lib/bench.js';
import { spread, summarize } from '../lib/stats.js';

type Variant = 'bare' | 'remote' | 'pg' | 'pg-tx';
const VARIANTS: Variant[] = ['bare', 'remote', 'pg', 'pg-tx'];
const BODY = { title: 'printer on fire', body: 'third floor, next to the kitchen' };

async function app(variant: Variant, ledger: unknown): Promise<{ url: string; app: FastifyInstance }> {
  const a = Fastify({ logger: false });
  if (variant !== 'bare') {
    const { default: idempotency } = await import('../../src/downstream/fastify.js');
    await a.register(idempotency, { ledger: ledger as never, scope: 'bench-s10' });
  }
  a.post(
    '/tickets',
    {
      config: {
        idempotency: { required: true, effect: 'non_idempotent_write', transactional: variant === 'pg-tx' },
      },
    },
    async (_req, reply) =>
      reply
        .code(201)
        .header('location', '/tickets/T-1')
        .send({ id: 'T-1', ...BODY }),
  );
  await a.listen({ host: '127.0.0.1', port: 0 });
  return { url: `http://127.0.0.1:${(a.server.address() as AddressInfo).port}`, app: a };
}

/** Sequential requests for warm-up + window; latencies of the window. */
async function measure(b: Bench, url: string, run: number) {
  const latencies: number[] = [];
  let errors = 0;
  const from = performance.now() + b.cfg.warmupSeconds * 1000;
  const to = from + b.cfg.seconds * 1000;
  const prefix = `s10-${run}-${randomUUID().slice(0, 8)}`;
  for (let seq = 0; performance.now() < to; seq++) {
    const start = performance.now();
    const res = await fetch(`${url}/tickets`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': `${prefix}-${seq}` },
      body: JSON.stringify(BODY),
    });
    await res.arrayBuffer();
    const end = performance.now();
    if (res.status !== 201) errors++;
    else if (end >= from) latencies.push(end - start);
  }
  return { latency: summarize(latencies), perSecond: latencies.length / b.cfg.seconds, errors };
}

export async function runS10(b: Bench): Promise<ScenarioResult> {
  const { LedgerClient } = await import('../../src/client/index.js');
  const { PgLedger } = await import('../../src/pg/index.js');
  const svc = await b.startService(3);
  const pool = new pg.Pool({ connectionString: b.db.url, max: 3 });
  const apps: Partial<Record<Variant, { url: string; app: FastifyInstance }>> = {};
  try {
    const pgLedger = new PgLedger({ pool, actor: 'bench-s10' });
    const ledgers: Record<Variant, unknown> = {
      bare: undefined,
      remote: new LedgerClient({ baseUrl: svc.url }),
      pg: pgLedger,
      'pg-tx': pgLedger,
    };
    for (const v of VARIANTS) apps[v] = await app(v, ledgers[v]);

    const p50 = new Map<Variant, number[]>(VARIANTS.map((v) => [v, []]));
    const p99 = new Map<Variant, number[]>(VARIANTS.map((v) => [v, []]));
    const notes: string[] = [];
    for (let r = 0; r < b.cfg.runs; r++) {
      const order = VARIANTS.map((_, i) => VARIANTS[(i + r) % VARIANTS.length]!);
      for (const v of order) {
        await b.db.checkpoint();
        const m = await measure(b, apps[v]!.url, b.nextRun());
        p50.get(v)!.push(m.latency.p50);
        p99.get(v)!.push(m.latency.p99);
        if (m.errors) notes.push(`S10 ${v} run ${r + 1}: ${m.errors} requests were not 201`);
        b.log(
          `S10 run ${r + 1}/${b.cfg.runs} ${v}: p50 ${m.latency.p50.toFixed(2)} ms, ${m.perSecond.toFixed(0)}/s`,
        );
      }
    }
    const scenario = 'POST with a new Idempotency-Key, one at a time, loopback; route does nothing';
    const bare = p50.get('bare')!;
    const rows: Row[] = [
      { id: 'S10', scenario, figure: 'bare route p50', unit: 'ms', service: spread(bare) },
      ...VARIANTS.filter((v) => v !== 'bare').flatMap((v): Row[] => [
        {
          id: 'S10',
          scenario,
          figure: `${v}: p50 (reference: bare)`,
          unit: 'ms',
          service: spread(p50.get(v)!),
          reference: spread(bare),
          ratio: spread(p50.get(v)!.map((x, i) => x / bare[i]!)),
        },
        {
          id: 'S10',
          scenario,
          figure: `${v}: added median per request`,
          unit: 'ms',
          service: spread(p50.get(v)!.map((x, i) => x - bare[i]!)),
        },
        { id: 'S10', scenario, figure: `${v}: p99`, unit: 'ms', service: spread(p99.get(v)!) },
      ]),
    ];
    return { id: 'S10', rows, detail: { p50: Object.fromEntries(p50), p99: Object.fromEntries(p99) }, notes };
  } finally {
    await Promise.all(Object.values(apps).map((a) => a?.app.close()));
    await pool.end();
    await b.stopService(svc);
  }
}
