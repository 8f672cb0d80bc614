/**
 * The open-loop driver (S8): arrivals at a fixed mean rate, spaced as a
 * Poisson process (exponential gaps) like `pgbench -R`, so the service and
 * the floor see the same kind of arrivals. Each is sent on a free
 * keep-alive connection (one undici `Client` each, opened as needed up to a
 * cap), and each latency measured from the arrival's SCHEDULED time, not
 * from when it could be sent (Node's timers have a 1 ms grain, so an arrival
 * due within 1 ms goes out at once; one sent before its schedule counts from
 * when it was sent). A slow answer therefore cannot hide the
 * arrivals that queued behind it (no coordinated omission): their wait is
 * in their latency. Starts later than `LATE_MS` after their schedule (the
 * driver itself, or no free connection) are counted, so a driver that could
 * not keep up is visible in the report.
 */
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep, setImmediate as yieldToIo } from 'node:timers/promises';
import type { Client } from 'undici';
import type { CpuWindow } from './cpu.js';
import { type Cycle, closeClients, type MeasuredLoad, openClients } from './http-load.js';
import { type LatencySummary, summarize } from './stats.js';

/** A start this much after its schedule counts as late. */
export const LATE_MS = 5;

export interface OpenLoopOptions {
  url: string;
  /** Arrivals per second. */
  rate: number;
  warmupMs: number;
  measureMs: number;
  maxConnections: number;
  cycle: Cycle;
  cpu?: CpuWindow;
}

export interface OpenLoopResult extends MeasuredLoad {
  /** Arrivals scheduled inside the window. */
  scheduled: number;
  /** Of those, started more than `LATE_MS` after their schedule. */
  lateStarts: number;
  /** How late arrivals started (scheduled -> sent), ms. */
  startLag: LatencySummary;
  /** Connections the driver opened. */
  connections: number;
}

export async function openLoop(o: OpenLoopOptions): Promise<OpenLoopResult> {
  const all: Client[] = [];
  const idle: Client[] = [];
  const waiting: Array<(c: Client) => void> = [];
  const acquire = (): Promise<Client> => {
    const c = idle.pop();
    if (c) return Promise.resolve(c);
    if (all.length < o.maxConnections) {
      const [fresh] = openClients(o.url, 1);
      all.push(fresh!);
      return Promise.resolve(fresh!);
    }
    return new Promise((resolve) => waiting.push(resolve));
  };
  const release = (c: Client) => {
    const w = waiting.shift();
    if (w) w(c);
    else idle.push(c);
  };

  const interval = 1000 / o.rate;
  const t0 = performance.now() + 20;
  let next = t0;
  const from = t0 + o.warmupMs;
  const to = from + o.measureMs;
  const latencies: number[] = [];
  const lags: number[] = [];
  const errors = new Map<string, number>();
  let errorCount = 0;
  let lateStarts = 0;
  let scheduledInWindow = 0;
  const inFlight = new Set<Promise<void>>();
  const opening = setTimeout(() => o.cpu?.open(), from - performance.now());
  const closing = setTimeout(() => o.cpu?.close(), to - performance.now());

  const arrive = async (scheduled: number, seq: number) => {
    const counted = scheduled >= from && scheduled < to;
    if (counted) scheduledInWindow++;
    const client = await acquire();
    const started = performance.now();
    try {
      await o.cycle(client, 0, seq);
      if (!counted) return;
      // An arrival due within the timers' 1 ms grain goes out at once, up to
      // 1 ms early: its latency then counts from when it was sent, never from
      // a schedule it beat (that would shave up to 1 ms off the answer's own time).
      latencies.push(performance.now() - Math.min(scheduled, started));
      lags.push(started - scheduled);
      if (started - scheduled > LATE_MS) lateStarts++;
    } catch (err) {
      if (!counted) return;
      errorCount++;
      const msg = (err as Error).message.slice(0, 200);
      errors.set(msg, (errors.get(msg) ?? 0) + 1);
    } finally {
      release(client);
    }
  };

  try {
    for (let seq = 0; ; seq++) {
      const scheduled = next;
      if (scheduled >= to) {
        o.cpu?.close();
        break;
      }
      next += -Math.log(1 - Math.random()) * interval;
      const wait = scheduled - performance.now();
      // Behind schedule: send at once, but let answers in between sends.
      if (wait > 1) await sleep(wait - 0.5);
      else await yieldToIo();
      const p = arrive(scheduled, seq);
      inFlight.add(p);
      void p.finally(() => inFlight.delete(p));
    }
    // The window's last arrivals still count; a stuck one gives up after 30 s.
    await Promise.race([Promise.all(inFlight), sleep(30_000)]);
  } finally {
    clearTimeout(opening);
    clearTimeout(closing);
    await closeClients(all);
  }
  const seconds = o.measureMs / 1000;
  return {
    completed: latencies.length,
    seconds,
    perSecond: latencies.length / seconds,
    latency: summarize(latencies),
    errors: errorCount,
    errorSamples: [...errors].slice(0, 5).map(([m, n]) => `${n}x ${m}`),
    cpu: await o.cpu?.result(latencies.length),
    scheduled: scheduledInWindow,
    lateStarts,
    startLag: summarize(lags),
    connections: all.length,
  };
}
