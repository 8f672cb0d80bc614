/**
 * `npm start` (and `npm run idem -- serve`, which the CLI's help calls the same)
 * stopped with SIGTERM (a terminal's Ctrl-C goes to the whole group; a
 * supervisor signals only npm) must not leave the server running without it:
 * npm runs the script through `sh -c`, and a shell that does not exec its
 * command dies alone, orphaning the server.
 */
import { afterAll, expect, it } from 'vitest';
import { engineEnv, freePort, ServiceProcess, START_MS } from './support.js';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const serverPids: number[] = [];
afterAll(() => {
  for (const pid of serverPids) if (alive(pid)) process.kill(pid, 'SIGKILL');
});

// npm itself, as an operator types it (`npm start`'s prestart builds dist/ first).
it.each([
  ['npm start', ['npm', 'start']],
  ['npm run idem -- serve', ['npm', 'run', 'idem', '--', 'serve']],
])('SIGTERM to npm stops the server it started: %s', { timeout: 3 * START_MS }, async (_, command) => {
  const e = await engineEnv();
  const npm = new ServiceProcess(await freePort(), e.env, command);
  try {
    await npm.waitFor('/readyz', 200, 2 * START_MS);
    const line = npm.lines.find((l) => l.startsWith('{') && l.includes('"pid"'));
    const serverPid = (JSON.parse(line!) as { pid: number }).pid;
    serverPids.push(serverPid);
    expect(serverPid).not.toBe(npm.proc.pid);
    expect(alive(serverPid)).toBe(true);

    npm.proc.kill('SIGTERM');
    await npm.exited;
    await expect.poll(() => alive(serverPid), { timeout: 60_000, interval: 100 }).toBe(false);
    expect(await npm.status('/healthz')).toBe(0);
    expect(npm.messages()).toContain('shutting down: no new requests, finishing in-flight ones');
  } finally {
    await npm.stop();
    await e.drop();
  }
});
