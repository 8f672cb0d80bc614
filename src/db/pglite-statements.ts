/**
 * How a hot-path `Statement` runs on the embedded engine: as a named prepared
 * statement of PGlite's one session, parsed and planned once per process.
 *
 * PGlite's `query()` sends every call unnamed: `Parse`, `Describe`, `Bind`,
 * `Describe`, `Execute` and `Sync`, each a separate call into the engine, and
 * Postgres parses and plans the whole text again each time. Measured on this
 * project's 2-core machine, in-process, one read by key: 1.16 ms through
 * `query()`, 0.08 ms as a named statement (`Bind`, `Describe`, `Execute` and
 * `Sync` in one call). The begin and the transitions are larger texts, so the
 * planning they skip is larger still.
 *
 * What stays exactly as `query()` does it, so that both paths answer the same
 * rows (and `IDEM_DB_PREPARED=false` switches to `query()`):
 * - both of PGlite's locks are taken, in `query()`'s order (its transaction
 *   lock, then its query lock), so a statement never runs inside a
 *   transaction someone else has open, nor between the messages of another
 *   query;
 * - parameters are serialized by the type Postgres inferred for each (learnt
 *   from `Describe` when the statement is prepared) with PGlite's serializers;
 * - rows are parsed by PGlite's own `parseResults` with its parsers;
 * - the data folder is synced after each statement (`execProtocol`'s
 *   default), as `query()` does outside a transaction.
 *
 * An error answers as `query()`'s does (a `DatabaseError` with its SQLSTATE
 * `code`); `Sync` travels in the same call, so the session is idle again
 * before the error is thrown.
 */
import { type PGlite, parse, protocol, type Transaction } from '@electric-sql/pglite';
import { bind, type Statement } from './statement.js';

const { serialize } = protocol;

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/**
 * Prepared statements per PGlite session: name -> the type Postgres inferred
 * for each parameter. Kept per instance, not per runner, so that two runners
 * on one instance never prepare a name twice (Postgres refuses that).
 */
const sessions = new WeakMap<PGlite, Map<string, readonly number[]>>();

/** Runs one statement with its values and answers its rows. */
export type PgliteRun = <T>(st: Statement, values: Readonly<Record<string, unknown>>) => Promise<T[]>;

/**
 * `Statement`s run as named prepared statements on one PGlite instance (which
 * this does not own). With `transaction`, they run inside that open
 * transaction (`idem/pg`'s `PgLedger` in a caller's transaction), as its
 * `query()` does: under PGlite's query lock only (the transaction holds the
 * other), not once it is over, and without syncing the data folder (its
 * commit does). A prepared statement outlives the transaction it was prepared
 * in, as Postgres keeps it for the session whatever the transaction's fate.
 */
export function pgliteStatements(client: PGlite, options: { transaction?: Transaction } = {}): PgliteRun {
  const tx = options.transaction;
  const exclusive = <T>(fn: () => Promise<T>): Promise<T> => {
    if (!tx) return client._runExclusiveTransaction(() => client._runExclusiveQuery(fn));
    if (tx.closed) return Promise.reject(new Error('Transaction is closed'));
    return client._runExclusiveQuery(fn);
  };
  const session = sessions.get(client) ?? new Map<string, readonly number[]>();
  sessions.set(client, session);

  async function prepare(st: Statement): Promise<readonly number[]> {
    const known = session.get(st.name);
    if (known) return known;
    const { messages } = await client.execProtocol(
      concat([
        serialize.parse({ name: st.name, text: st.text }),
        serialize.describe({ type: 'S', name: st.name }),
        serialize.sync(),
      ]),
      { syncToFs: false },
    );
    const types = parse.parseDescribeStatementResults(messages);
    if (types.length !== st.params.length) {
      throw new Error(
        `statement ${st.name}: ${types.length} parameter types for ${st.params.length} parameters`,
      );
    }
    session.set(st.name, types);
    return types;
  }

  return async function run<T>(st: Statement, values: Readonly<Record<string, unknown>>): Promise<T[]> {
    const args = bind(st, values);
    const send = async () => {
      const types = await prepare(st);
      const serialized = args.map((v, i) => {
        if (v === null || v === undefined) return null;
        const serializer = client.serializers[types[i] as number];
        return serializer ? serializer(v) : String(v);
      });
      return client.execProtocol(
        concat([
          serialize.bind({ statement: st.name, values: serialized }),
          serialize.describe({ type: 'P' }),
          serialize.execute({}),
          serialize.sync(),
        ]),
        { syncToFs: !tx },
      );
    };
    return exclusive(async () => {
      await client._checkReady();
      let answer: Awaited<ReturnType<typeof send>>;
      try {
        answer = await send();
      } catch (err) {
        // 26000: the session no longer has it (someone ran DEALLOCATE or DISCARD on
        // it). Prepared again on the next call; at once outside a transaction, where
        // nothing ran, but not inside one, which the error has aborted.
        if ((err as { code?: unknown }).code !== '26000') throw err;
        session.delete(st.name);
        if (tx) throw err;
        answer = await send();
      }
      const [result] = parse.parseResults(answer.messages, client.parsers);
      return (result?.rows ?? []) as T[];
    });
  };
}
