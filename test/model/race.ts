/**
 * Races for the scheduled property of drill F8: several calls on one key at
 * once. Their starts are released in the order `fc.scheduler` picks, then they
 * run concurrently on the real database.
 */
import { randomUUID } from 'node:crypto';
import { type SweepResult, sweepOnce } from '../../src/ledger/sweeper.js';
import type { Reply } from '../support/http.js';
import { type Cmd, callOf, describeSpec, observe, type Spec, stats, tally } from './commands.js';
import {
  checkKey,
  cloneModel,
  commitKey,
  compareReply,
  fail,
  learn,
  type Model,
  type Real,
  readKey,
  requestOf,
  SWEEP,
  send,
} from './harness.js';
import { KEYS, lapseEvent, type OpModel, predict } from './ledger-model.js';

/** Preconditions of the races worth having often: the states where the calls meet. */
export const WHEN = {
  any: () => true,
  resolvable: (op: OpModel | undefined) =>
    op?.status === 'outcome_unknown' || (op?.status === 'in_progress' && op.leaseExpired),
  held: (op: OpModel | undefined) =>
    !!op?.leaseId &&
    (op.status === 'in_progress' || op.status === 'outcome_unknown' || op.status === 'ready'),
  pending: (op: OpModel | undefined) => op?.status === 'pending_approval',
  lapsed: (op: OpModel | undefined) => !!op?.unwritten,
};

function* orders(n: number, prefix: number[] = []): Generator<number[]> {
  if (prefix.length === n) yield prefix;
  for (let i = 0; i < n; i++) if (!prefix.includes(i)) yield* orders(n, [...prefix, i]);
}

/**
 * Several calls on one key at once, started in the order the scheduler picks
 * and running concurrently. The replies and the key's reads afterwards must be
 * those of SOME serial order of the calls (linearizability), and every
 * invariant must hold; which order won is not asked. `sweep` stands for a
 * sweeper pass racing the calls.
 */
export class RaceCmd implements Cmd {
  constructor(
    readonly specs: (Spec | 'sweep')[],
    readonly shareFreshLease: boolean,
    readonly when: keyof typeof WHEN = 'any',
  ) {}
  check = (m: Readonly<Model>) => WHEN[this.when](m.ops[this.key()]);
  key = () => (this.specs.find((s) => s !== 'sweep') as Spec | undefined)?.k ?? 0;
  async run(m: Model, r: Real): Promise<void> {
    stats.commands++;
    const k = this.key();
    const fresh = this.shareFreshLease ? randomUUID() : undefined;
    const calls = this.specs.map((s) => (s === 'sweep' ? s : callOf(s, m, fresh)));
    const started: number[] = [];
    const start = <T>(i: number, f: () => Promise<T>): Promise<T> => {
      const go = () => {
        started.push(i);
        return f();
      };
      return r.scheduler
        ? r.scheduler.schedule(Promise.resolve(), `start ${this.labels()[i]}`).then(go)
        : go();
    };
    const running = calls.map((c, i) =>
      start<Reply | SweepResult>(i, () => (c === 'sweep' ? sweepOnce(r.db, SWEEP) : send(r.api, c))),
    );
    await r.scheduler?.waitAll();
    const replies = await Promise.all(running);

    // Other keys meet only the sweeper, which writes their lapses.
    const swept = calls.includes('sweep');
    const otherEvents = m.ops.map((op) => (op && swept ? lapseEvent(op) : []));
    const read = await readKey(r, k);
    const tried: string[] = [];
    // The order the calls started in first: a race the database ordered otherwise is a real one.
    const all = [...orders(calls.length)].sort(
      (a, b) => Number(b.join() === started.join()) - Number(a.join() === started.join()),
    );
    for (const order of all) {
      // Each call in this order, under the prediction.
      const leaves: { mm: Model; events: string[]; changes: boolean }[] = [];
      let why: string[] = [];
      const walk = (mm: Model, pos: number, events: string[], changes: boolean): void => {
        if (pos === order.length) {
          leaves.push({ mm, events, changes });
          return;
        }
        const i = order[pos]!;
        const c = calls[i]!;
        const op = mm.ops[k];
        if (c === 'sweep') {
          const next = cloneModel(mm);
          next.ops[k] = op && { ...op, unwritten: false };
          walk(next, pos + 1, [...events, ...(op ? lapseEvent(op) : [])], changes);
          return;
        }
        const e = predict(op, c);
        const diff = compareReply(replies[i] as Reply, e, mm);
        if (diff.length) {
          if (!why.length) why = diff.map((x) => `${this.labels()[i]}: ${x}`);
          return;
        }
        const next = cloneModel(mm);
        learn(next, k, e, replies[i] as Reply);
        walk(next, pos + 1, [...events, ...e.events], changes || e.changes);
      };
      walk(cloneModel(m), 0, [], false);
      for (const { mm, events, changes } of leaves) {
        const d = checkKey(r, mm, k, read, { events, ordered: false, changes });
        if (d.length) {
          if (!why.length) why = d;
          continue;
        }
        const kinds = calls.map((c) => (c === 'sweep' ? c : c.kind)).join(' | ');
        const how = order.join() === started.join() ? 'start order' : 'ANOTHER order';
        tally(`race ${kinds} on ${m.ops[k]?.status ?? 'nothing'}: serial in ${how}`);
        Object.assign(m, mm);
        commitKey(r, k, read);
        if (swept) {
          m.ops = m.ops.map((op) => op && { ...op, unwritten: false });
          for (const other of KEYS.keys()) {
            if (other === k) continue;
            const want = { events: otherEvents[other]!, ordered: true, changes: false };
            await observe(r, m, other, want, { command: `${this}` });
          }
        }
        return;
      }
      tried.push(
        `order ${order.map((i) => this.labels()[i]).join(' then ')}:`,
        ...why.map((x) => `    ${x}`),
      );
    }
    fail(`${this}: no serial order of the calls explains the replies and the reads`, tried, {
      requests: calls.map((c) => (c === 'sweep' ? 'sweepOnce()' : requestOf(c))),
      replies: replies.map((x) => (typeof x === 'object' && 'raw' in x ? x.raw.slice(0, 400) : x)),
      model: m.ops[k] ?? 'no operation',
      read: read.get.raw,
      events: read.events.raw,
    });
  }
  labels = () => this.specs.map((s, i) => `#${i} ${s === 'sweep' ? 'sweep()' : describeSpec(s)}`);
  toString = () =>
    `race[${this.labels().join(' | ')}${this.shareFreshLease ? ' (one fresh lease id)' : ''}` +
    `${this.when === 'any' ? '' : ` when ${this.when}`}]`;
}
