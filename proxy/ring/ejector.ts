/**
 * twemproxy's auto_eject_hosts for ring mode: a node whose connections fail `failureLimit` times
 * in a row is taken out of the ring (its keys go to the next points, exactly where twemproxy sends
 * them, since the ring is rebuilt from the live nodes as twemproxy rebuilds it), and put back after
 * `retryTimeoutMs` with its count at 0 (nutcracker 0.5.0 zeroes it on ejection): it is taken out
 * again after `failureLimit` more failures. A successful connection resets the count. Requests
 * already sent to the node when it is ejected get its error.
 */
import { RingConfig } from '../../config/schema';
import { BackendPool } from '../backend/pool';
import { Placement } from '../../sharding/migration';
import { Ring } from '../../sharding/ring';
import { log } from '../telemetry/log';
import { RingRouter } from './router';

export class NodeEjector {
  private readonly failures = new Map<string, number>();
  private readonly ejected = new Set<number>();
  private readonly failureLimit: number;
  private readonly retryTimeoutMs: number;

  /** `at`: the ring with its Sentinel-managed nodes where their masters are now (sharding/master-addresses.ts). */
  constructor(
    private readonly ring: RingConfig,
    private readonly router: RingRouter,
    private readonly pool: BackendPool,
    private readonly at: (ring: RingConfig) => RingConfig = (r) => r,
  ) {
    this.failureLimit = ring.serverFailureLimit;
    this.retryTimeoutMs = ring.serverRetryTimeoutMs;
    pool.onConnectionLost((addr) => this.failed(addr));
    pool.onRetryFailed((addr) => this.failed(addr));
    pool.onConnectionReady((addr) => this.failures.delete(addr));
  }

  private failed(addr: string): void {
    // The node at `addr` now (a Sentinel master may have moved since the config was read).
    const from = this.router.placement.from;
    const index = from instanceof Ring ? from.nodes.findIndex((n) => n.addr === addr) : -1;
    if (index < 0 || this.ejected.has(index)) return;
    const count = (this.failures.get(addr) ?? 0) + 1;
    this.failures.set(addr, count);
    if (count < this.failureLimit) return;
    // The last live node stays: with none, every key would get an error anyway.
    if (this.ejected.size + 1 >= this.ring.nodes.length) return;
    this.ejected.add(index);
    const counters = this.pool.countersOf(addr);
    counters.ejects++;
    counters.ejectedAtUs = Date.now() * 1000;
    this.rebuild();
    log.warn({ node: addr, failures: count, retryInMs: this.retryTimeoutMs }, 'node ejected from the ring');
    // Unref'd: a pending retry never keeps a closing proxy alive.
    const timer = setTimeout(() => {
      this.ejected.delete(index);
      // failureLimit more failures eject it again, as in nutcracker (compared in ring-down-server.test.ts).
      this.failures.delete(addr);
      this.rebuild();
      log.info({ node: addr }, 'ejected node back in the ring, on trial');
    }, this.retryTimeoutMs);
    timer.unref();
  }

  private rebuild(): void {
    this.router.swap(Placement.fromConfig(this.at(this.ring), undefined, this.ejected));
  }
}
