/**
 * The downstream service the drills count effects at: a real HTTP server in
 * the test process. A worker calls it only while it holds a lease, after a
 * successful acquisition; each call is one application of the side effect.
 * `PUT`-like state (`value`) shows what an idempotent write leaves behind.
 */
import { createServer, type Server } from 'node:http';

export interface Application {
  key: string;
  attempt: number;
  leaseId: string;
  worker: string;
  value: unknown;
  at: number;
}

export class Downstream {
  readonly applications = new Map<string, Application[]>();
  readonly values = new Map<string, unknown>();
  #server: Server | undefined;
  url = '';

  async start(): Promise<void> {
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (req.method !== 'POST' || req.url !== '/effects') {
          res.writeHead(404).end();
          return;
        }
        const a = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Omit<Application, 'at'>;
        this.apply(a);
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: true }));
      });
    });
    await new Promise<void>((r) => this.#server!.listen(0, '127.0.0.1', r));
    const addr = this.#server.address();
    if (!addr || typeof addr === 'string') throw new Error('no address');
    this.url = `http://127.0.0.1:${addr.port}`;
  }

  apply(a: Omit<Application, 'at'>): void {
    const list = this.applications.get(a.key) ?? [];
    list.push({ ...a, at: Date.now() });
    this.applications.set(a.key, list);
    this.values.set(a.key, a.value);
  }

  /** Performs the effect over HTTP, as a worker would. */
  async perform(a: Omit<Application, 'at'>): Promise<void> {
    const r = await fetch(`${this.url}/effects`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(a),
    });
    if (r.status !== 200) throw new Error(`downstream answered ${r.status}`);
    await r.arrayBuffer();
  }

  count(key: string): number {
    return this.applications.get(key)?.length ?? 0;
  }

  total(): number {
    let n = 0;
    for (const l of this.applications.values()) n += l.length;
    return n;
  }

  async close(): Promise<void> {
    await new Promise<void>((r) => (this.#server ? this.#server.close(() => r()) : r()));
  }
}
