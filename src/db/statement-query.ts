/**
 * How a hot-path `Statement` travels over node-postgres: a query object of
 * its own (node-postgres's "submittable" seam, the one pg-cursor uses) that
 * does per call only what the call needs.
 *
 * node-postgres's own `Query` asks the server to describe the result on every
 * execution (`Describe`), and then builds the row layout from that
 * description (33 columns for an operation) before the first row: measured,
 * about a sixth of the service's CPU for a replay. A statement's result shape
 * is fixed by its text (Postgres refuses to change a prepared statement's
 * result type), so the layout is learnt once, from the first execution's
 * description, and every later execution, on any connection, sends only
 * `Bind`, `Execute` and `Sync` (plus `Parse` the first time on a connection).
 *
 * Timestamps come back as epoch milliseconds (what `fromDb` made of them), by
 * the same rule as node-postgres's parser (fractions of a millisecond are
 * truncated); every other type uses node-postgres's parser for its type.
 */
import pg from 'pg';
import { bind, type Statement } from './statement.js';

/** The wire messages this query sends (node-postgres's `Connection`, which its types do not export). */
interface Wire {
  parsedStatements: Record<string, string>;
  submittedNamedStatements: Record<string, string>;
  stream: { cork?: () => void; uncork?: () => void };
  parse(m: { text: string; name?: string; types?: unknown[] }): void;
  bind(m: { portal: string; statement?: string; values: (string | null)[]; binary: boolean }): void;
  describe(m: { type: 'P'; name: string }): void;
  execute(m: { portal: string; rows?: number }): void;
  sync(): void;
  sendCopyFail(msg: string): void;
}

interface FieldDescription {
  name: string;
  dataTypeID: number;
}

type Parser = (text: string) => unknown;

interface Layout {
  parsers: readonly Parser[];
  /** Builds one row from a data row's fields (see `rowMaker`). */
  make: (fields: readonly (string | null)[], parsers: readonly Parser[]) => Record<string, unknown>;
}

const TIMESTAMPTZ = 1184;

/** The digits at `at` and `at + 1` as a number, or NaN when either is not a digit. */
function two(s: string, at: number): number {
  const a = s.charCodeAt(at) - 48;
  const b = s.charCodeAt(at + 1) - 48;
  return a >= 0 && a <= 9 && b >= 0 && b <= 9 ? a * 10 + b : Number.NaN;
}

/**
 * A timestamp as epoch milliseconds. The form a UTC session prints
 * (`YYYY-MM-DD HH:MM:SS[.f{1,6}]+00`, years 100 to 9999) is read here, by
 * character position (a regular expression cost about 0.4 µs a timestamp, six
 * to nine of them a row); any other (another time zone, BC, infinity, a year
 * of another width) goes to node-postgres's own parser, so the two agree on
 * every input, fractions of a millisecond truncated as there.
 */
export function timestampMs(text: string): number {
  const n = text.length;
  if (
    n >= 22 &&
    n <= 29 &&
    n !== 23 &&
    text.charCodeAt(4) === 45 && // -
    text.charCodeAt(7) === 45 &&
    text.charCodeAt(10) === 32 && // space
    text.charCodeAt(13) === 58 && // :
    text.charCodeAt(16) === 58 &&
    text.charCodeAt(n - 3) === 43 && // +00
    text.charCodeAt(n - 2) === 48 &&
    text.charCodeAt(n - 1) === 48 &&
    (n === 22 || text.charCodeAt(19) === 46) // .
  ) {
    const y = two(text, 0) * 100 + two(text, 2);
    let ms = 0;
    for (let i = 20, scale = 100; i < n - 3; i++, scale /= 10) {
      const d = text.charCodeAt(i) - 48;
      if (!(d >= 0 && d <= 9)) {
        ms = Number.NaN;
        break;
      }
      if (scale >= 1) ms += d * scale;
    }
    const t = Date.UTC(y, two(text, 5) - 1, two(text, 8), two(text, 11), two(text, 14), two(text, 17), ms);
    if (y >= 100 && !Number.isNaN(t)) return t;
  }
  const d = pg.types.getTypeParser(TIMESTAMPTZ, 'text')(text) as Date | number | null;
  return d instanceof Date ? d.getTime() : (d as number);
}

function parserFor(oid: number): Parser {
  return oid === TIMESTAMPTZ ? timestampMs : (pg.types.getTypeParser(oid, 'text') as Parser);
}

/** Learnt layouts, one per statement (its text fixes its result shape). */
const layouts = new WeakMap<Statement, Layout>();

/**
 * A function that builds a row of `names` as one object literal, so every row
 * of a statement has one shape from the start. Assigning 33 columns by
 * computed name, as node-postgres does, cost about 7 µs a row here against 2
 * for the literal (and left every later read of the row megamorphic). The
 * names are the statement's own column labels, each written as a JSON string
 * literal, so no label can be read as code.
 */
