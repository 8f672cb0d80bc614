/**
 * The generators of drill F8's commands: which calls, on which keys, with
 * which parameters, how often. Weights favour the calls that meet on a key.
 */
import fc from 'fast-check';
import type { Effect } from '../../src/contract/index.js';
import {
  AdvanceCmd,
  type Cmd,
  GetCmd,
  HttpCmd,
  type LeasePick,
  SeqCmd,
  type Spec,
  SweepCmd,
} from './commands.js';
import { RESULTS } from './ledger-model.js';
import { RaceCmd, type WHEN } from './race.js';

const key = fc.constantFrom(0, 0, 1, 2);
const leasePick = fc.constantFrom<LeasePick>('current', 'current', 'current', 'stale', 'bogus');
const result = fc.integer({ min: 0, max: RESULTS.length - 1 });

const beginArb = (k: fc.Arbitrary<number>) =>
  fc.record({
    kind: fc.constant('begin' as const),
    k,
    variant: fc.constantFrom(0, 0, 0, 0, 1, 1, 4, 2, 3),
    effect: fc.constantFrom<Effect | undefined>(
      undefined,
      'read',
      'idempotent_write',
      'non_idempotent_write',
      'unclassified',
    ),
    dispatch: fc.constantFrom(true, true, false),
    requireApproval: fc.constantFrom(false, false, false, true),
    lease: fc.constantFrom<'none' | 'fresh' | LeasePick>('none', 'none', 'fresh', 'current', 'stale'),
  });
const holderArb = (kind: 'dispatch' | 'heartbeat' | 'release' | 'unknown', k: fc.Arbitrary<number>) =>
  fc.record({ kind: fc.constant(kind), k, lease: leasePick });
const completeArb = (k: fc.Arbitrary<number>, lease = leasePick) =>
  fc.record({
    kind: fc.constant('complete' as const),
    k,
    lease,
    status: fc.constantFrom('succeeded' as const, 'failed' as const),
    result,
  });
const approveArb = (k: fc.Arbitrary<number>) =>
  fc.record({
    kind: fc.constant('approve' as const),
    k,
    fp: fc.constantFrom('none' as const, 'right' as const, 'wrong' as const),
  });
const rejectArb = (k: fc.Arbitrary<number>) =>
  fc.record(
    {
      kind: fc.constant('reject' as const),
      k,
      withResult: fc.boolean(),
      note: fc.constantFrom(undefined, 'wrong customer'),
    },
    { requiredKeys: ['kind', 'k', 'withResult'] },
  );
const resolveArb = (k: fc.Arbitrary<number>) =>
  fc.record({
    kind: fc.constant('resolve' as const),
    k,
    status: fc.constantFrom('succeeded' as const, 'failed' as const, 'ready' as const),
    result,
    expected: fc.constantFrom('none' as const, 'right' as const, 'wrong' as const),
  });

const specArb = (k: fc.Arbitrary<number>): fc.Arbitrary<Spec> =>
  fc.oneof(
    { weight: 10, arbitrary: beginArb(k) },
    { weight: 2, arbitrary: holderArb('dispatch', k) },
    { weight: 1, arbitrary: holderArb('heartbeat', k) },
    { weight: 5, arbitrary: completeArb(k) },
    { weight: 2, arbitrary: holderArb('release', k) },
    { weight: 3, arbitrary: holderArb('unknown', k) },
    { weight: 2, arbitrary: approveArb(k) },
    { weight: 1, arbitrary: rejectArb(k) },
    { weight: 5, arbitrary: resolveArb(k) },
  );

const solo = [
  { weight: 31, arbitrary: specArb(key).map((s): Cmd => new HttpCmd(s)) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(key, fc.constantFrom('key' as const, 'id' as const, 'old-id' as const))
      .map(([k, by]): Cmd => new GetCmd(k, by)),
  },
  { weight: 5, arbitrary: key.map((k): Cmd => new AdvanceCmd(k)) },
  { weight: 1, arbitrary: fc.constant(null).map((): Cmd => new SweepCmd()) },
  { weight: 1, arbitrary: fc.oneof(key, fc.constant('all' as const)).map((k): Cmd => new SweepCmd(k)) },
];

/** The sequential property's commands. */
export const soloCommand: fc.Arbitrary<Cmd> = fc.oneof(...solo);

/** Races worth having often, on one key; and any two or three calls. */
const raceArb: fc.Arbitrary<Cmd> = key.chain((n) => {
  const k = fc.constant(n);
  const current = fc.constant<LeasePick>('current');
  const sweep = fc.constant('sweep' as const);
  const race = (when: keyof typeof WHEN, specs: fc.Arbitrary<(Spec | 'sweep')[]>) =>
    fc.tuple(specs, fc.boolean()).map(([s, share]): Cmd => new RaceCmd(s, share, when));
  return fc.oneof(
    race('any', fc.tuple(beginArb(k), beginArb(k))),
    race('resolvable', fc.tuple(completeArb(k, current), resolveArb(k))),
    race('resolvable', fc.tuple(holderArb('release', k), resolveArb(k))),
    race('resolvable', fc.tuple(completeArb(k, current), resolveArb(k), beginArb(k))),
    race('held', fc.tuple(completeArb(k, current), completeArb(k, current))),
    race('held', fc.tuple(holderArb('unknown', k), completeArb(k, current))),
    race('held', fc.tuple(completeArb(k, current), beginArb(k))),
    race('pending', fc.tuple(approveArb(k), rejectArb(k), beginArb(k))),
    race('lapsed', fc.tuple(sweep, fc.oneof(completeArb(k, current), resolveArb(k), beginArb(k)))),
    race(
      'any',
      fc.array(fc.oneof({ weight: 9, arbitrary: specArb(k) }, { weight: 1, arbitrary: sweep }), {
        minLength: 2,
        maxLength: 3,
      }),
    ),
  );
});

/** begin, then the holder says it cannot tell, or its lease runs out (rule A decides). */
const toOpen: fc.Arbitrary<Cmd> = key.chain((k) =>
  fc
    .tuple(
      beginArb(fc.constant(k)).map((s) => ({
        ...s,
        variant: 0,
        requireApproval: false,
        lease: 'none' as const,
      })),
      fc.constantFrom('unknown', 'advance', 'none'),
    )
    .map(([begin, then]): Cmd => {
      const next =
        then === 'unknown'
          ? [new HttpCmd({ kind: 'unknown', k, lease: 'current' })]
          : then === 'advance'
            ? [new AdvanceCmd(k)]
            : [];
      return new SeqCmd([new HttpCmd(begin), ...next]);
    }),
);

/** The scheduled property's commands: the same, and races of 2 or 3 calls on one key. */
export const racingCommand: fc.Arbitrary<Cmd> = fc.oneof(
  ...solo,
  { weight: 6, arbitrary: toOpen },
  { weight: 20, arbitrary: raceArb },
);
