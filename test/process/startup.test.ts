/**
 * Start-up as an operator meets it: a keys file that is missing or a folder,
 * and a database that is not there yet, then goes away and comes back.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { onPostgres } from '../support/engine.js';
import { emptyDatabase, freePort, Gate, ServiceProcess, START_MS, tempDir } from './support.js';

/** A line of a stack trace. */
const STACK = /^\s+at\s/;

describe('a keys file that cannot be read', () => {
  const dir = tempDir();
  const cases: [string, string, RegExp][] = [
    ['missing', join(dir, 'nope.json'), /no such file/],
    ['a directory', dir, /is a directory/],
    ['not JSON', join(dir, 'bad.json'), /not valid JSON/],
  ];
  writeFileSync(join(dir, 'bad.json'), '[{');

  for (const [what, path, reason] of cases) {
    it(`${what}: one line naming IDEM_KEYS_FILE, exit code 2, no stack`, { timeout: START_MS }, async () => {
      const svc = new ServiceProcess(await freePort(), {
        IDEM_KEYS_FILE: path,
        IDEM_DATA_DIR: join(tempDir(), 'data'),
      });
      const { code } = await svc.exited;
      expect(code, svc.tail()).toBe(2);
      expect(svc.lines, svc.tail()).toHaveLength(1);
      expect(svc.lines[0]).toMatch(/^idem: IDEM_KEYS_FILE /);
      expect(svc.lines[0]).toContain(path);
      expect(svc.lines[0]).toMatch(reason);
    });
  }
});

describe.skipIf(!onPostgres())(
  'a database that is not there at start (Postgres only: it needs a server to come and go)',
  () => {
    let svc: ServiceProcess | undefined;
    let gate: Gate | undefined;
    let drop: (() => Promise<void>) | undefined;
    afterAll(async () => {
      await svc?.stop();
      await gate?.close();
      await drop?.();
    });

    const count = (text: string) => svc!.messages().filter((m) => m.includes(text)).length;
    const metric = async (name: string, labels = '') => {
      const text = await (await fetch(`${svc!.url}/metrics`)).text();
      const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
      return line === undefined ? undefined : Number(line.split(' ')[1]);
    };
    const begin = async (key: string) => {
      const r = await fetch(`${svc!.url}/v1/scopes/boot/operations`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ key, request: {} }),
      });
      return { status: r.status, body: (await r.json()) as { code?: string } };
    };

    it('a migration that fails stops the process: one line, exit 1, no stack', {
      timeout: START_MS,
    }, async () => {
      const empty = await emptyDatabase();
      try {
        // Something already named like the ledger's table: the first migration cannot create it.
        const c = new pg.Client({ connectionString: empty.url });
        await c.connect();
        await c.query('CREATE TABLE idem_operations (x int)');
        await c.end();
        const p = new ServiceProcess(await freePort(), { DATABASE_URL: empty.url });
        const { code } = await p.exited;
        expect(code, p.tail()).toBe(1);
        const fatal = p.lines.filter((l) => l.includes('cannot start'));
        expect(fatal, p.tail()).toHaveLength(1);
        expect(JSON.parse(fatal[0]!)).toMatchObject({ level: 60, code: '42P07' });
        expect(fatal[0]).toContain('idem_operations');
        expect(p.lines.filter((l) => STACK.test(l) || l.includes('"stack"'))).toEqual([]);
      } finally {
        await empty.drop();
      }
    });

    it('listens at once, waits with backoff, then migrates and serves; a later outage is logged once', {
      timeout: 4 * START_MS,
    }, async () => {
      const empty = await emptyDatabase();
      drop = empty.drop;
      gate = await Gate.create(empty.url);
      svc = new ServiceProcess(await freePort(), {
        DATABASE_URL: gate.via(empty.url),
        IDEM_SWEEP_INTERVAL_MS: '50',
      });

      // Up before its database: alive, not ready, the API and /metrics answer.
      await svc.waitFor('/healthz', 200);
      expect(await svc.status('/readyz')).toBe(503);
      const refused = await begin('k1');
      expect(refused.status).toBe(503);
      expect(refused.body.code).toBe('UNAVAILABLE');
      expect(await metric('idem_database_up')).toBe(0);
      await expect
        .poll(() => count('waiting for the database'), { timeout: START_MS })
        .toBeGreaterThanOrEqual(2);
      const retries = svc.lines.filter((l) => l.includes('waiting for the database'));
      for (const l of retries) {
        expect(JSON.parse(l)).toMatchObject({
          level: 40,
          retryInMs: expect.any(Number),
          code: 'ECONNREFUSED',
        });
        expect(l).not.toMatch(/stack|\\n\s+at /);
      }
      expect(
        svc.lines.filter((l) => STACK.test(l)),
        svc.tail(),
      ).toEqual([]);
      expect(count('database opened'), 'said "database opened" before it was').toBe(0);

      // The database appears: it migrates and serves, with no restart.
      const before = svc.lines.length;
      await gate.open();
      await svc.waitFor('/readyz', 200);
      // /readyz answers from the database, which can show the migrations a moment before
      // the process logs them (after its migration connection closed): wait for the line.
      await svc.waitForLine(/migrations applied/);
      const after = svc.messages().slice(before);
      expect(after).toContain('database opened');
      expect(after).toContain('migrations applied');
      expect(count('database opened')).toBe(1);
      expect((await begin('k2')).status).toBe(201);
      expect(await metric('idem_database_up')).toBe(1);

      // It goes away: the sweeper fails every 50 ms but says so once; /metrics still answers.
      await gate.close();
      await expect
        .poll(() => metric('idem_sweeper_runs_total', '{result="error"}'), { timeout: START_MS })
        .toBeGreaterThanOrEqual(10);
      expect(count('sweep failed'), svc.tail()).toBe(1);
      expect(await metric('idem_database_up')).toBe(0);

      // And comes back: said once too.
      await gate.open();
      await expect.poll(() => count('sweep recovered'), { timeout: START_MS }).toBe(1);
      expect(count('sweep failed')).toBe(1);
      expect((await begin('k3')).status).toBe(201);
      expect(svc.running).toBe(true);
    });
  },
);