function rowMaker(names: readonly string[]): Layout['make'] {
  const props = names.map((n, i) => `${JSON.stringify(n)}: f[${i}] == null ? null : p[${i}](f[${i}])`);
  return new Function('f', 'p', `return {${props.join(', ')}};`) as Layout['make'];
}

function learn(st: Statement, fields: readonly FieldDescription[]): Layout {
  const layout = {
    parsers: fields.map((f) => parserFor(f.dataTypeID)),
    make: rowMaker(fields.map((f) => f.name)),
  };
  layouts.set(st, layout);
  return layout;
}

/** A bound value as the wire carries it: text, or null. Statements take text, numbers and booleans. */
function param(v: unknown): string | null {
  if (v === null) return null;
  switch (typeof v) {
    case 'string':
      return v;
    case 'number':
    case 'boolean':
    case 'bigint':
      return String(v);
    default:
      throw new TypeError(`a statement parameter must be text, a number or a boolean, not ${typeof v}`);
  }
}

type Callback = (err: Error | null, result?: { rows: Record<string, unknown>[] }) => void;

/** One execution of one statement. node-postgres calls the `handle*` methods as the answer arrives. */
class StatementQuery {
  readonly name: string | undefined;
  readonly text: string;
  callback: Callback | undefined;
  #layout: Layout | undefined;
  readonly #values: (string | null)[];
  readonly #rows: Record<string, unknown>[] = [];
  #failed: Error | undefined;

  constructor(
    readonly statement: Statement,
    values: Readonly<Record<string, unknown>>,
    named: boolean,
  ) {
    this.name = named ? statement.name : undefined;
    this.text = statement.text;
    this.#values = bind(statement, values).map(param);
    this.#layout = layouts.get(statement);
  }

  submit(connection: Wire): Error | null {
    const previous = this.name
      ? (connection.parsedStatements[this.name] ?? connection.submittedNamedStatements[this.name])
      : undefined;
    if (previous !== undefined && previous !== this.text) {
      return new Error(`prepared statement ${this.name} was used for a different text`);
    }
    this.#layout ??= layouts.get(this.statement);
    // One write for all messages (as node-postgres does).
    connection.stream.cork?.();
    try {
      if (previous === undefined) {
        connection.parse({ text: this.text, name: this.name });
        if (this.name) connection.submittedNamedStatements[this.name] = this.text;
      }
      connection.bind({ portal: '', statement: this.name, values: this.#values, binary: false });
      // The layout is known after the first execution: no description needed.
      if (!this.#layout) connection.describe({ type: 'P', name: '' });
      connection.execute({ portal: '' });
      connection.sync();
    } finally {
      connection.stream.uncork?.();
    }
    return null;
  }

  handleRowDescription(msg: { fields: FieldDescription[] }): void {
    this.#layout = learn(this.statement, msg.fields);
  }

  handleDataRow(msg: { fields: (string | null)[] }): void {
    const layout = this.#layout;
    if (!layout) {
      this.#failed = new Error(`statement ${this.statement.name}: a row arrived before its description`);
      return;
    }
    try {
      this.#rows.push(layout.make(msg.fields, layout.parsers));
    } catch (err) {
      this.#failed ??= err as Error;
    }
  }

  handleCommandComplete(): void {}

  handleEmptyQuery(): void {}

  handlePortalSuspended(): void {}

  handleCopyInResponse(connection: Wire): void {
    connection.sendCopyFail('not a copy');
  }

  handleCopyData(): void {}

  handleError(err: Error): void {
    const cb = this.callback;
    this.callback = undefined;
    cb?.(err);
  }

  handleReadyForQuery(): void {
    const cb = this.callback;
    this.callback = undefined;
    if (this.#failed) cb?.(this.#failed);
    else cb?.(null, { rows: this.#rows });
  }
}

/** Anything node-postgres can run a query on: a pool, a pooled client, a client. */
export type PgQueryable = pg.Pool | pg.PoolClient | pg.Client;

/** Runs `st` on `on` (a pool checks a client out for it) and returns its rows. */
export function runStatement<T>(
  on: PgQueryable,
  st: Statement,
  values: Readonly<Record<string, unknown>>,
  named: boolean,
): Promise<T[]> {
  let q: StatementQuery;
  try {
    q = new StatementQuery(st, values, named);
  } catch (err) {
    return Promise.reject(err);
  }
  // A pool answers through the callback it attaches (it releases its client there).
  if ('totalCount' in on) {
    return (on.query(q as never) as unknown as Promise<{ rows: T[] }>).then((r) => r.rows);
  }
  return new Promise<T[]>((resolve, reject) => {
    q.callback = (err, res) => (err ? reject(err) : resolve((res?.rows ?? []) as T[]));
    on.query(q as never);
  });
}
