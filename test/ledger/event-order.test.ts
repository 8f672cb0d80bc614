/**
 * The order of an operation's log (`src/ledger/sql/events.ts` `EVENT_ORDER`):
 * events list in the order they happened, and a new one is listed after every
 * older one, even when stamps tie. On the embedded engine they do: its clock
 * counts milliseconds, and consecutive statements often run inside one.
 *
 * Each case writes its events with chosen ids, the later ones smaller, so an
 * order that fell back to the id (the primary key's order, the stable sort's
 * input order) on a tie lists them backwards. The events of a case are written
 * back to back, with no read between them, and each case runs on many keys,
 * so that on the embedded engine some of them tie for certain.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { begin as ledgerBegin } from '../../src/ledger/begin.js';
import { acquire } from '../../src/ledger/sql/begin.js';
import { COMPLETE, runRelease } from '../../src/ledger/sql/lease-holder.js';
import { transition } from '../../src/ledger/sql/transition.js';
import { newOperation } from '../support/begin-input.js';
import { client, expireLease } from '../support/http.js';
import { createTestApp, type TestApp } from '../support/service.js';

const SCOPE = 'event-order';
const KEYS = 40;

let t: TestApp;
let api: ReturnType<typeof client>;

beforeAll(async () => {
  t = await createTestApp();
  api = client(t.app, SCOPE);
});
afterAll(async () => {
  await t?.close();
});

/** Event ids counting down from the top: each one sorts before every one made earlier. */
function descendingIds(): () => string {
  let n = 0xffffff;
  return () => `ffffffff-ffff-7fff-bfff-ffffff${(n--).toString(16).padStart(6, '0')}`;
}

/** A begin straight into the ledger: no HTTP between it and the next statement. */
async function begin(key: string, dispatch = true): Promise<string> {
  const r = await ledgerBegin(
    t.db,
    SCOPE,
    { key, request: { n: 1 }, effect: 'non_idempotent_write', dispatch },
    'test',
  );
  expect(r.body.outcome).toBe('acquired');
  return r.body.lease!.id;
}

/** A completion by a lease that is not the row's: refused, and recorded as `stale_completion_rejected`. */
const refusedComplete = (key: string, actor: string, eventId: string) =>
  transition(t.db, COMPLETE, {
    scope: SCOPE,
    key,
    leaseId: randomUUID(),
    status: 'succeeded',
    result: null,
    actor,
    eventId,
  });

async function log(key: string): Promise<{ type: string; actor: string; at: string }[]> {
  const r = await api.events(key);
  expect(r.status).toBe(200);
  return r.body.events;
}

/** Events are listed oldest first by their stamps too (to the millisecond the API shows). */
function expectDatedInOrder(events: { at: string }[]): void {
  const at = events.map((e) => Date.parse(e.at));
  expect(at).toEqual([...at].sort((a, b) => a - b));
}

describe('an operation log lists events in the order they happened, stamps tied or not', () => {
  it('refusals at one version, in the order they were made', async () => {
    for (let k = 0; k < KEYS; k++) {
      const key = `refusals/${k}/${randomUUID()}`;
      await begin(key);
      const id = descendingIds();
      const actors = Array.from({ length: 6 }, (_, i) => `caller-${i}`);
      for (const actor of actors) {
        const r = await refusedComplete(key, actor, id());
        expect(r.changed).toBe(false);
      }
      const events = await log(key);
      expect(events.map((e) => e.type)).toEqual([
        'created',
        ...actors.map(() => 'stale_completion_rejected'),
      ]);
      expect(events.slice(1).map((e) => e.actor)).toEqual(actors);
      expectDatedInOrder(events);
    }
  });

  it('the change that made a version, then the refusals while it was current', async () => {
    for (let k = 0; k < KEYS; k++) {
      const key = `change/${k}/${randomUUID()}`;
      const lease = await begin(key);
      // The release's id is the service's (a UUIDv7 of now); the refusal after it has the smallest there is.
      const released = await runRelease(t.db, { scope: SCOPE, key, leaseId: lease, actor: 'holder' });
      expect(released.changed).toBe(true);
      await refusedComplete(key, 'late', '00000000-0000-7000-8000-000000000000');
      const events = await log(key);
      expect(events.map((e) => e.type)).toEqual(['created', 'released', 'stale_completion_rejected']);
      expectDatedInOrder(events);
    }
  });

  it("a version's refusals, then its lapse, recorded by the change that follows", async () => {
    for (let k = 0; k < KEYS; k++) {
      const key = `lapse/${k}/${randomUUID()}`;
      await begin(key, false);
      await expireLease(t.db, SCOPE, key);
      // The refusal's id is the largest there is; the lapse's is derived from the operation's.
      await refusedComplete(key, 'late', 'ffffffff-ffff-7fff-bfff-ffffffffffff');
      // The take-over, straight after: its statement records the lapse, then its own change.
      const taken = await acquire(t.db, newOperation(SCOPE, key, { dispatch: false }));
      expect(taken.changed).toBe(true);
      const events = await log(key);
      expect(events.map((e) => e.type)).toEqual([
        'created',
        'stale_completion_rejected',
        'lease_expired',
        'acquired',
      ]);
      expectDatedInOrder(events);
    }
  });
});
