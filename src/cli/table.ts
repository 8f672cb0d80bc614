/** Plain-text tables for the operator CLI. */

export function table(rows: Record<string, unknown>[], columns: string[]): string {
  const cell = (v: unknown) =>
    v === null || v === undefined ? '-' : typeof v === 'object' ? JSON.stringify(v) : String(v);
  const cells = rows.map((r) => columns.map((c) => cell(r[c])));
  const widths = columns.map((c, i) =>
    Math.min(60, Math.max(c.length, ...cells.map((row) => row[i]!.length))),
  );
  const line = (vals: string[]) =>
    vals
      .map((v, i) => (v.length > widths[i]! ? `${v.slice(0, widths[i]! - 1)}…` : v.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.toUpperCase())), ...cells.map(line)].join('\n');
}

/** `key: value` lines for one record. */
export function record(obj: Record<string, unknown>): string {
  const width = Math.max(...Object.keys(obj).map((k) => k.length));
  return Object.entries(obj)
    .map(
      ([k, v]) =>
        `${k.padEnd(width)}  ${v === null || v === undefined ? '-' : typeof v === 'object' ? JSON.stringify(v) : String(v)}`,
    )
    .join('\n');
}
