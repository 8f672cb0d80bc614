/**
 * Percentiles of one run, and medians with their spread over runs.
 */

export interface LatencySummary {
  n: number;
  p50: number;
  p99: number;
  p999: number;
  mean: number;
  max: number;
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] as number;
}

export function summarize(samplesMs: number[]): LatencySummary {
  const s = Float64Array.from(samplesMs).sort();
  let sum = 0;
  for (const v of s) sum += v;
  return {
    n: s.length,
    p50: percentile(s, 50),
    p99: percentile(s, 99),
    p999: percentile(s, 99.9),
    mean: s.length ? sum / s.length : Number.NaN,
    max: s.length ? (s[s.length - 1] as number) : Number.NaN,
  };
}

/** A figure over runs: the median is quoted, min and max show the noise. */
export interface Spread {
  median: number;
  min: number;
  max: number;
  runs: number[];
}

export function spread(values: number[]): Spread {
  const finite = values.filter((v) => Number.isFinite(v));
  const s = [...finite].sort((a, b) => a - b);
  if (s.length === 0) return { median: Number.NaN, min: Number.NaN, max: Number.NaN, runs: values };
  const mid = Math.floor(s.length / 2);
  const median = s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
  return { median, min: s[0] as number, max: s[s.length - 1] as number, runs: values };
}

/** Relative width of the spread: (max - min) / median. */
export function relativeSpread(s: Spread): number {
  return s.median ? (s.max - s.min) / Math.abs(s.median) : Number.NaN;
}
