/**
 * A Prometheus histogram whose series are looked up once and then kept: the
 * HTTP latency histogram, observed on every request.
 *
 * prom-client's `Histogram.observe(labels, value)` checks the labels against
 * the label names, hashes them into a key, and finds the series by that key,
 * on every call. Measured in S8's open loop, the metrics' `onResponse` hook
 * (which did that for every request) was about 3.5% of the service process's
 * user CPU a begin + complete. Here `series(labels)` does that work once per
 * label set and returns the series; the caller keeps it (`http/app.ts` keeps
 * one per route, method and status) and `observe` is a bucket's increment. A
 * series made and never observed is not scraped, as with prom-client.
 *
 * It registers in a prom-client `Registry` like prom-client's own metrics and
 * hands the registry the same values in the same order (series in the order
 * of their first observation, each its cumulative buckets, `+Inf`, `_sum` and
 * `_count`), so a scrape reads byte for byte as prom-client's `Histogram` over
 * the same observations would (`test/ops/series-histogram.test.ts`).
 */
import type { Registry } from 'prom-client';

/** One series: one label set's buckets, sum and count. */
export class Series {
  /** Observations per bucket, not cumulative: `counts[i]` for values in (bounds[i-1], bounds[i]]. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(
    readonly labels: Readonly<Record<string, string>>,
    private readonly bounds: readonly number[],
    /** Puts the series in the scrape, after those observed before it (called on its first observation). */
    private readonly show: (s: Series) => void,
  ) {
    this.counts = new Float64Array(bounds.length);
  }

  observe(value: number): void {
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
    if (this.count === 0) this.show(this);
    const bounds = this.bounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]!) {
        this.counts[i]!++;
        break;
      }
    }
    this.sum += value;
    this.count += 1;
  }

  /** Back to no observations (and out of the scrape until the next). */
  clear(): void {
    this.counts.fill(0);
    this.sum = 0;
    this.count = 0;
  }
}

interface Value {
  labels: Record<string, string | number>;
  sharedLabels: Readonly<Record<string, string>>;
  value: number;
  metricName: string;
  /** As prom-client writes it: null on a bucket (no exemplars kept), absent on the sum and count. */
  exemplar?: null;
}

export interface SeriesHistogramOptions<L extends string> {
  name: string;
  help: string;
  labelNames: readonly L[];
  /** Upper bounds, ascending. */
  buckets: readonly number[];
  registers: Registry[];
}

export class SeriesHistogram<L extends string> {
  readonly name: string;
  readonly help: string;
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly labelNames: readonly L[];
  readonly #bounds: readonly number[];
  /** Every series made, by its label values (JSON of them in `labelNames` order). */
  readonly #series = new Map<string, Series>();
  /** The series observed since the start or the last reset, in the order of their first observation. */
  readonly #shown = new Set<Series>();

  constructor(o: SeriesHistogramOptions<L>) {
    this.name = o.name;
    this.help = o.help;
    this.labelNames = o.labelNames;
    this.#bounds = [...o.buckets];
    for (let i = 1; i < this.#bounds.length; i++) {
      if (!(this.#bounds[i]! > this.#bounds[i - 1]!)) throw new Error(`${o.name}: buckets must ascend`);
    }
    for (const r of o.registers) r.registerMetric(this as never);
  }

  /** The series of these label values (every label name, nothing else), made on first use. */
  series(labels: Readonly<Record<L, string>>): Series {
    const names = Object.keys(labels);
    if (
      names.length !== this.labelNames.length ||
      this.labelNames.some((n) => typeof labels[n] !== 'string')
    ) {
      throw new Error(`${this.name}: labels must be exactly ${this.labelNames.join(', ')}`);
    }
    const key = JSON.stringify(this.labelNames.map((n) => labels[n]));
    let s = this.#series.get(key);
    if (!s) {
      s = new Series({ ...labels }, this.#bounds, (x) => this.#shown.add(x));
      this.#series.set(key, s);
    }
    return s;
  }

  /** What prom-client's `Histogram.getForPromString` gives the registry for a scrape. */
  async getForPromString() {
    const bucket = `${this.name}_bucket`;
    const values: Value[] = [];
    for (const s of this.#shown) {
      let acc = 0;
      for (let i = 0; i < this.#bounds.length; i++) {
        acc += s.counts[i]!;
        const le = this.#bounds[i]!;
        values.push({
          labels: { le },
          sharedLabels: s.labels,
          value: acc,
          metricName: bucket,
          exemplar: null,
        });
      }
      values.push({
        labels: { le: '+Inf' },
        sharedLabels: s.labels,
        value: s.count,
        metricName: bucket,
        exemplar: null,
      });
      values.push({ labels: {}, sharedLabels: s.labels, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels: {}, sharedLabels: s.labels, value: s.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /** What prom-client's `Histogram.get` gives (`getMetricsAsJSON`): each value's labels with its series'. */
  async get() {
    const data = await this.getForPromString();
    return {
      ...data,
      values: data.values.map(({ labels, sharedLabels, ...rest }) => ({
        ...rest,
        labels: { ...labels, ...sharedLabels },
      })),
    };
  }

  /** As prom-client's: every series emptied and out of the scrape until observed again. */
  reset(): void {
    for (const s of this.#series.values()) s.clear();
    this.#shown.clear();
  }
}
