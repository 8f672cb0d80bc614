/**
 * The client half imports nothing from the server side: only the shared
 * contract, its own files, and a short list of packages. (Biome enforces the
 * same with noRestrictedImports; this test also catches dynamic imports and
 * new dependencies.)
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const dir = fileURLToPath(new URL('../../src/client/', import.meta.url));
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

describe('src/client import boundary', () => {
  const files = readdirSync(dir).filter((f) => f.endsWith('.ts'));

  it('has files to check, and the parser sees their imports', () => {
    expect(files).toContain('index.ts');
    const specs = imports(readFileSync(`${dir}mcp-adapter.ts`, 'utf8'));
    expect(specs).toContainEqual({ spec: '@modelcontextprotocol/sdk/client/index.js', typeOnly: true });
    expect(specs).toContainEqual({ spec: './tool-error.js', typeOnly: false });
    expect(imports("import pg from 'pg';\nconst x = await import('../db/database.js');")).toEqual([
      { spec: 'pg', typeOnly: false },
      { spec: '../db/database.js', typeOnly: false },
    ]);
  });

  it.each(files)('%s imports only the contract, its siblings and allowed packages', (file) => {
    for (const { spec, typeOnly } of imports(readFileSync(dir + file, 'utf8'))) {
      if (spec.startsWith('./')) continue;
      if (spec === '../contract/index.js') continue;
      if (spec.startsWith('node:')) continue;
      if (ALLOWED_PACKAGES.includes(spec)) continue;
      if (typeOnly && TYPE_ONLY_PACKAGES.includes(spec)) continue;
      expect.fail(`${file} imports ${typeOnly ? 'type ' : ''}${spec}`);
    }
  });
});
