/**
 * The stack floor's process: the HTTP floor's bare fastify routes, each
 * running the floor's own SQL (`STACK_FLOOR_SQL`, the least durable SQL for
 * a begin and for a complete) on a `pg` pool as one named prepared
 * statement, and answering with the service's captured answers. It is
 * what any Node service on this stack pays for the same requests and the
 * same durable work, with none of the ledger's rules: no fingerprint check,
 * no conflict handling, no coalescing. Env: `DATABASE_URL`, `POOL_MAX`,
 * `FLOOR_SCOPE`, `FLOOR_BODIES` (`{ begin, complete }`), `PORT`.
 */
import Fastify from 'fastify';
import pg from 'pg';
import { floorConstants, STACK_FLOOR_SQL } from './floor.js';

/** `:name` (not `::type`) to `$n`, each name bound once. */
function numbered(sql: string, values: Record<string, string>, name: string) {
  const names: string[] = [];
  const text = sql.replace(/(?<![:\w]):([a-z]\w*)/g, (_, n: string) => {
    if (!names.includes(n)) names.push(n);
    return `$${names.indexOf(n) + 1}`;
  });
  const fixed = names.map((n) => values[n]);
  const key = names.indexOf('key');
  const lease = names.indexOf('lease');
  return (k: string, l: string) => {
    const v = [...fixed];
    v[key] = k;
    v[lease] = l;
    return { name, text, values: v };
  };
}

const bodies = JSON.parse(process.env.FLOOR_BODIES ?? '{}') as { begin?: unknown; complete?: unknown };
const constants = floorConstants(process.env.FLOOR_SCOPE ?? '');
const begin = numbered(STACK_FLOOR_SQL.begin, constants, 'stack_floor_begin');
const complete = numbered(STACK_FLOOR_SQL.complete, constants, 'stack_floor_complete');
// As the service's pool (`createPgPool`): idle clients kept 30 s, no JIT, keep-alive.
const pool = new pg.Pool({
  connectionString: process.env.DATABASE_URL,
  max: Number(process.env.POOL_MAX ?? 17),
  idleTimeoutMillis: 30_000,
  application_name: 'idem-stack-floor',
  options: '-c jit=off',
  keepAlive: true,
});

type Body = { key?: string; leaseId?: string };
/** One row written, or the route fails loudly (500): a floor that skipped its work would flatter the service. */
async function one(q: { name: string; text: string; values: unknown[] }): Promise<void> {
  const r = await pool.query(q);
  if (r.rowCount !== 1) throw new Error(`${q.name}: ${r.rowCount} rows`);
}

const app = Fastify({ logger: false });
app.get('/readyz', async () => ({ ok: true }));
app.post<{ Body: Body }>('/v1/scopes/:scope/operations', async (req) => {
  await one(begin(String(req.body.key), String(req.body.leaseId)));
  return bodies.begin ?? {};
});
app.post<{ Body: Body; Params: { key: string } }>(
  '/v1/scopes/:scope/operations/:key/complete',
  async (req) => {
    await one(complete(req.params.key, String(req.body.leaseId)));
    return bodies.complete ?? {};
  },
);
await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT ?? 0) });
process.on('SIGTERM', () => {
  void app
    .close()
    .then(() => pool.end())
    .then(() => process.exit(0));
});
