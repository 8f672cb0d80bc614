/**
 * The HTTP latency histogram keeps its series instead of finding them by
 * their labels on every observation (`src/metrics/series-histogram.ts`). A
 * scrape must read byte for byte as prom-client's own `Histogram` over the same
 * observations (text and JSON), through resets, for any label values and any
 * values, bucket bounds included.
 */
import fc from 'fast-check';
import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { SeriesHistogram } from '../../src/metrics/series-histogram.js';

const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
const LABELS = ['method', 'route', 'status'] as const;
type Labels = Record<(typeof LABELS)[number], string>;

function pair() {
  const theirs = new Registry();
  const ours = new Registry();
  const options = {
    name: 'idem_http_request_duration_seconds',
    help: 'HTTP request latency',
    labelNames: LABELS,
  };
  const reference = new Histogram({ ...options, buckets: BUCKETS, registers: [theirs] });
  const histogram = new SeriesHistogram({ ...options, buckets: BUCKETS, registers: [ours] });
  return { theirs, ours, reference, histogram };
}

const labels = fc.record({
  method: fc.constantFrom('GET', 'POST', 'HEAD'),
  route: fc.oneof(
    fc.constantFrom('/v1/scopes/:scope/operations', 'unknown'),
    fc.string({ unit: 'grapheme' }),
  ),
  status: fc.constantFrom('200', '201', '404', '503'),
});
const value = fc.oneof(
  fc.constantFrom(0, ...BUCKETS, 5.000001, 1e9),
  fc.double({ min: -10, max: 10, noNaN: true, noDefaultInfinity: true }),
);
const step = fc.oneof(
  { weight: 20, arbitrary: fc.tuple(labels, value) },
  { weight: 1, arbitrary: fc.constant('reset' as const) },
);

describe('the HTTP latency histogram', () => {
  it("scrapes as prom-client's Histogram over the same observations", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { maxLength: 60 }), async (steps) => {
        const { theirs, ours, reference, histogram } = pair();
        for (const s of steps) {
          if (s === 'reset') {
            theirs.resetMetrics();
            ours.resetMetrics();
            continue;
          }
          const [l, v] = s as [Labels, number];
          reference.observe(l, v);
          histogram.series(l).observe(v);
        }
        expect(await ours.metrics()).toBe(await theirs.metrics());
        expect(await ours.getMetricsAsJSON()).toEqual(await theirs.getMetricsAsJSON());
      }),
      { numRuns: 300 },
    );
  });

  it('gives one series per label set, kept; one made and never observed is not scraped', async () => {
    const { ours, histogram } = pair();
    const a = histogram.series({ method: 'POST', route: '/r', status: '201' });
    expect(histogram.series({ status: '201', route: '/r', method: 'POST' })).toBe(a);
    histogram.series({ method: 'GET', route: '/r', status: '200' });
    expect(await ours.metrics()).not.toContain('method="GET"');
    a.observe(0.002);
    const text = await ours.metrics();
    expect(text).toContain(
      'idem_http_request_duration_seconds_bucket{le="0.0025",method="POST",route="/r",status="201"} 1',
    );
    expect(text).toContain(
      'idem_http_request_duration_seconds_count{method="POST",route="/r",status="201"} 1',
    );
  });

  it('refuses labels it does not have, a label left out, and values that are not numbers', () => {
    const { histogram } = pair();
    expect(() => histogram.series({ method: 'GET', route: '/r' } as Labels)).toThrow(/exactly/);
    expect(() => histogram.series({ method: 'GET', route: '/r', status: '200', x: 'y' } as Labels)).toThrow(
      /exactly/,
    );
    const s = histogram.series({ method: 'GET', route: '/r', status: '200' });
    expect(() => s.observe(Number.NaN)).toThrow(TypeError);
    expect(() => s.observe(Number.POSITIVE_INFINITY)).toThrow(TypeError);
    expect(s.count).toBe(0);
  });
});
