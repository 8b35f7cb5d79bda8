/**
 * This proxy's place in the fleet (fleet.ts): a connection to every node of ring A, named after the
 * proxy and its phase, renamed every FLEET_HEARTBEAT_MS and at once after a phase switch, and
 * closed on shutdown. A connection that fails is opened again at the next beat.
 */
import crypto from 'node:crypto';
import os from 'node:os';
import { BackendPool } from '../backend/pool';
import { BackendConnection } from '../backend/connection';
import { request } from '../backend/request';
import { RingRouter } from '../ring/router';
import { FLEET_HEARTBEAT_MS, ProxyRecord, connectionName, copiesField } from './fleet';
import { targetRefusalSummary } from './target-refusals';
import { sideFingerprint } from './side-fingerprint';

/** A proxy's id in the fleet (its change copier takes leases under it before it registers). */
export function newFleetId(): string {
  return `${os.hostname()}-${process.pid}-${crypto.randomBytes(3).toString('hex')}`;
}

export class FleetRegistration {
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  private readonly links = new Map<string, BackendConnection>();

  constructor(
    private readonly pool: BackendPool,
    private readonly ring: RingRouter,
    /** Where clients reach this proxy; an unspecified host (0.0.0.0, ::) is replaced by the host name. */
    private readonly listen: { host: string; port: number },
    private readonly version: string,
    /** What the target's rules refused through this proxy, by command (ProxyStats.targetRefusals). */
    private readonly targetRefusals: ReadonlyMap<string, number> = new Map(),
    /** Its change feeds' state (ProxyRecord.feeds). */
    private readonly feeds: () => string = () => '-',
    /** The nodes of side A whose copier it holds (ProxyRecord.copies). */
    private readonly copies: () => string[] = () => [],
    readonly id: string = newFleetId(),
    /** The config file it runs from, absolute (ProxyRecord.config), once known. */
    private readonly configFile: () => string | null = () => null,
  ) {}

  start(): void {
    this.ring.onSwap(() => this.beat());
    this.beat();
    this.timer = setInterval(() => this.beat(), FLEET_HEARTBEAT_MS);
    this.timer.unref();
  }

  beat(): void {
    if (this.stopped) return;
    const name = connectionName(this.record());
    for (const addr of this.nodes()) {
      let link = this.links.get(addr);
      if (link === undefined || link.isClosed) {
        link = this.pool.dedicated(addr, FLEET_HEARTBEAT_MS);
        this.links.set(addr, link);
      }
      request(link, ['CLIENT', 'SETNAME', name], FLEET_HEARTBEAT_MS).catch(() => undefined);
    }
  }

  /** A clean shutdown: the connections go, and with them this proxy's place in the fleet. */
  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearInterval(this.timer);
    for (const link of this.links.values()) link.close('proxy stopping');
  }

  record(): ProxyRecord {
    const host = this.listen.host === '0.0.0.0' || this.listen.host === '::' ? os.hostname() : this.listen.host;
    return { id: this.id, addr: `${host}:${this.listen.port}`, phase: this.ring.placement.phase ?? 'none', pid: process.pid, version: this.version, targetRefused: targetRefusalSummary(this.targetRefusals), feeds: this.feeds(), copies: copiesField(this.copies()), to: sideFingerprint(this.ring.placement.to), host: os.hostname(), config: this.configFile() ?? '-' };
  }

  /** Ring A's nodes: where every proxy of the ring and every `migrate` command look. */
  private nodes(): readonly string[] {
    return this.ring.placement.from.masters();
  }
}
