/**
 * Serves the operator console (built by vite into dist/console-web) at
 * /console/. The page itself holds no data and needs no key: every call it
 * makes goes to the public API with the key the operator signed in with.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';

/** The prefix the console is served under (vite's `base` must match). */
export const CONSOLE_PATH = '/console/';

/** Sent with every /console response: nothing inline, nothing from another origin. */
export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
};

interface Asset {
  body: Buffer;
  type: string;
  /** Hashed file names under assets/ never change content: cache them for long. */
  immutable: boolean;
}

/**
 * Where the built console is: next to this file's compiled copy (dist/console
 * -> dist/console-web) or, when running from source (tsx, tests), in dist/.
 */
export function defaultConsoleDir(): string {
  const here = fileURLToPath(new URL('.', import.meta.url));
  const candidates = [join(here, '..', 'console-web'), join(here, '..', '..', 'dist', 'console-web')];
  return candidates.find((d) => existsSync(join(d, 'index.html'))) ?? candidates[0]!;
}

/** Every file of the build, read once: only these paths can ever be served (no traversal). */
function loadAssets(dir: string): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  if (!existsSync(join(dir, 'index.html'))) return assets;
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const full = join(d, name);
      if (statSync(full).isDirectory()) walk(full);
      else {
        const rel = relative(dir, full).split(sep).join('/');
        assets.set(rel, {
          body: readFileSync(full),
          type: TYPES[extname(name)] ?? 'application/octet-stream',
          immutable: rel.startsWith('assets/'),
        });
      }
    }
  };
  walk(dir);
  return assets;
}

function secure(reply: FastifyReply): FastifyReply {
  return reply
    .header('content-security-policy', CONSOLE_CSP)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('x-frame-options', 'DENY')
    .header('cross-origin-opener-policy', 'same-origin');
}

export interface ConsoleOptions {
  /** The folder vite built; defaults to dist/console-web. */
  dir?: string;
}

/** Registers GET /console and /console/*; hidden from the OpenAPI document. */
export async function consolePlugin(app: FastifyInstance, opts: ConsoleOptions = {}): Promise<void> {
  const assets = loadAssets(opts.dir ?? defaultConsoleDir());
  const hide = { schema: { hide: true } };

  app.get('/console', hide, async (_request, reply) => secure(reply).redirect(CONSOLE_PATH, 308));

  app.get<{ Params: { '*': string } }>(`${CONSOLE_PATH}*`, hide, async (request, reply) => {
    secure(reply);
    if (assets.size === 0) {
      return reply
        .code(503)
        .type('text/plain; charset=utf-8')
        .send('The console is not built: run `npm run build`.\n');
    }
    const path = request.params['*'] || 'index.html';
    const asset = assets.get(path);
    if (!asset) return reply.code(404).type('text/plain; charset=utf-8').send('Not found.\n');
    reply.type(asset.type);
    reply.header('cache-control', asset.immutable ? 'public, max-age=31536000, immutable' : 'no-cache');
    return reply.send(asset.body);
  });
}
