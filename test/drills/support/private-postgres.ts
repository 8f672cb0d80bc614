/**
 * A private Postgres cluster for drills that stop or crash the database
 * (F5): initdb into a temp dir, on a free port of 127.0.0.1, its socket in
 * that dir. The shared test Postgres is never touched: restarting it would
 * break every other test file running in parallel.
 *
 * initdb and postgres refuse to run as root; as root (CI) every command runs
 * as the `postgres` user through runuser, in a temp dir it owns.
 */
import { execFile, execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './replica.js';

const run = promisify(execFile);

/** The newest installed Postgres server binaries, or undefined when there are none. */
export function postgresBinDir(): string | undefined {
  const base = '/usr/lib/postgresql';
  if (existsSync(base)) {
    const versions = readdirSync(base)
      .filter((v) => existsSync(join(base, v, 'bin', 'initdb')))
      .sort((a, b) => Number(b) - Number(a));
    if (versions[0]) return join(base, versions[0], 'bin');
  }
  try {
    const dir = execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim();
    if (existsSync(join(dir, 'initdb'))) return dir;
  } catch {
    // no pg_config on PATH
  }
  return undefined;
}

const asRoot = process.getuid?.() === 0;

/** Whether a private cluster can be started here (binaries, and a postgres user when root). */
export function canRunPrivateCluster(): boolean {
  if (!postgresBinDir()) return false;
  if (!asRoot) return true;
  try {
    execFileSync('id', ['-u', 'postgres'], { stdio: 'ignore' });
    return existsSync('/usr/sbin/runuser') || existsSync('/sbin/runuser') || existsSync('/usr/bin/runuser');
  } catch {
    return false;
  }
}

const running = new Set<PrivateCluster>();
process.once('exit', () => {
  for (const c of running) c.stopSync();
});

export class PrivateCluster {
  private constructor(
    readonly dir: string,
    readonly port: number,
    private readonly bin: string,
  ) {}

  get dataDir(): string {
    return join(this.dir, 'data');
  }

  url(database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  static async create(): Promise<PrivateCluster> {
    const bin = postgresBinDir();
    if (!bin) throw new Error('no Postgres server binaries found');
    const dir = mkdtempSync(join(tmpdir(), 'idem-pg-'));
    if (asRoot) {
      const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
      const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
      chownSync(dir, uid, gid);
    }
    const c = new PrivateCluster(dir, await freePort(), bin);
    // --no-sync only for initdb's own files; the server keeps fsync on, as in production.
    await c.exec('initdb', ['-D', c.dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
    await c.start();
    return c;
  }

  private exec(tool: string, args: string[]) {
    const path = join(this.bin, tool);
    return asRoot
      ? run('runuser', ['-u', 'postgres', '--', path, ...args], { cwd: this.dir })
      : run(path, args, { cwd: this.dir });
  }

  private get options(): string {
    return `-c port=${this.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${this.dir} -c max_connections=40`;
  }

  async start(): Promise<void> {
    running.add(this);
    await this.exec('pg_ctl', [
      '-D',
      this.dataDir,
      '-l',
      join(this.dir, 'log'),
      '-w',
      '-t',
      '60',
      '-o',
      this.options,
      'start',
    ]);
  }

  /** `pg_ctl restart -m immediate`: every backend killed, crash recovery at start. */
  async restartImmediate(): Promise<void> {
    await this.exec('pg_ctl', [
      '-D',
      this.dataDir,
      '-l',
      join(this.dir, 'log'),
      '-w',
      '-t',
      '60',
      '-m',
      'immediate',
      '-o',
      this.options,
      'restart',
    ]);
  }

  /** `pg_ctl stop -m immediate`: the database is gone until `start`. */
  async stopImmediate(): Promise<void> {
    await this.exec('pg_ctl', ['-D', this.dataDir, '-w', '-m', 'immediate', 'stop']);
  }

  stopSync(): void {
    try {
      const path = join(this.bin, 'pg_ctl');
      const args = ['-D', this.dataDir, '-w', '-m', 'immediate', 'stop'];
      if (asRoot) execFileSync('runuser', ['-u', 'postgres', '--', path, ...args], { stdio: 'ignore' });
      else execFileSync(path, args, { stdio: 'ignore' });
    } catch {
      // already stopped
    }
    running.delete(this);
  }

  async destroy(): Promise<void> {
    this.stopSync();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
