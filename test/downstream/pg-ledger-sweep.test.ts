/**
 * `PgLedger.sweep()`: the service's sweeper pass, for a database no Idem
 * service sweeps (docs/downstream.md). It writes due lapses, purges
 * operations past their retention, and analyzes a young ledger that has
 * grown (src/ledger/young-tables.ts).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LEDGER_TABLES } from '../../src/ledger/sql/statistics.js';
import { onCitus } from '../support/engine.js';
import { insertCompleted } from '../support/plans.js';
import { type PgLedgerFixture, pgLedgerFixture } from './support.js';

let f: PgLedgerFixture;
beforeAll(async () => {
  f = await pgLedgerFixture();
});
afterAll(() => f.close());

const SCOPE = 'sweep';
const statusOf = async (key: string) =>
  (
    await f.query<{ status: string }>('SELECT status FROM idem_operations WHERE scope = $1 AND key = $2', [
      SCOPE,
      key,
    ])
  )[0]?.status;

describe('PgLedger.sweep', () => {
  it('writes the lapse of an expired lease and purges what is past its retention', async () => {
    // A claim outside a transaction holds a lease in its own row, as the middleware's do.
    const held = `held-${randomUUID()}`;
    const claimed = await f.ledger.claim({
      scope: SCOPE,
      key: held,
      fingerprint: `sha256:${'0'.repeat(64)}`,
      effect: 'non_idempotent_write',
      leaseMs: 30_000,
      owner: 'test',
    });
    expect(claimed.kind).toBe('acquired');
    const done = `done-${randomUUID()}`;
    await f.ledger.once({ scope: SCOPE, key: done, request: { n: 1 } }, async () => ({ ok: true }));
    await f.query(
      `UPDATE idem_operations SET lease_expires_at = now() - interval '1 second' WHERE scope = $1 AND key = $2`,
      [SCOPE, held],
    );
    await f.query(
      `UPDATE idem_operations SET retained_until = now() - interval '1 second' WHERE scope = $1 AND key = $2`,
      [SCOPE, done],
    );

    const r = await f.ledger.sweep();
    expect(r).toMatchObject({ leaseExpired: 1, approvalExpired: 0, purged: 1, more: false });
    expect(await statusOf(held)).toBe('outcome_unknown');
    expect(await statusOf(done)).toBeUndefined();
    const events = await f.query<{ type: string; actor: string }>(
      `SELECT e.type, e.actor FROM idem_events e JOIN idem_operations o ON o.scope = e.scope AND o.id = e.operation_id
       WHERE o.scope = $1 AND o.key = $2 ORDER BY e.at, e.version`,
      [SCOPE, held],
    );
    expect(events).toEqual([
      { type: 'created', actor: 'note-service' },
      { type: 'lease_expired', actor: 'sweeper' },
    ]);

    // Nothing more is due: the next pass writes nothing.
    expect(await f.ledger.sweep()).toMatchObject({ leaseExpired: 0, approvalExpired: 0, purged: 0 });
  });

  it.skipIf(onCitus())(
    'analyzes a ledger analyzed nearly empty once it has grown, and then leaves it alone',
    async () => {
      for (const t of LEDGER_TABLES) await f.query(`ANALYZE ${t}`);
      await f.query(insertCompleted('sweep-young', 1, 3000));
      expect(await f.ledger.sweep()).toMatchObject({ analyzed: [...LEDGER_TABLES], notOwned: [] });
      expect(await f.ledger.sweep()).toMatchObject({ analyzed: [], notOwned: [] });
    },
  );
});
