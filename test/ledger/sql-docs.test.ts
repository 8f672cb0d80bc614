/**
 * docs/sql/*.sql is the exact SQL the ledger sends, rendered from the code:
 * a stale or missing file fails here as well as in CI's `npm run sql-docs:check`.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { renderedStatements, renderFile } from '../../src/ledger/sql/rendered.js';

const DIR = new URL('../../docs/sql/', import.meta.url);

describe('docs/sql', () => {
  const rendered = renderedStatements();

  it('has one file per statement, each exactly as the code renders it', () => {
    for (const s of rendered) {
      const file = new URL(`${s.name}.sql`, DIR);
      expect(existsSync(file), `${s.name}.sql`).toBe(true);
      expect(readFileSync(file, 'utf8'), `${s.name}.sql`).toBe(renderFile(s));
    }
    const names = new Set(rendered.map((s) => `${s.name}.sql`));
    expect(readdirSync(DIR).filter((f) => f.endsWith('.sql') && !names.has(f))).toEqual([]);
  });

  it('covers every hot-path statement, each with named parameters', () => {
    const names = rendered.map((s) => s.name);
    for (const hot of [
      'begin_insert',
      'acquire',
      'dispatch',
      'heartbeat',
      'complete',
      'release',
      'mark_unknown',
      'read_by_key',
      'read_by_id',
    ]) {
      expect(names).toContain(hot);
    }
    for (const s of rendered.filter((r) => r.sent.startsWith('named'))) {
      expect(s.params.length, s.name).toBeGreaterThan(0);
      // No VOLATILE function inside a write: ids are made by the service, and the
      // only clock_timestamp() is the events' recording stamp, read by their INSERT.
      expect(s.text, s.name).not.toMatch(/gen_random_uuid/);
      expect(s.text.replaceAll('stamp AS (SELECT clock_timestamp() AS at)', ''), s.name).not.toMatch(
        /clock_timestamp/,
      );
    }
  });
});
