import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { backoffCeiling, backoffDelay } from '../../src/client/index.js';

describe('backoff', () => {
  it('draws every delay in [0, min(cap, base * 2^(n-1))]', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 2000 }),
        fc.integer({ min: 1, max: 10_000 }),
        fc.integer({ min: 1, max: 60 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (baseMs, extra, retry, r) => {
          const capMs = baseMs + extra;
          const delay = backoffDelay(retry, { baseMs, capMs }, () => r);
          const ceiling = Math.min(capMs, baseMs * 2 ** (retry - 1));
          expect(backoffCeiling(retry, { baseMs, capMs })).toBe(ceiling);
          expect(delay).toBeGreaterThanOrEqual(0);
          expect(delay).toBeLessThanOrEqual(ceiling);
        },
      ),
    );
  });

  it('spans the whole range: full jitter, not equal jitter', () => {
    const options = { baseMs: 200, capMs: 8000 };
    expect(backoffDelay(3, options, () => 0)).toBe(0);
    expect(backoffDelay(3, options, () => 0.999999)).toBe(799);
    expect(backoffDelay(10, options, () => 0.999999)).toBe(7999);
  });

  it('honours a server floor but never the cap', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 100_000 }), fc.integer({ min: 1, max: 20 }), (floorMs, retry) => {
        const delay = backoffDelay(retry, { baseMs: 100, capMs: 5000 }, () => 0, floorMs);
        expect(delay).toBe(Math.min(5000, floorMs));
      }),
    );
  });
});
