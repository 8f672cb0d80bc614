/**
 * A TCP proxy (node:net, no external tool) that loses responses AFTER the
 * request reached the service: it forwards every request, and for a chosen
 * share of connections it waits until the service starts answering (so the
 * request was handled, and committed if it was going to) and then, instead of
 * passing the answer on, resets the client's connection (RST), closes it
 * without a byte (FIN), or passes half of the first chunk and closes (a
 * truncated response). With one request per connection, a share of
 * connections is the same share of responses.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export type DropMode = 'reset' | 'close' | 'truncate';
const MODES: DropMode[] = ['reset', 'close', 'truncate'];

export interface ProxyStats {
  connections: number;
  passed: number;
  dropped: Record<DropMode, number>;
  /** Dropped responses by request line, e.g. `POST begin`, `POST complete`. */
  droppedBy: Record<string, number>;
}

/** `POST /v1/scopes/s/operations/k/complete` -> `POST complete`; a begin is `POST begin`. */
function endpointOf(requestLine: string): string {
  const [method, path = ''] = requestLine.split(' ');
  const parts = path.split('?')[0]!.split('/');
  if (parts.length === 5 && parts[4] === 'operations') return `${method} begin`;
  if (parts.length === 6) return `${method} read`;
  return `${method} ${parts[6] ?? path}`;
}

export class LossyProxy {
  readonly stats: ProxyStats = {
    connections: 0,
    passed: 0,
    dropped: { reset: 0, close: 0, truncate: 0 },
    droppedBy: {},
  };
  #server: Server | undefined;
  readonly #sockets = new Set<Socket>();
  port = 0;

  constructor(
    private readonly upstreamPort: number,
    private readonly dropRate: number,
    private readonly random: () => number,
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async listen(): Promise<void> {
    this.#server = createServer((client) => this.#handle(client));
    await new Promise<void>((r) => this.#server!.listen(0, '127.0.0.1', r));
    const addr = this.#server.address();
    if (!addr || typeof addr === 'string') throw new Error('no address');
    this.port = addr.port;
  }

  #handle(client: Socket): void {
    this.stats.connections++;
    const drop = this.random() < this.dropRate ? MODES[Math.floor(this.random() * MODES.length)]! : null;
    const upstream = connect(this.upstreamPort, '127.0.0.1');
    this.#sockets.add(client);
    this.#sockets.add(upstream);
    let requestLine = '';
    let answered = false;
    let dropping = false;

    client.on('data', (chunk: Buffer) => {
      if (!requestLine)
        requestLine = chunk.toString('latin1', 0, Math.min(chunk.length, 512)).split('\r\n')[0]!;
      upstream.write(chunk);
    });
    client.on('end', () => upstream.end());
    upstream.on('data', (chunk: Buffer) => {
      if (!drop) {
        if (!answered) this.stats.passed++;
        answered = true;
        client.write(chunk);
        return;
      }
      if (answered) return;
      answered = true;
      dropping = true;
      // The service has answered: the request reached it. Now lose the answer.
      this.stats.dropped[drop]++;
      const ep = endpointOf(requestLine);
      this.stats.droppedBy[ep] = (this.stats.droppedBy[ep] ?? 0) + 1;
      if (drop === 'reset') client.resetAndDestroy();
      else if (drop === 'close') client.end();
      else client.end(chunk.subarray(0, Math.max(1, Math.floor(chunk.length / 2))));
      upstream.destroy();
    });
    upstream.on('end', () => client.end());
    // A dropped connection was already ended or reset above: leave it alone,
    // or a pending truncated write would be discarded.
    upstream.on('close', () => {
      if (!dropping) client.end();
    });
    client.on('close', () => {
      upstream.destroy();
      this.#sockets.delete(client);
      this.#sockets.delete(upstream);
    });
    const fail = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', fail);
    upstream.on('error', fail);
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((r) => (this.#server ? this.#server.close(() => r()) : r()));
  }
}
