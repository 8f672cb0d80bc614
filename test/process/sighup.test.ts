/**
 * Rotating keys must not take the ledger offline: the README and `keys create`
 * tell operators to send SIGHUP after editing the keys file.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type ApiKey, hashSecret, newSecret } from '../../src/auth/keys.js';
import { engineEnv, freePort, ServiceProcess, START_MS, tempDir } from './support.js';

const oldSecret = newSecret();
const newSecretValue = newSecret();
const key = (name: string, secret: string): ApiKey => ({
  name,
  role: 'operator',
  scopes: ['*'],
  sha256: hashSecret(secret),
});

let svc: ServiceProcess;
let drop: () => Promise<void>;
const keysFile = join(tempDir(), 'keys.json');

beforeAll(async () => {
  writeFileSync(keysFile, JSON.stringify([key('before', oldSecret)]));
  const e = await engineEnv();
  drop = e.drop;
  svc = new ServiceProcess(await freePort(), { ...e.env, IDEM_KEYS_FILE: keysFile });
  await svc.waitFor('/readyz', 200);
}, START_MS);

afterAll(async () => {
  await svc?.stop();
  await drop?.();
});

const stats = (secret: string) => svc.status('/v1/stats', { authorization: `Bearer ${secret}` });

it('SIGHUP reloads the keys file and the process keeps serving', { timeout: START_MS }, async () => {
  expect(await stats(oldSecret)).toBe(200);
  expect(await stats(newSecretValue)).toBe(401);

  writeFileSync(keysFile, JSON.stringify([key('after', newSecretValue)]));
  const reloads = () => svc.messages().filter((m) => m === 'API keys reloaded').length;
  svc.proc.kill('SIGHUP');
  await svc.waitForLine(/API keys reloaded/);
  expect(reloads()).toBe(1);

  expect(await stats(newSecretValue)).toBe(200);
  expect(await stats(oldSecret)).toBe(401);
  expect(svc.running, svc.tail()).toBe(true);
  expect(svc.messages()).not.toContain('shutting down: no new requests, finishing in-flight ones');
  expect(await svc.status('/readyz')).toBe(200);

  // A second rotation works the same: the handler is not a one-shot.
  writeFileSync(keysFile, JSON.stringify([key('again', oldSecret)]));
  svc.proc.kill('SIGHUP');
  await expect.poll(reloads, { timeout: 30_000 }).toBe(2);
  expect(await stats(oldSecret)).toBe(200);
  expect(svc.running).toBe(true);
});
