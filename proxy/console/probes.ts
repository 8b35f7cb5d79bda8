/**
 * What the console must ask the nodes for: each node's health and round trip (PING), the fleet of a
 * migration (CLIENT LIST of side A), the history copy's progress and the keys side A holds. Asked at
 * most once a second whatever the number of pages open (every page request in that second shares
 * the answer), and only while a page asks: a proxy nobody watches sends nothing.
 */
import { ProxyContext } from '../context';
import { request } from '../backend/request';
import { decodeReply, errorText } from '../resp/decode-reply';
import { readCopyProgress, readLastVerify } from '../migration/copy-progress';
import type { VerifyRecord } from '../migration/tools/verify-record';
import { fleetOf } from '../migration/admin';
import { ProxyRecord } from '../migration/fleet';
import type { MigrationCopyProgress } from '../telemetry/metrics';
import { knownNodes } from './recorder';

const PROBE_TIMEOUT_MS = 1000;
const FRESH_MS = 1000;
/** Copy readings kept to measure its rate: the last ten seconds or so. */
const RATE_WINDOW = 10;

export interface NodeHealth {
  up: boolean;
  /** PING's round trip through the proxy's own connection (ms), or why it failed. */
  pingMs: number | null;
  error: string | null;
}

export interface CopyView extends MigrationCopyProgress {
  /** Keys on side A's nodes now (DBSIZE summed), null when a node did not answer. */
  keysOnA: number | null;
  /** Keys read per second, and copied per second, over the last readings; null before two. */
  scanRate: number | null;
  copyRate: number | null;
  /** Share of side A walked (0..1): done nodes whole, the others by keys read of the keys held. */
  fraction: number;
  /** At the current rate; null when unknown or finished. */
  secondsLeft: number | null;
}

export interface ProbeResults {
  at: number;
  health: Map<string, NodeHealth>;
  fleet: ProxyRecord[] | { error: string } | null;
  copy: CopyView | null;
  /** `migrate verify`'s last result, when one was saved on side A. */
  verify: VerifyRecord | null;
}

export class ConsoleProbes {
  private last: ProbeResults | null = null;
  private running: Promise<ProbeResults> | null = null;
  private readonly copyReadings: { at: number; scanned: number; copied: number }[] = [];

  constructor(private readonly ctx: ProxyContext) {}

  /** The results of at most a second ago, asking the nodes again when they are older. */
  read(): Promise<ProbeResults> {
    if (this.last !== null && Date.now() - this.last.at < FRESH_MS) return Promise.resolve(this.last);
    return (this.running ??= this.probe().finally(() => (this.running = null)));
  }

  private async probe(): Promise<ProbeResults> {
    const nodes = knownNodes(this.ctx);
    const placement = this.ctx.ring?.placement;
    const migrating = placement?.migrating === true;
    const [health, fleet, copy, verify] = await Promise.all([
      Promise.all(nodes.map(async (addr) => [addr, await this.ping(addr)] as const)),
      migrating && placement !== undefined ? fleetOf(this.ctx, placement).catch((err: Error) => ({ error: err.message })) : Promise.resolve(null),
      migrating ? this.readCopy() : Promise.resolve(null),
      migrating ? readLastVerify(this.ctx) : Promise.resolve(null),
    ]);
    this.last = { at: Date.now(), health: new Map(health), fleet, copy, verify };
    return this.last;
  }

  private async ping(addr: string): Promise<NodeHealth> {
    const started = process.hrtime.bigint();
    try {
      const reply = await request(this.ctx.pool.connection(addr, 0), ['PING'], PROBE_TIMEOUT_MS);
      const err = errorText(reply);
      if (err !== null) return { up: false, pingMs: null, error: err };
      return { up: true, pingMs: Number(process.hrtime.bigint() - started) / 1e6, error: null };
    } catch (err) {
      return { up: false, pingMs: null, error: err instanceof Error ? err.message : String(err) };
    }
  }

  private async readCopy(): Promise<CopyView | null> {
    const [progress, keysOnA] = await Promise.all([readCopyProgress(this.ctx), this.keysOnA()]);
    if (progress === null) return null;
    const now = Date.now();
    const readings = this.copyReadings;
    readings.push({ at: now, scanned: progress.scanned, copied: progress.copied });
    if (readings.length > RATE_WINDOW) readings.shift();
    const first = readings[0];
    const seconds = (now - first.at) / 1000;
    const rate = (key: 'scanned' | 'copied'): number | null => (readings.length < 2 || seconds <= 0 ? null : Math.max(0, (progress[key] - first[key]) / seconds));
    const scanRate = rate('scanned');
    const finished = progress.nodes > 0 && progress.nodesDone === progress.nodes;
    // A full sync's snapshots say how many keys they hold; the feeds' walk goes by what A holds now.
    const of = progress.total ?? keysOnA;
    const fraction = finished ? 1 : of === null || of === 0 ? progress.nodesDone / Math.max(progress.nodes, 1) : Math.min(progress.scanned / of, 0.999);
    const left = of === null ? null : Math.max(of - progress.scanned, 0);
    const secondsLeft = finished || left === null || scanRate === null || scanRate === 0 ? null : left / scanRate;
    return { ...progress, keysOnA, scanRate, copyRate: rate('copied'), fraction, secondsLeft };
  }

  private async keysOnA(): Promise<number | null> {
    const masters = this.ctx.ring?.placement.from.masters() ?? [];
    try {
      const sizes = await Promise.all(masters.map((addr) => request(this.ctx.pool.connection(addr, 0), ['DBSIZE'], PROBE_TIMEOUT_MS)));
      return sizes.reduce((sum, frame) => sum + (Number(decodeReply(frame)) || 0), 0);
    } catch {
      return null;
    }
  }
}
