/**
 * The client half imports nothing from the server side: only the shared
 * contract, its own files (in any of its subfolders), and a short list of
 * packages. (Biome enforces the same with noRestrictedImports; this test also
 * catches dynamic imports and new dependencies.)
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const dir = fileURLToPath(new URL('../../src/client/', import.meta.url));
const contract = fileURLToPath(new URL('../../src/contract/index.js', import.meta.url));
const ALLOWED_PACKAGES = ['typebox', 'typebox/value', 'canonicalize', 'pino'];
// Imported for types only: erased at build time, never loaded by the client.
const TYPE_ONLY_PACKAGES = [
  '@modelcontextprotocol/sdk/client/index.js',
  '@modelcontextprotocol/sdk/types.js',
];

function imports(source: string): { spec: string; typeOnly: boolean }[] {
  const found: { spec: string; typeOnly: boolean }[] = [];
  const re =
    /(?:^|\n)\s*(import|export)\s+(type\s+)?[^'"]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;
  for (const m of source.matchAll(re)) {
    found.push({ spec: (m[3] ?? m[4]) as string, typeOnly: m[2] !== undefined });
  }
  return found;
}

/** Every .ts file under `root`, as paths relative to it (subfolders included). */
function sources(root: string): string[] {
  return readdirSync(root, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => f.split(sep).join('/'))
    .sort();
}

/** Whether a relative import of `file` stays inside src/client or is the contract's entry. */
function allowedRelative(file: string, spec: string): boolean {
  const target = resolve(dirname(join(dir, file)), spec);
  if (target === contract) return true;
  const inside = relative(dir, target);
  return !inside.startsWith('..') && !inside.startsWith(sep);
}

describe('src/client import boundary', () => {
  const files = sources(dir);

  it('has files to check in every subfolder, and the parser sees their imports', () => {
    expect(files).toContain('index.ts');
    for (const sub of ['ledger/', 'executor/', 'reconciler/', 'mcp/']) {
      expect(files.some((f) => f.startsWith(sub))).toBe(true);
    }
    const specs = imports(readFileSync(join(dir, 'mcp/mcp-adapter.ts'), 'utf8'));
    expect(specs).toContainEqual({ spec: '@modelcontextprotocol/sdk/client/index.js', typeOnly: true });
    expect(specs).toContainEqual({ spec: '../executor/tool-error.js', typeOnly: false });
    expect(imports("import pg from 'pg';\nconst x = await import('../db/database.js');")).toEqual([
      { spec: 'pg', typeOnly: false },
      { spec: '../db/database.js', typeOnly: false },
    ]);
  });

  it('tells a sibling subfolder from the server side', () => {
    expect(allowedRelative('executor/call-runner.ts', '../ledger/ledger-client.js')).toBe(true);
    expect(allowedRelative('executor/call-runner.ts', '../../contract/index.js')).toBe(true);
    expect(allowedRelative('executor/call-runner.ts', '../../ledger/begin.js')).toBe(false);
    expect(allowedRelative('executor/call-runner.ts', '../../contract/operation.js')).toBe(false);
    expect(allowedRelative('index.ts', '../ledger/begin.js')).toBe(false);
    expect(allowedRelative('index.ts', './ledger/ledger-client.js')).toBe(true);
  });

  it.each(files)('%s imports only the contract, its siblings and allowed packages', (file) => {
    for (const { spec, typeOnly } of imports(readFileSync(join(dir, file), 'utf8'))) {
      if (spec.startsWith('.') && allowedRelative(file, spec)) continue;
      if (spec.startsWith('node:')) continue;
      if (ALLOWED_PACKAGES.includes(spec)) continue;
      if (typeOnly && TYPE_ONLY_PACKAGES.includes(spec)) continue;
      expect.fail(`${file} imports ${typeOnly ? 'type ' : ''}${spec}`);
    }
  });
});
