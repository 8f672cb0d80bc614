/**
 * Writes docs/sql/<name>.sql, every ledger statement as it is sent, from the
 * code. `--check` fails when a committed file is stale or missing; CI runs it.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { renderedStatements, renderFile } from '../src/ledger/sql/rendered.js';

const DIR = new URL('../docs/sql/', import.meta.url);
const wanted = new Map(renderedStatements().map((s) => [`${s.name}.sql`, renderFile(s)]));
const present = existsSync(DIR) ? readdirSync(DIR).filter((f) => f.endsWith('.sql')) : [];

if (process.argv.includes('--check')) {
  const stale = [...wanted].filter(
    ([f, text]) => !existsSync(new URL(f, DIR)) || readFileSync(new URL(f, DIR), 'utf8') !== text,
  );
  const extra = present.filter((f) => !wanted.has(f));
  if (stale.length || extra.length) {
    console.error(
      `docs/sql is stale (${[...stale.map(([f]) => f), ...extra].join(', ')}): run \`npm run sql-docs\` and commit the result`,
    );
    process.exit(1);
  }
  console.log(`docs/sql is current (${wanted.size} statements)`);
} else {
  mkdirSync(DIR, { recursive: true });
  for (const f of present) if (!wanted.has(f)) rmSync(new URL(f, DIR));
  for (const [f, text] of wanted) writeFileSync(new URL(f, DIR), text);
  console.log(`wrote ${wanted.size} files to docs/sql/`);
}
