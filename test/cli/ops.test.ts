/**
 * The operator CLI as a person uses it: `idem ops ...` as a child process
 * against a real service, its output read as text and pasted back through a
 * real shell.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiKey, hashSecret, newSecret } from '../../src/auth/keys.js';
import { freePort, ROOT } from '../process/support.js';
import { type RunningService, startService } from '../support/service.js';

const run = promisify(execFile);
/** Spawning tsx on a shared machine: headroom, not a timing assertion. */
const CLI_MS = 60_000;

const operator = newSecret();
const agent = newSecret();
const keys: ApiKey[] = [
  { name: 'cli-operator', role: 'operator', scopes: ['*'], sha256: hashSecret(operator) },
  { name: 'cli-agent', role: 'client', scopes: ['*'], sha256: hashSecret(agent) },
];

let svc: RunningService;
beforeAll(async () => {
  svc = await startService({ keys });
}, 180_000);
afterAll(() => svc?.close());

const CLI = `node --import tsx src/cli.ts`;

/** `idem` with its arguments given as one shell command line, as a person types or pastes it. */
async function idem(line: string, url = svc.url): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run('sh', ['-c', `${CLI} ${line}`], {
      cwd: ROOT,
      env: { ...process.env, NODE_OPTIONS: '', IDEM_URL: url, IDEM_API_KEY: operator },
    });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** A call waiting for approval, begun as an agent runtime would. */
async function pending(scope: string, key: string, extra: Record<string, unknown>) {
  const r = await fetch(`${svc.url}/v1/scopes/${scope}/operations`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${agent}` },
    body: JSON.stringify({ key, requireApproval: true, ...extra }),
  });
  expect(r.status).toBe(202);
}

const status = async (scope: string, key: string) => {
  const r = await fetch(`${svc.url}/v1/scopes/${scope}/operations/${encodeURIComponent(key)}`, {
    headers: { authorization: `Bearer ${operator}` },
  });
  return ((await r.json()) as { operation: { status: string } }).operation.status;
};

/** The value printed on the `field` line of `ops show`, exactly as printed. */
const shown = (stdout: string, field: string) =>
  stdout
    .split('\n')
    .find((l) => l.startsWith(`${field} `))
    ?.slice(field.length)
    .trim();

describe('ops show -> ops approve', () => {
  for (const [what, body] of [
    ['a sha256 fingerprint', { request: { orderId: 'ORD-7', amount: 30 } }],
    ['a client fingerprint with spaces, quotes and $', { fingerprint: `v2 order's "7" $HOME \\ *` }],
  ] as const) {
    it(`${what} pastes into --fingerprint as printed`, { timeout: CLI_MS }, async () => {
      const scope = 'cli';
      const key = `s/${randomUUID().slice(0, 8)}/call-1`;
      await pending(scope, key, body);
      const show = await idem(`ops show ${scope} ${key}`);
      expect(show.code, show.stderr).toBe(0);
      const fingerprint = shown(show.stdout, 'fingerprint');
      expect(fingerprint).toBeDefined();

      const approve = await idem(`ops approve ${scope} ${key} --fingerprint ${fingerprint} --note ok`);
      expect(approve.code, approve.stderr).toBe(0);
      expect(approve.stdout).toContain(`approved: ${scope}/${key} is ready`);
      expect(await status(scope, key)).toBe('ready');
    });
  }

  it('prints the approve command for a pending call, ready to paste', { timeout: CLI_MS }, async () => {
    const key = `s/${randomUUID().slice(0, 8)}/call 2`;
    await pending('cli', key, { fingerprint: "it's mine" });
    const show = await idem(`ops show cli '${key}'`);
    const line = show.stdout.split('\n').find((l) => l.trim().startsWith('idem ops approve'));
    expect(line, show.stdout).toBeDefined();
    const approve = await idem(line!.trim().replace(/^idem /, ''));
    expect(approve.code, approve.stderr).toBe(0);
    expect(await status('cli', key)).toBe('ready');
  });

  it('approve without --fingerprint asks for --force, and changes nothing', { timeout: CLI_MS }, async () => {
    const key = `s/${randomUUID().slice(0, 8)}/call-3`;
    await pending('cli', key, { request: { a: 1 } });
    const bare = await idem(`ops approve cli ${key}`);
    expect(bare.code).toBe(2);
    expect(bare.stderr.trim().split('\n')).toHaveLength(1);
    expect(bare.stderr).toContain('--force');
    expect(await status('cli', key)).toBe('pending_approval');

    const forced = await idem(`ops approve cli ${key} --force`);
    expect(forced.code, forced.stderr).toBe(0);
    expect(await status('cli', key)).toBe('ready');
  });
});

it('ops list shows the tool, the age and the preview', { timeout: CLI_MS }, async () => {
  const scope = `cli-list-${randomUUID().slice(0, 6)}`;
  await pending(scope, 's/1/call-1', {
    request: { title: 'Printer on fire' },
    metadata: { tool: 'create_ticket', preview: { title: 'Printer on fire', priority: 'high' } },
  });
  const list = await idem(`ops list --scope ${scope}`);
  expect(list.code, list.stderr).toBe(0);
  const [header, row, ...rest] = list.stdout.trim().split('\n');
  expect(rest).toEqual([]);
  const columns = header!.split(/\s{2,}/);
  for (const c of ['TOOL', 'AGE', 'PREVIEW']) expect(columns).toContain(c);
  const cells = row!.split(/\s{2,}/);
  expect(cells[columns.indexOf('TOOL')]).toBe('create_ticket');
  expect(cells[columns.indexOf('AGE')]).toMatch(/^\d+(s|m\d+s)$/);
  expect(cells[columns.indexOf('PREVIEW')]).toContain('Printer on fire');
});

it('an unreachable ledger is one line naming its URL, exit 1, no stack', { timeout: CLI_MS }, async () => {
  const url = `http://127.0.0.1:${await freePort()}`;
  const r = await idem('ops list', url);
  expect(r.code).toBe(1);
  const lines = r.stderr.trim().split('\n');
  expect(lines, r.stderr).toHaveLength(1);
  expect(lines[0]).toContain(url);
  expect(lines[0]).toMatch(/^idem: cannot reach the ledger at /);
});
