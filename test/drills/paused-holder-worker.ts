/**
 * The first holder of drill F6, in its own process so the test can SIGSTOP
 * it: begins an idempotent write with a 2 s lease, dispatches, performs the
 * effect at the downstream, heartbeats every 250 ms from the begin on, and on
 * SIGUSR2 completes.
 * Each step is one JSON line on stdout.
 *
 * Env: IDEM_URL (a service replica), DOWNSTREAM_URL, KEY.
 */
import { randomUUID } from 'node:crypto';
import { ledger } from './support/raw-http.js';

const { IDEM_URL, DOWNSTREAM_URL, KEY } = process.env;
if (!IDEM_URL || !DOWNSTREAM_URL || !KEY) throw new Error('IDEM_URL, DOWNSTREAM_URL and KEY are required');
const key = KEY;
const api = ledger(() => IDEM_URL);
const say = (event: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(event)}\n`);
const leaseId = randomUUID();

const b = await api.begin({
  key,
  request: { document: 'doc-7', title: 'Quarterly report' },
  effect: 'idempotent_write',
  leaseMs: 2000,
  leaseId,
  dispatch: false,
  owner: 'holder-1',
});
if (b.status !== 201) {
  say({ event: 'failed', step: 'begin', status: b.status, raw: b.raw });
  process.exit(1);
}
// Heartbeat from the start: a 2 s lease leaves little slack on a busy machine.
const beat = async () => {
  const sentAt = Date.now();
  const h = await api
    .heartbeat(key, leaseId, 2000)
    .catch((err: Error) => ({ status: 0, body: { code: err.message } }));
  say({
    event: 'heartbeat',
    sentAt,
    at: Date.now(),
    status: h.status,
    code: h.body?.code,
    expiresAt: h.body?.lease?.expiresAt,
  });
};
void beat();
const heartbeats = setInterval(beat, 250);

const d = await api.dispatch(key, leaseId);
if (d.status !== 200) {
  say({ event: 'failed', step: 'dispatch', status: d.status, raw: d.raw });
  process.exit(1);
}
const attempt = b.body.lease.attempt as number;
const effect = await fetch(`${DOWNSTREAM_URL}/effects`, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ key, attempt, leaseId, worker: 'holder-1', value: { title: 'Quarterly report' } }),
});
if (effect.status !== 200) {
  say({ event: 'failed', step: 'effect', status: effect.status });
  process.exit(1);
}

process.on('SIGUSR2', async () => {
  clearInterval(heartbeats);
  const c = await api.complete(key, leaseId, 'succeeded', { by: 'holder-1', attempt });
  say({ event: 'complete', status: c.status, code: c.body?.code, raw: c.raw });
  process.exit(0);
});

say({ event: 'holding', pid: process.pid, attempt, lease: b.body.lease });
