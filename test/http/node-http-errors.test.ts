/**
 * Errors raised by Node's HTTP layer, below fastify, are problem+json with a
 * `code` and `retryable` like every other answer (issue 8). Node answered
 * them itself, with a bare JSON body or none. Sent as raw bytes over TCP:
 * no HTTP client would send them.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningService, startService } from '../support/service.js';

let svc: RunningService;
beforeAll(async () => {
  svc = await startService();
});
afterAll(() => svc.close());

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Writes `bytes` on a fresh connection and reads until the server closes it. */
function raw(bytes: Buffer): Promise<RawAnswer> {
  const { port } = new URL(svc.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), '127.0.0.1', () => socket.write(bytes));
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const [head = '', ...rest] = text.split('\r\n\r\n');
      const [statusLine = '', ...lines] = head.split('\r\n');
      const headers = Object.fromEntries(
        lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
      );
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: rest.join('\r\n\r\n') });
    });
  });
}

const HOST = 'Host: 127.0.0.1\r\n';
const BEGIN = 'POST /v1/scopes/orders/operations HTTP/1.1\r\n';
const latin1 = (s: string) => Buffer.from(s, 'latin1');

const CASES: [string, Buffer, number, string][] = [
  [
    'headers over 16 KiB',
    latin1(`GET /healthz HTTP/1.1\r\n${HOST}X-Big: ${'a'.repeat(17_000)}\r\n\r\n`),
    431,
    'HEADERS_TOO_LARGE',
  ],
  ['an unknown method', latin1(`FROB /healthz HTTP/1.1\r\n${HOST}\r\n`), 405, 'METHOD_NOT_ALLOWED'],
  [
    'a raw NUL byte in the path',
    latin1(`GET /v1/operations/a\u0000b HTTP/1.1\r\n${HOST}\r\n`),
    400,
    'INVALID_ARGUMENT',
  ],
  [
    'raw non-ASCII bytes in the path',
    Buffer.concat([
      latin1('GET /v1/scopes/orders/operations/'),
      Buffer.from([0xc3, 0xa9]),
      latin1(` HTTP/1.1\r\n${HOST}\r\n`),
    ]),
    400,
    'INVALID_ARGUMENT',
  ],
  [
    'a control byte in a header value',
    latin1(`GET /healthz HTTP/1.1\r\n${HOST}X-Trace: a\u0001b\r\n\r\n`),
    400,
    'INVALID_ARGUMENT',
  ],
  [
    'a Content-Length that is not a number',
    latin1(`${BEGIN}${HOST}Content-Length: abc\r\n\r\n`),
    400,
    'INVALID_ARGUMENT',
  ],
  [
    'two different Content-Lengths',
    latin1(`${BEGIN}${HOST}Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}`),
    400,
    'INVALID_ARGUMENT',
  ],
  [
    'Content-Length with Transfer-Encoding',
    latin1(`${BEGIN}${HOST}Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`),
    400,
    'INVALID_ARGUMENT',
  ],
  ['no Host header', latin1('GET /healthz HTTP/1.1\r\n\r\n'), 400, 'INVALID_ARGUMENT'],
  // A TLS hello on the plain port: its first bytes are read as a method name.
  ['not HTTP at all', latin1('\u0016\u0003\u0001hello\r\n\r\n'), 405, 'METHOD_NOT_ALLOWED'],
];

describe("Node's HTTP errors are problems", () => {
  for (const [what, bytes, status, code] of CASES) {
    it(what, async () => {
      const r = await raw(bytes);
      expect(r.status, `${what}: ${r.body}`).toBe(status);
      expect(r.headers['content-type'], what).toContain('application/problem+json');
      const body = JSON.parse(r.body);
      expect(body).toMatchObject({ status, code, retryable: false, type: `urn:idem:problem:${code}` });
      expect(typeof body.title).toBe('string');
      expect(Number(r.headers['content-length'])).toBe(Buffer.byteLength(r.body));
    });
  }

  it('the request is never echoed: a secret in an over-long header is not in the answer', async () => {
    const secret = `idem_${'s'.repeat(40)}`;
    const r = await raw(
      latin1(
        `GET /healthz HTTP/1.1\r\n${HOST}Authorization: Bearer ${secret}\r\nX-Big: ${'a'.repeat(17_000)}\r\n\r\n`,
      ),
    );
    expect(r.status).toBe(431);
    expect(r.body).not.toContain(secret);
  });

  it('HTTP/1.0 without Host is still served (Host is an HTTP/1.1 requirement)', async () => {
    const r = await raw(latin1('GET /healthz HTTP/1.0\r\n\r\n'));
    expect(r.status, r.body).toBe(200);
  });

  it('a well-formed request on the same server is answered normally', async () => {
    const r = await raw(latin1(`GET /healthz HTTP/1.1\r\n${HOST}Connection: close\r\n\r\n`));
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body)).toEqual({ status: 'ok' });
  });
});
