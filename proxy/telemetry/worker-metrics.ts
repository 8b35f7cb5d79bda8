import { AggregatorRegistry, Registry } from 'prom-client';
import type { MetricsSource } from './metrics';

/**
 * With `--workers N` each worker has its own registry; the primary serves /metrics and sums the
 * workers' (prom-client's AggregatorRegistry asks them over the cluster IPC channel at scrape time).
 * A worker calls this instead of listening itself: workers share ports, so each scrape would
 * otherwise reach one worker at random.
 */
export function shareWithPrimary(registry: Registry): void {
  new AggregatorRegistry(); // installs the worker's answer to the primary's requests
  AggregatorRegistry.setRegistries([registry]);
}

/** The primary's source: every worker's metrics, summed (gauges too: clients, connections). */
export function workersMetrics(): MetricsSource {
  const aggregator = new AggregatorRegistry();
  return { metrics: () => aggregator.clusterMetrics(), contentType: aggregator.contentType };
}
