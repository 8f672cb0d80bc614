/**
 * How the service serves the console (no browser needed, so it runs in
 * `npm test`): content types, the security headers on every response, only
 * built files, reachable without a key while the API still needs one, and
 * hidden from the OpenAPI document.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashSecret, newSecret } from '../../src/auth/keys.js';
import { CONSOLE_CSP, consolePlugin } from '../../src/console/plugin.js';
import { createTestApp, type TestApp } from '../support/service.js';

/** A GET with the path sent exactly as written (fetch would normalize the dot segments). */
function rawGet(port: number, path: string): Promise<{ statusCode: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method: 'GET' }, (res) => {
      let body = '';
      res.on('data', (c) => {
        body += c;
      });
      res.on('end', () => resolve({ statusCode: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const SECURITY = {
  'content-security-policy': CONSOLE_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

describe('console plugin', () => {
  let dir: string;
  let app: FastifyInstance;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'idem-console-build-'));
    mkdirSync(join(dir, 'assets'));
    writeFileSync(join(dir, 'index.html'), '<!doctype html><title>console</title>');
    writeFileSync(join(dir, 'assets', 'main-abc123.js'), 'console.log(1)');
    writeFileSync(join(dir, 'assets', 'main-abc123.css'), 'body{}');
    writeFileSync(join(dir, '..', 'idem-console-secret.txt'), 'outside the build');
    app = Fastify();
    await app.register(consolePlugin, { dir });
    await app.ready();
  });
  afterAll(async () => {
    await app.close();
    rmSync(dir, { recursive: true, force: true });
    rmSync(join(dir, '..', 'idem-console-secret.txt'), { force: true });
  });

  it.each([
    ['/console/', 'text/html; charset=utf-8', 'no-cache'],
    ['/console/index.html', 'text/html; charset=utf-8', 'no-cache'],
    [
      '/console/assets/main-abc123.js',
      'text/javascript; charset=utf-8',
      'public, max-age=31536000, immutable',
    ],
    ['/console/assets/main-abc123.css', 'text/css; charset=utf-8', 'public, max-age=31536000, immutable'],
  ])('%s is %s with the security headers', async (url, type, cache) => {
    const r = await app.inject(url);
    expect(r.statusCode).toBe(200);
    expect(r.headers['content-type']).toBe(type);
    expect(r.headers['cache-control']).toBe(cache);
    expect(r.headers).toMatchObject(SECURITY);
  });

  it('redirects /console to /console/ so relative paths resolve', async () => {
    const r = await app.inject('/console');
    expect(r.statusCode).toBe(308);
    expect(r.headers.location).toBe('/console/');
    expect(r.headers).toMatchObject(SECURITY);
  });

  it.each([
    '/console/nope.js',
    '/console/..%2fidem-console-secret.txt',
    '/console/assets/..%2f..%2fidem-console-secret.txt',
  ])('serves nothing but built files: %s is 404', async (url) => {
    const r = await app.inject(url);
    expect(r.statusCode).toBe(404);
    expect(r.body).not.toContain('outside the build');
    expect(r.headers).toMatchObject(SECURITY);
  });

  it('says so when the console is not built', async () => {
    const bare = Fastify();
    await bare.register(consolePlugin, { dir: join(dir, 'missing') });
    const r = await bare.inject('/console/');
    expect(r.statusCode).toBe(503);
    expect(r.body).toContain('npm run build');
    expect(r.headers).toMatchObject(SECURITY);
    await bare.close();
  });
});

describe('console in the service', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({
      keys: [{ name: 'ops', role: 'operator', scopes: ['*'], sha256: hashSecret(newSecret()) }],
    });
  }, 180_000);
  afterAll(() => t.close());

  it('is reachable without a key (the page holds no data) while the API still needs one', async () => {
    const page = await t.app.inject('/console/');
    // 200 once built, 503 before `npm run build`: never a 401, always the headers.
    expect([200, 503]).toContain(page.statusCode);
    expect(page.headers).toMatchObject(SECURITY);
    expect((await t.app.inject('/v1/operations')).statusCode).toBe(401);
    expect((await t.app.inject('/v1/stats')).statusCode).toBe(401);
  });

  it('dot segments after /console/ do not skip authentication (inject and a real socket)', async () => {
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = t.app.server.address() as { port: number };
    // Before `npm run build` (a fresh clone's `npm test`) every /console/ path is the plain 503
    // "not built" page; once built, a path that is not an asset is 404. Never 200, never data.
    const built = (await t.app.inject('/console/')).statusCode === 200;
    const allowed = built ? [401, 404] : [401, 503];
    for (const url of ['/console/../v1/operations', '/console/%2e%2e/v1/stats', '/console/..%2fv1%2fstats']) {
      const injected = await t.app.inject(url);
      const { statusCode, body } = await rawGet(port, url);
      for (const [status, text] of [
        [injected.statusCode, injected.body],
        [statusCode, body],
      ] as const) {
        expect(allowed, `${url}: ${text}`).toContain(status);
        expect(text).not.toMatch(/"items"|"scopes"/);
      }
    }
  });

  it('is not part of the OpenAPI document', () => {
    const doc = t.app.swagger() as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths).filter((p) => p.startsWith('/console'))).toEqual([]);
    expect(Object.keys(doc.paths)).toContain('/v1/operations');
  });
});
