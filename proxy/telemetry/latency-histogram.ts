/**
 * Command latency in fixed buckets, cheap enough for the hot path: observe() is a short scan over a
 * Float64Array and two additions, with no allocation. /metrics (metrics.ts) reads it at scrape time.
 */

/** Upper bounds in seconds: 100 µs to 10 s, the range between a local Redis and a node timing out. */
export const LATENCY_BUCKETS_SECONDS: readonly number[] = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];

const BOUNDS_MS = Float64Array.from(LATENCY_BUCKETS_SECONDS, (s) => s * 1000);

export class LatencyHistogram {
  /** counts[i]: observations in (bound[i-1], bound[i]]; the last one is above every bound (+Inf). */
  readonly counts = new Float64Array(BOUNDS_MS.length + 1);
  sumMs = 0;
  count = 0;

  observe(ms: number): void {
    let i = 0;
    while (i < BOUNDS_MS.length && ms > BOUNDS_MS[i]) i++;
    this.counts[i]++;
    this.sumMs += ms;
    this.count++;
  }

  reset(): void {
    this.counts.fill(0);
    this.sumMs = 0;
    this.count = 0;
  }

  /** Cumulative counts per bound, as Prometheus wants them; the last entry is +Inf (= count). */
  cumulative(): number[] {
    const out: number[] = [];
    let acc = 0;
    for (let i = 0; i < this.counts.length; i++) out.push((acc += this.counts[i]));
    return out;
  }
}
