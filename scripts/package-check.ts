/**
 * What a user gets from the registry, checked from the tarballs themselves:
 * `npm pack` of this tree (prepack builds a clean dist/) and of the
 * client-only package, each installed into an empty folder with `npm install
 * <tarball>` (dependencies come from the registry) and imported there.
 *
 *  - `idem` ships dist/ and the migrations, no tests, bench or CI files; its
 *    `idem/client` import and its `idem` bin work.
 *  - `idem-client` installs only its own dependencies (no PGlite, fastify, pg)
 *    and exports the same client.
 *
 * Usage: tsx scripts/package-check.ts [--client-only]   (CI runs it; it needs the registry)
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const clientOnly = process.argv.includes('--client-only');
const work = mkdtempSync(join(tmpdir(), 'idem-pack-'));
const failures: string[] = [];
const check = (ok: boolean, what: string) => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures.push(what);
};

const sh = (cmd: string, args: string[], cwd: string) =>
  execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });

/** Packs `dir` into `work`; the tarball's path and its file list. */
function pack(dir: string): { tarball: string; files: string[] } {
  const [r] = JSON.parse(sh('npm', ['pack', '--json', '--pack-destination', work, dir], root)) as {
    filename: string;
    files: { path: string }[];
  }[];
  return { tarball: join(work, r!.filename), files: r!.files.map((f) => f.path) };
}

/** Installs a tarball into a new folder; the folder, how many packages came, and their size. */
function install(tarball: string): { dir: string; packages: string[]; mb: number } {
  const dir = mkdtempSync(join(work, 'install-'));
  sh('npm', ['init', '-y'], dir);
  sh('npm', ['install', '--no-audit', '--no-fund', '--omit=dev', tarball], dir);
  const packages: string[] = [];
  const nm = join(dir, 'node_modules');
  for (const e of readdirSync(nm)) {
    if (e.startsWith('.')) continue;
    if (e.startsWith('@')) for (const s of readdirSync(join(nm, e))) packages.push(`${e}/${s}`);
    else packages.push(e);
  }
  const du = (p: string): number =>
    statSync(p).isDirectory() ? readdirSync(p).reduce((n, e) => n + du(join(p, e)), 0) : statSync(p).size;
  return { dir, packages, mb: du(nm) / 1e6 };
}

const run = (dir: string, code: string) =>
  sh(process.execPath, ['--input-type=module', '-e', code], dir).trim();

const SERVER_ONLY = ['@electric-sql/pglite', 'fastify', 'pg', 'drizzle-orm', '@fastify/swagger'];
const started = Date.now();
try {
  if (!clientOnly) {
    const idem = pack(root);
    const has = (p: string) => idem.files.includes(p);
    check(has('dist/server.js') && has('dist/cli.js') && has('dist/client/index.js'), 'idem ships dist/');
    check(has('drizzle/meta/_journal.json'), 'idem ships the migrations');
    const stray = idem.files.filter((f) => /^(test|bench|\.ci|scripts|examples|src)\/|\.test\./.test(f));
    check(
      stray.length === 0,
      `idem ships no tests, bench, CI or sources${stray.length ? `: ${stray.slice(0, 5)}` : ''}`,
    );
    const i = install(idem.tarball);
    check(
      run(i.dir, "import('idem/client').then((m) => console.log(typeof m.ToolExecutor))") === 'function',
      "import 'idem/client' works from the installed package",
    );
    check(
      sh(join(i.dir, 'node_modules', '.bin', 'idem'), ['--help'], i.dir).includes('usage: idem'),
      'the idem bin runs',
    );
    console.log(
      `     idem: ${idem.files.length} files, installs ${i.packages.length} packages, ${i.mb.toFixed(0)} MB`,
    );
  }

  sh('npm', ['run', '--silent', 'build:client-package', '--', join(work, 'idem-client')], root);
  const client = pack(join(work, 'idem-client'));
  const c = install(client.tarball);
  const server = c.packages.filter((p) => SERVER_ONLY.includes(p));
  check(server.length === 0, `idem-client installs no server package${server.length ? `: ${server}` : ''}`);
  check(
    run(
      c.dir,
      "import('idem-client').then((m) => console.log(typeof m.ToolExecutor, typeof m.LedgerClient))",
    ) === 'function function',
    "import 'idem-client' works",
  );
  console.log(
    `     idem-client: ${client.files.length} files, installs ${c.packages.length} packages, ${c.mb.toFixed(1)} MB`,
  );
} finally {
  rmSync(work, { recursive: true, force: true });
}
console.log(
  `package check: ${failures.length ? 'FAILED' : 'passed'} in ${Math.round((Date.now() - started) / 1000)} s`,
);
if (failures.length) process.exit(1);
