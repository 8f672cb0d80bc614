/**
 * S6: one `non_idempotent_write` tool call end to end through `ToolExecutor`
 * (approval not required, the tool itself free), one call at a time. The
 * reference is the same three ledger calls the executor makes (begin with
 * `dispatch: false`, dispatch, complete) sent bare with the same `fetch`, so
 * the difference is what the executor and `LedgerClient` add per call. The
 * time spent inside `fetch` is also subtracted from each executor call to
 * give the executor's own in-process time.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { pino } from 'pino';
import { Type } from 'typebox';
import { type Bench, errorNotes, pairedRows, type Row, type ScenarioResult } from '../lib/bench.js';
import type { MeasuredLoad } from '../lib/http-load.js';
import { REQUEST } from '../lib/statements.js';
import { spread, summarize } from '../lib/stats.js';

type ClientModule = typeof import('../../src/client/index.js');

interface ExecutorLoad extends MeasuredLoad {
  ownMs: ReturnType<typeof summarize>;
  ledgerCallsPerCall: number;
}

/** Sequential calls for warm-up + window; `call` answers the ms spent inside fetch. */
async function sequential(b: Bench, call: (seq: number) => Promise<number>) {
  const latencies: number[] = [];
  const own: number[] = [];
  const errors = new Map<string, number>();
  let errorCount = 0;
  const t0 = performance.now();
  const from = t0 + b.cfg.warmupSeconds * 1000;
  const to = from + b.cfg.seconds * 1000;
  let seq = 0;
  for (; performance.now() < to; seq++) {
    const start = performance.now();
    try {
      const inFetch = await call(seq);
      const end = performance.now();
      if (end >= from && end < to) {
        latencies.push(end - start);
        own.push(end - start - inFetch);
      }
    } catch (err) {
      errorCount++;
      const msg = (err as Error).message.slice(0, 200);
      errors.set(msg, (errors.get(msg) ?? 0) + 1);
    }
  }
  return {
    calls: seq,
    completed: latencies.length,
    seconds: b.cfg.seconds,
    perSecond: latencies.length / b.cfg.seconds,
    latency: summarize(latencies),
    ownMs: summarize(own),
    errors: errorCount,
    errorSamples: [...errors].slice(0, 5).map(([m, n]) => `${n}x ${m}`),
  };
}

