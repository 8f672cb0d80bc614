/**
 * The HTTP floor's process: a bare fastify route that answers every POST
 * with a fixed JSON body of the service's answer size (`FLOOR_BODIES`:
 * `{ begin, complete }`, the service's own answers captured by the bench),
 * without touching a database. It tells what the HTTP layer alone can do
 * on this machine, driven by the same load generator as the service.
 */
import Fastify from 'fastify';

const bodies = JSON.parse(process.env.FLOOR_BODIES ?? '{}') as { begin?: unknown; complete?: unknown };
const begin = bodies.begin ?? {};
const complete = bodies.complete ?? begin;

const app = Fastify({ logger: false });
app.get('/readyz', async () => ({ ok: true }));
app.post('/*', async (req) => (req.url.endsWith('/complete') ? complete : begin));
await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT ?? 0) });
process.on('SIGTERM', () => {
  void app.close().then(() => process.exit(0));
});
