/**
 * `iso` (`src/ledger/operation.ts`) writes every timestamp of every answer. It
 * keeps each minute's text and writes the seconds on, so it must agree with
 * `Date.prototype.toISOString` on every instant a Date can hold: before 1970,
 * on minute and year boundaries, beyond year 9999 (`+010000-...`), and throw
 * where that throws.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { iso } from '../../src/ledger/operation.js';

const MAX = 8.64e15;

describe('iso', () => {
  it('writes any instant a Date can hold as toISOString does', () => {
    fc.assert(
      fc.property(fc.integer({ min: -MAX, max: MAX }), (ms) => {
        expect(iso(ms)).toBe(new Date(ms).toISOString());
      }),
      { numRuns: 20_000 },
    );
  });

  it('agrees around minute, year and range boundaries, and on repeats of a minute', () => {
    const edges = [
      0,
      -1,
      1,
      59_999,
      60_000,
      -60_000,
      -60_001,
      Date.UTC(2026, 11, 31, 23, 59, 59, 999),
      Date.UTC(2027, 0, 1),
      253_402_300_799_999,
      253_402_300_800_000,
      -62_167_219_200_000,
      -62_167_219_200_001,
      MAX,
      -MAX,
    ];
    for (const base of edges) {
      for (const ms of [base, base - 1, base + 1, base + 7, base - 1000]) {
        if (Math.abs(ms) > MAX) continue;
        expect(iso(ms)).toBe(new Date(ms).toISOString());
        expect(iso(ms)).toBe(new Date(ms).toISOString());
      }
    }
    // Many minutes in a row: the kept texts are dropped and made again.
    const now = Date.UTC(2026, 11, 6, 19, 41, 12, 345);
    for (let i = 0; i < 1000; i++)
      expect(iso(now + i * 61_001)).toBe(new Date(now + i * 61_001).toISOString());
  });

  it('passes null through, and fractions and the unrepresentable to Date', () => {
    expect(iso(null)).toBeNull();
    expect(iso(1.5)).toBe(new Date(1.5).toISOString());
    expect(() => iso(MAX + 1)).toThrow(RangeError);
    expect(() => iso(Number.NaN)).toThrow(RangeError);
  });
});
