/**
 * The HTTP load generator: closed-loop virtual clients, one undici `Client`
 * (one keep-alive connection) each, as pgbench keeps one connection per
 * client. It runs in the bench process, never in the service's. A sample
 * counts when its cycle completes inside the measured window, as pgbench's
 * per-transaction log is windowed.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Client } from 'undici';
import type { CpuPerOp, CpuWindow } from './cpu.js';
import { BEGIN_BODY, COMPLETE_BODY } from './statements.js';
import { type LatencySummary, summarize } from './stats.js';

export interface MeasuredLoad {
  /** Cycles (or requests) completed inside the window. */
  completed: number;
  seconds: number;
  perSecond: number;
  latency: LatencySummary;
  errors: number;
  /** The first few distinct failures, for the report. */
  errorSamples: string[];
  /** CPU milliseconds per completed operation, by process, when metered. */
  cpu?: CpuPerOp;
}

/** One unit of work of a virtual client; throws on an unexpected answer. */
export type Cycle = (client: Client, clientIndex: number, seq: number) => Promise<void>;

export interface LoadOptions {
  url: string;
  clients: number;
  warmupMs: number;
  /** The window ends after `measureMs`, or earlier when `until()` turns true. */
  measureMs: number;
  until?: () => boolean;
  cycle: Cycle;
  /** Called with each completed sample inside the window (end time, latency), e.g. for a timeline. */
  onSample?: (endMs: number, latencyMs: number) => void;
  /** Snapshots CPU use when the window opens and closes. */
  cpu?: CpuWindow;
}

export class UnexpectedAnswer extends Error {}

export function openClients(url: string, n: number): Client[] {
  return Array.from(
    { length: n },
    () => new Client(url, { pipelining: 1, keepAliveTimeout: 60_000, keepAliveMaxTimeout: 60_000 }),
  );
}

export async function closeClients(clients: Client[]): Promise<void> {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
}

/** Runs the closed loop and measures it. */
export async function closedLoop(o: LoadOptions): Promise<MeasuredLoad> {
  const clients = openClients(o.url, o.clients);
  const latencies: number[] = [];
  const errors = new Map<string, number>();
  let errorCount = 0;
  const t0 = performance.now();
  const from = t0 + o.warmupMs;
  const to = from + o.measureMs;
  let endedAt = to;
  const opening = setTimeout(() => o.cpu?.open(), o.warmupMs);
  const closing = setTimeout(() => o.cpu?.close(), o.warmupMs + o.measureMs);
  const done = () => {
    const now = performance.now();
    // The timers above can fire after the loop has ended (fast answers): snapshot here too.
    if (now >= from) o.cpu?.open();
    if (now >= to) {
      o.cpu?.close();
      return true;
    }
    if (now >= from && o.until?.()) {
      if (now < endedAt) o.cpu?.close();
      endedAt = Math.min(endedAt, now);
      return true;
    }
    return false;
  };
  try {
    await Promise.all(
      clients.map(async (client, i) => {
        for (let seq = 0; !done(); seq++) {
          const start = performance.now();
          try {
            await o.cycle(client, i, seq);
          } catch (err) {
            errorCount++;
            const msg = (err as Error).message.slice(0, 200);
            errors.set(msg, (errors.get(msg) ?? 0) + 1);
            // A refused connection would spin: back off a little.
            await new Promise((r) => setTimeout(r, 5));
            continue;
          }
          const end = performance.now();
          if (end >= from && end < endedAt) {
            latencies.push(end - start);
            o.onSample?.(end, end - start);
          }
        }
      }),
    );
  } finally {
    clearTimeout(opening);
    clearTimeout(closing);
    await closeClients(clients);
  }
  const seconds = (endedAt - from) / 1000;
  return {
    completed: latencies.length,
    seconds,
    perSecond: latencies.length / seconds,
    latency: summarize(latencies),
    errors: errorCount,
    errorSamples: [...errors].slice(0, 5).map(([m, n]) => `${n}x ${m}`),
    cpu: await o.cpu?.result(latencies.length),
  };
}

const JSON_HEADERS = { 'content-type': 'application/json' };

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

export async function post(client: Client, path: string, body: unknown): Promise<Answer> {
  const res = await client.request({
    method: 'POST',
    path,
    headers: JSON_HEADERS,
    body: JSON.stringify(body),
  });
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
}

export const beginPath = (scope: string) => `/v1/scopes/${encodeURIComponent(scope)}/operations`;
export const holderPath = (scope: string, key: string, call: string) =>
  `/v1/scopes/${encodeURIComponent(scope)}/operations/${encodeURIComponent(key)}/${call}`;

function expect(a: Answer, status: number, what: string): void {
  if (a.status !== status) throw new UnexpectedAnswer(`${what}: HTTP ${a.status} ${a.text.slice(0, 160)}`);
}

/** A spread-out key, like agent keys (`<session>/<turn>/<call>`): random first, then unique. */
export const scatteredKey = (tag: string, client: number, seq: number) =>
  `${randomBytes(4).toString('hex')}/${tag}/${client}/${seq}`;

/** S1's cycle: begin a new key (201), complete it (200). */
export function beginCompleteCycle(scope: string, tag: string): Cycle {
  const path = beginPath(scope);
  return async (client, i, seq) => {
    const key = scatteredKey(tag, i, seq);
    const leaseId = randomUUID();
    expect(await post(client, path, { ...BEGIN_BODY, key, leaseId }), 201, 'begin');
    expect(
      await post(client, holderPath(scope, key, 'complete'), { ...COMPLETE_BODY, leaseId }),
      200,
      'complete',
    );
  };
}

/** S2's request: begin on a completed key, answered by a replay (200). */
export function replayCycle(scope: string, keys: string[]): Cycle {
  const path = beginPath(scope);
  return async (client) => {
    const key = keys[Math.floor(Math.random() * keys.length)]!;
    const a = await post(client, path, { ...BEGIN_BODY, key, leaseId: randomUUID() });
    expect(a, 200, 'replay');
    if (a.headers['idempotent-replayed'] !== 'true') throw new UnexpectedAnswer('replay: not replayed');
  };
}
