/**
 * The one rule for every value of every body, query string and path
 * parameter, applied after the schema and before any handler sees it.
 *
 * Text (member names included): no U+0000 and well-formed Unicode (no lone
 * surrogates). Postgres cannot store either faithfully (`text` and `jsonb`
 * refuse NUL; a lone surrogate is not UTF-8 and would be stored as U+FFFD), so
 * such text is refused with 400 naming the top-level field, never silently
 * changed. Keys and scopes keep their own, stricter, patterns on top of this.
 *
 * Numbers: finite. `1e400` parses as Infinity, and Ajv's coercion of a query
 * string turns "1e400" into Infinity past `maximum` even with `strictNumbers`.
 */

/** Why a string breaks the rule, or undefined when it is storable as is. */
export function textProblem(s: string): string | undefined {
  if (s.includes('\u0000')) return 'text may not contain NUL (U+0000)';
  if (!s.isWellFormed()) return 'text may not contain lone surrogates (not valid Unicode)';
  return undefined;
}

/**
 * The first top-level member of `data` holding a value that breaks the rule.
 * Iterative, so a deeply nested value (refused later for its depth) cannot
 * exhaust the stack here.
 */
export function findBadValue(data: unknown): { field: string; reason: string } | undefined {
  if (data === null || typeof data !== 'object') return undefined;
  for (const [field, value] of Object.entries(data as Record<string, unknown>)) {
    const top = textProblem(field);
    if (top) return { field: '', reason: top };
    const stack: unknown[] = [value];
    while (stack.length > 0) {
      const v = stack.pop();
      if (typeof v === 'string') {
        const reason = textProblem(v);
        if (reason) return { field, reason };
      } else if (typeof v === 'number') {
        if (!Number.isFinite(v)) return { field, reason: 'numbers must be finite' };
      } else if (Array.isArray(v)) {
        for (const item of v) stack.push(item);
      } else if (v !== null && typeof v === 'object') {
        for (const [name, item] of Object.entries(v as Record<string, unknown>)) {
          const reason = textProblem(name);
          if (reason) return { field, reason: `member names: ${reason}` };
          stack.push(item);
        }
      }
    }
  }
  return undefined;
}
