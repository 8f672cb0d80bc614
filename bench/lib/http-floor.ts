/**
 * The HTTP floor as its own process (`http-floor-server.ts`), the service's
 * answers it imitates (captured from the service itself, so the sizes are
 * the real ones), and the floor's cycles: the same requests as the
 * service's cycles, sent by the same driver, answered 200. The stack floor
 * (`stack-floor-server.ts`) is the same process with the floor's SQL run
 * before each answer.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  beginPath,
  type Cycle,
  closeClients,
  holderPath,
  openClients,
  post,
  scatteredKey,
  UnexpectedAnswer,
} from './http-load.js';
import { freePort, ROOT } from './service.js';
import { BEGIN_BODY, COMPLETE_BODY } from './statements.js';

/** The service's answer texts: a new key's begin (201), its complete, and a replay of it. */
export interface Answers {
  begin: string;
  complete: string;
  replay: string;
}

/** One begin, complete and replay against the service, to learn its answers' sizes. */
export async function sampleAnswers(url: string, scope: string): Promise<Answers> {
  const [client] = openClients(url, 1);
  try {
    const key = scatteredKey('sample', 0, Date.now());
    const leaseId = randomUUID();
    const begin = await post(client!, beginPath(scope), { ...BEGIN_BODY, key, leaseId });
    const complete = await post(client!, holderPath(scope, key, 'complete'), { ...COMPLETE_BODY, leaseId });
    const replay = await post(client!, beginPath(scope), { ...BEGIN_BODY, key, leaseId: randomUUID() });
    if (begin.status !== 201 || complete.status !== 200 || replay.status !== 200) {
      throw new Error(`sampling answers: HTTP ${begin.status}/${complete.status}/${replay.status}`);
    }
    return { begin: begin.text, complete: complete.text, replay: replay.text };
  } finally {
    await closeClients([client!]);
  }
}

export class HttpFloor {
  private constructor(
    readonly url: string,
    private readonly child: ChildProcess,
    private readonly exited: Promise<unknown>,
  ) {}

  get pid(): number {
    return this.child.pid!;
  }

  /**
   * Starts the floor answering begins with `begin` and completes with
   * `complete` (JSON texts). With `stack`, the stack floor instead
   * (`stack-floor-server.ts`): the same routes, each running the floor's SQL
   * first, in `stack.scope` of `stack.databaseUrl`.
   */
  static async start(
    bodies: { begin: string; complete: string },
    logFile: string,
    stack?: { databaseUrl: string; scope: string; poolMax: number },
  ): Promise<HttpFloor> {
    const what = stack ? 'the stack floor' : 'the HTTP floor';
    const port = await freePort();
    const log = createWriteStream(logFile, { flags: 'a' });
    const server = stack ? 'bench/lib/stack-floor-server.ts' : 'bench/lib/http-floor-server.ts';
    const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, server)], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        PORT: String(port),
        FLOOR_BODIES: JSON.stringify({
          begin: JSON.parse(bodies.begin),
          complete: JSON.parse(bodies.complete),
        }),
        ...(stack && {
          DATABASE_URL: stack.databaseUrl,
          FLOOR_SCOPE: stack.scope,
          POOL_MAX: String(stack.poolMax),
        }),
      },
    });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    const exited = new Promise((resolve) => child.on('exit', resolve));
    const floor = new HttpFloor(`http://127.0.0.1:${port}`, child, exited);
    for (const deadline = Date.now() + 30_000; ; ) {
      if (child.exitCode !== null) throw new Error(`${what} exited during start; see ${logFile}`);
      const ok = await fetch(`${floor.url}/readyz`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) return floor;
      if (Date.now() > deadline) {
        await floor.stop();
        throw new Error(`${what} was not ready within 30 s; see ${logFile}`);
      }
      await sleep(100);
    }
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill('SIGTERM');
    const done = await Promise.race([this.exited.then(() => true), sleep(5000).then(() => false)]);
    if (!done) {
      this.child.kill('SIGKILL');
      await this.exited;
    }
  }
}

function expect200(status: number, text: string, what: string): void {
  if (status !== 200) throw new UnexpectedAnswer(`floor ${what}: HTTP ${status} ${text.slice(0, 160)}`);
}

/** S1's requests (a begin, then a complete) sent to the HTTP floor. */
export function floorCycle(scope: string, tag: string): Cycle {
  const path = beginPath(scope);
  return async (client, i, seq) => {
    const key = scatteredKey(tag, i, seq);
    const leaseId = randomUUID();
    const a = await post(client, path, { ...BEGIN_BODY, key, leaseId });
    expect200(a.status, a.text, 'begin');
    const c = await post(client, holderPath(scope, key, 'complete'), { ...COMPLETE_BODY, leaseId });
    expect200(c.status, c.text, 'complete');
  };
}

/** S2's request (a begin on a known key) sent to the HTTP floor. */
export function floorReplayCycle(scope: string, keys: string[]): Cycle {
  const path = beginPath(scope);
  return async (client) => {
    const key = keys[Math.floor(Math.random() * keys.length)]!;
    const a = await post(client, path, { ...BEGIN_BODY, key, leaseId: randomUUID() });
    expect200(a.status, a.text, 'replay');
  };
}
