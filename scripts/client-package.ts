/**
 * Emits `dist-client/`: the client half as a package of its own, `idem-client`,
 * for agent runtimes that talk to a ledger over HTTP and need none of the
 * server (PGlite, fastify, pg). Built from the same compiled files as `idem`
 * (`dist/client`, `dist/contract`; run `npm run build` first). Its dependencies
 * are exactly the packages those files import at run time, read from the
 * compiled JavaScript (type-only imports are gone by then), at the versions
 * `idem` itself pins. Usage: tsx scripts/client-package.ts [outDir]
 */
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = process.argv[2] ?? join(root, 'dist-client');
const main = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  version: string;
  license?: string;
  engines?: Record<string, string>;
  dependencies: Record<string, string>;
};
const PARTS = ['client', 'contract'];

function* jsFiles(dir: string): Generator<string> {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) yield* jsFiles(p);
    else if (e.name.endsWith('.js')) yield p;
  }
}

/** The packages a compiled file imports at run time (`import ... from 'x'`, `import('x')`). */
function runtimeImports(file: string): string[] {
  // Comments may quote example code (`from 'idem/client'`): only code counts.
  const text = readFileSync(file, 'utf8')
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/^\s*\/\/.*$/gm, '');
  const specs = [...text.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)['"]([^'"]+)['"]/g)].map((m) => m[1]!);
  return specs
    .filter((s) => !s.startsWith('.') && !s.startsWith('node:') && !builtinModules.includes(s))
    .map((s) => (s.startsWith('@') ? s.split('/').slice(0, 2).join('/') : s.split('/')[0]!));
}

for (const part of PARTS) {
  if (!existsSync(join(root, 'dist', part, 'index.js'))) {
    throw new Error(`dist/${part} is missing: run npm run build first`);
  }
}
const deps = new Set<string>();
for (const part of PARTS)
  for (const f of jsFiles(join(root, 'dist', part))) for (const d of runtimeImports(f)) deps.add(d);
const dependencies = Object.fromEntries(
  [...deps].sort().map((d) => {
    const v = main.dependencies[d];
    if (!v) throw new Error(`the client imports ${d}, which is not a dependency of idem`);
    return [d, v];
  }),
);

rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, 'dist'), { recursive: true });
for (const part of PARTS) cpSync(join(root, 'dist', part), join(out, 'dist', part), { recursive: true });
cpSync(join(root, 'docs', 'executor.md'), join(out, 'README.md'));
if (existsSync(join(root, 'LICENSE'))) cpSync(join(root, 'LICENSE'), join(out, 'LICENSE'));

const mcp = '@modelcontextprotocol/sdk';
const pkg = {
  name: 'idem-client',
  version: main.version,
  description:
    'The tool executor, ledger client and reconciler of Idem, without the server: talks to an Idem ledger over HTTP',
  type: 'module',
  license: main.license,
  engines: main.engines,
  exports: {
    '.': { types: './dist/client/index.d.ts', import: './dist/client/index.js' },
    './contract': { types: './dist/contract/index.d.ts', import: './dist/contract/index.js' },
  },
  files: ['dist'],
  dependencies,
  // The MCP adapter only names the SDK's types: needed by those who use mcpTools(), by nobody else.
  peerDependencies: { [mcp]: main.dependencies[mcp] ? `^${main.dependencies[mcp]}` : '*' },
  peerDependenciesMeta: { [mcp]: { optional: true } },
};
writeFileSync(join(out, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
console.log(
  `${out}: idem-client ${pkg.version}, dependencies ${Object.keys(dependencies).join(', ') || 'none'}`,
);
