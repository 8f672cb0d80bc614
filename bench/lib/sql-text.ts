/**
 * Makes a rendered statement safe for a pgbench script without changing what
 * Postgres executes. pgbench takes every `:name` in a SQL command for a
 * variable, even inside a string literal (`'HH24:MI:SS'` would ask for `:MI`),
 * and reads a backslash outside quotes as a meta-command. So:
 *
 *   - comments are dropped (`-- rule A: ...` would be read the same way);
 *   - a literal with `:<name char>` is split after each colon and re-joined:
 *     `'HH24:MI'` becomes `('HH24:' || 'MI')`, the same text to Postgres;
 *   - a `;` or `\` outside literals is refused: it would cut the command.
 */

export interface PgbenchText {
  text: string;
  /** What was rewritten, for the report. */
  notes: string[];
}

const VARIABLE_LIKE = /:[A-Za-z0-9_]/;

export function pgbenchSafe(sql: string): PgbenchText {
  let out = '';
  const notes: string[] = [];
  let i = 0;
  while (i < sql.length) {
    const c = sql[i]!;
    const next = sql[i + 1];
    if (c === '-' && next === '-') {
      const end = sql.indexOf('\n', i);
      i = end === -1 ? sql.length : end;
      continue;
    }
    if (c === '/' && next === '*') {
      const end = sql.indexOf('*/', i + 2);
      if (end === -1) throw new Error('unterminated comment in a rendered statement');
      i = end + 2;
      out += ' ';
      continue;
    }
    if (c === '"') {
      const end = sql.indexOf('"', i + 1);
      if (end === -1) throw new Error('unterminated identifier in a rendered statement');
      out += sql.slice(i, end + 1);
      i = end + 1;
      continue;
    }
    if (c === "'") {
      let j = i + 1;
      while (j < sql.length && !(sql[j] === "'" && sql[j + 1] !== "'")) j += sql[j] === "'" ? 2 : 1;
      if (j >= sql.length) throw new Error('unterminated string literal in a rendered statement');
      const body = sql.slice(i + 1, j);
      if (VARIABLE_LIKE.test(body)) {
        const parts = body.split(/(?<=:)/);
        out += `(${parts.map((p) => `'${p}'`).join(' || ')})`;
        notes.push(`literal '${body}' split as ${parts.length} parts`);
      } else {
        out += `'${body}'`;
      }
      i = j + 1;
      continue;
    }
    if (c === ';') throw new Error('a rendered statement contains ";": pgbench would split it');
    if (c === '\\') throw new Error('a rendered statement contains "\\": pgbench would read a meta-command');
    out += c;
    i++;
  }
  return { text: out, notes };
}
