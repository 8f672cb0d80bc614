/**
 * One process per embedded data folder: a second one exits at once with one
 * line naming the folder, and a lock left by a killed process is taken over.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { lockPath } from '../../src/db/data-dir-lock.js';
import { freePort, ServiceProcess, START_MS, tempDir } from './support.js';

const dataDir = join(tempDir(), 'data');
const env = { IDEM_DATA_DIR: dataDir, IDEM_SWEEP: 'false' };
const started: ServiceProcess[] = [];
const start = async () => {
  const p = new ServiceProcess(await freePort(), env);
  started.push(p);
  return p;
};
afterAll(async () => {
  await Promise.all(started.map((p) => p.stop()));
});

it('a second process on the folder exits with one line naming it; the first keeps serving', {
  timeout: 3 * START_MS,
}, async () => {
  const first = await start();
  await first.waitFor('/readyz', 200);

  const second = await start();
  // Headroom for a slow start, not a timing assertion: without the lock it never exits.
  const ended = await Promise.race([
    second.exited,
    new Promise<'still running'>((r) => setTimeout(() => r('still running'), START_MS).unref()),
  ]);
  expect(ended, `the second process opened the folder too:\n${second.tail()}`).not.toBe('still running');
  expect((ended as { code: number | null }).code, second.tail()).toBe(2);
  expect(second.lines, second.tail()).toHaveLength(1);
  expect(second.lines[0]).toContain(dataDir);
  expect(second.lines[0]).toMatch(/^idem: IDEM_DATA_DIR .* in use by another idem process \(pid \d+\)/);
  expect(await first.status('/readyz')).toBe(200);
  expect(existsSync(lockPath(dataDir))).toBe(true);

  // kill -9 leaves the lock behind; its pid is gone, so the next start takes it over.
  first.proc.kill('SIGKILL');
  await first.exited;
  expect(existsSync(lockPath(dataDir))).toBe(true);
  const third = await start();
  await third.waitFor('/readyz', 200);

  // A clean stop removes it.
  await third.stop();
  expect(existsSync(lockPath(dataDir))).toBe(false);
});