export async function runS6(b: Bench): Promise<ScenarioResult> {
  let client: ClientModule;
  try {
    client = await import('../../src/client/index.js');
  } catch (err) {
    return skipped(`src/client could not be loaded: ${(err as Error).message.split('\n')[0]}`);
  }
  const { LedgerClient, ToolExecutor, defineTool } = client;

  const svc = await b.startService(3);
  try {
    let fetchMs = 0;
    let fetches = 0;
    const timedFetch: typeof fetch = async (input, init) => {
      const t = performance.now();
      fetches++;
      try {
        const res = await fetch(input, init);
        // The body is read by the caller; buffer it here so its time counts as transport.
        const body = await res.arrayBuffer();
        return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
      } finally {
        fetchMs += performance.now() - t;
      }
    };
    const tool = defineTool({
      name: 'refund_order',
      description: 'Refunds an order (a free stand-in: does nothing)',
      input: Type.Object({
        tool: Type.String(),
        orderId: Type.String(),
        amount: Type.Number(),
        currency: Type.String(),
      }),
      policy: { effect: 'non_idempotent_write', requiresApproval: false },
      run: async () => ({ ok: true }),
    });
    const executor = new ToolExecutor({
      ledger: new LedgerClient({ baseUrl: svc.url, fetch: timedFetch }),
      scope: b.scope,
      tools: [tool],
      logger: pino({ level: 'silent' }),
    });

    const executorRun = async (run: number): Promise<ExecutorLoad> => {
      const before = fetches;
      const m = await sequential(b, async (seq) => {
        const t = fetchMs;
        // Ten calls per session: a session's budget (100 attempts by default) is not the subject.
        const record = await executor.execute({
          sessionId: `bench-${run}-${Math.floor(seq / 10)}`,
          turnId: `t${seq % 10}`,
          toolCallId: `call-${seq}`,
          name: tool.name,
          arguments: REQUEST,
        });
        if (record.status !== 'succeeded') {
          throw new Error(`${record.status}: ${record.error?.code ?? ''} ${record.error?.message ?? ''}`);
        }
        return fetchMs - t;
      });
      return { ...m, ledgerCallsPerCall: m.calls ? (fetches - before) / m.calls : Number.NaN };
    };

    const bareRun = async (run: number): Promise<ExecutorLoad> => {
      const base = `${svc.url}/v1/scopes/${b.scope}/operations`;
      const send = async (url: string, body: unknown, status: number) => {
        const res = await timedFetch(url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/json, application/problem+json',
          },
          body: JSON.stringify(body),
        });
        const text = await res.text();
        if (res.status !== status) throw new Error(`HTTP ${res.status} ${text.slice(0, 160)}`);
      };
      const m = await sequential(b, async (seq) => {
        const t = fetchMs;
        const key = `bare-${run}/t1/call-${seq}`;
        const leaseId = randomUUID();
        const at = `${base}/${encodeURIComponent(key)}`;
        await send(
          base,
          {
            key,
            request: REQUEST,
            effect: 'non_idempotent_write',
            leaseMs: 30_000,
            dispatch: false,
            owner: 'bench',
            requireApproval: false,
            metadata: { tool: tool.name, sessionId: `bare-${run}`, turnId: 't1', toolCallId: `call-${seq}` },
            leaseId,
          },
          201,
        );
        await send(`${at}/dispatch`, { leaseId }, 200);
        await send(`${at}/complete`, { leaseId, status: 'succeeded', result: { ok: true } }, 200);
        return fetchMs - t;
      });
      return { ...m, ledgerCallsPerCall: 3 };
    };

    // One call first: a client that does not work yet is a skip, not a failure of the bench.
    const first = await executor
      .execute({
        sessionId: 'bench-0',
        turnId: 't1',
        toolCallId: 'call-0',
        name: tool.name,
        arguments: REQUEST,
      })
      .catch((err: Error) => ({ status: 'threw', error: { code: err.name, message: err.message } }));
    if (first.status !== 'succeeded') {
      return skipped(`ToolExecutor did not complete a call: ${first.status} ${JSON.stringify(first.error)}`);
    }
    const p = await b.paired('S6 executor', executorRun, bareRun);
    const scenario = 'one non_idempotent_write call through ToolExecutor, free tool, sequential';
    const [, p50, p99] = pairedRows('S6', scenario, 'calls/s', p);
    const rows: Row[] = [
      { ...p50!, figure: 'call p50 (reference: the 3 ledger calls sent bare)' },
      { ...p99!, figure: 'call p99 (reference: the 3 ledger calls sent bare)' },
      {
        id: 'S6',
        scenario,
        figure: 'overhead per call, p50 (executor - bare)',
        unit: 'ms',
        service: spread(p.service.map((s, i) => s.latency.p50 - p.reference[i]!.latency.p50)),
      },
      {
        id: 'S6',
        scenario,
        figure: 'in-process time per call (outside fetch), p50',
        unit: 'ms',
        service: spread(p.service.map((s) => s.ownMs.p50)),
        reference: spread(p.reference.map((s) => s.ownMs.p50)),
      },
      {
        id: 'S6',
        scenario,
        figure: 'in-process time per call (outside fetch), p99',
        unit: 'ms',
        service: spread(p.service.map((s) => s.ownMs.p99)),
        reference: spread(p.reference.map((s) => s.ownMs.p99)),
      },
      {
        id: 'S6',
        scenario,
        figure: 'ledger HTTP calls per tool call',
        unit: '',
        service: spread(p.service.map((s) => s.ledgerCallsPerCall)),
      },
    ];
    return { id: 'S6', rows, detail: p, notes: errorNotes('S6 executor', p.service) };
  } finally {
    await b.stopService(svc);
  }
}

function skipped(why: string): ScenarioResult {
  return {
    id: 'S6',
    rows: [{ id: 'S6', scenario: 'executor call end to end', figure: 'skipped', unit: '', text: why }],
    detail: { skipped: why },
    notes: [`S6 skipped: ${why}`],
  };
}
