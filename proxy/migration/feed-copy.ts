/**
 * How the change copier (change-copier.ts) copies the keys a node's feed named: each key that
 * moves, with the versioned SNAPSHOT/APPLY of converge.ts, the snapshot taken "only if changed"
 * (one script per node and bookkeeping on A, as few APPLY scripts as B allows), or forced (a retry,
 * a key a re-walk found on side B). A key whose copy failed goes back to the copier. scanNode walks
 * a node for a re-walk.
 */
import { ProxyContext } from '../context';
import { RingRouter } from '../ring/router';
import { SlotOwners } from '../../sharding/key-space';
import { Snapshot, applyCommand, parseApply, parseSnapshot, parseSnapshotsIfChanged, snapshotChangedCommand, snapshotCommand } from './converge';
import { CopyTarget, movingTargets } from './copy-keys';
import { ChangeCounts, NodeChanges, Pending, groupByBookkeeping } from './node-changes';
import { migrationScript } from './side-request';
import { applyBurst } from './apply-burst';
import { request } from '../backend/request';
import { decodeReply } from '../resp/decode-reply';

/** The shared lane the copier's own requests use. */
const LANE = 0;
const SCAN_COUNT = '500';

export class FeedKeyCopy {
  constructor(
    private readonly ctx: ProxyContext,
    private readonly ring: RingRouter,
    private readonly count: ChangeCounts,
    private readonly failed: (node: NodeChanges, t: CopyTarget, err: unknown) => void,
  ) {}

  /**
   * Copies the keys that move; a failed one is kept and tried again, forcibly (its snapshot was
   * taken). `fromFeed`: a batch of the feed's pending keys, each named once; with `ifChanged` false
   * every key is snapshotted, changed or not.
   */
  async copy(node: NodeChanges, batch: readonly Pending[], { ifChanged = true, fromFeed = false } = {}): Promise<void> {
    const placement = this.ring.placement;
    // On a ring A, a key changed on a node that does not own it in A is side B's write there (an
    // APPLY, when the rings share nodes): nothing to copy. (A cluster A's map may lag a reshard.)
    const targets = movingTargets(placement, batch.map((p) => p.key), node.address, fromFeed);
    if (!batch.some((p) => p.force)) {
      await Promise.all(groupByBookkeeping(targets).map((g) => this.copyChanged(node, g, ifChanged)));
      return;
    }
    const force = new Set(batch.filter((p) => p.force).map((p) => p.key.toString('latin1')));
    const forced = targets.filter((t) => force.has(t.key.toString('latin1')));
    const groups = groupByBookkeeping(targets.filter((t) => !force.has(t.key.toString('latin1'))));
    await Promise.all([...forced.map((t) => this.copyOne(node, t)), ...groups.map((g) => this.copyChanged(node, g, ifChanged))]);
  }

  /** Keys sharing a node and their bookkeeping: one script on A snapshots those that changed (all of them, without `ifChanged`). */
  private async copyChanged(node: NodeChanges, group: readonly CopyTarget[], ifChanged: boolean): Promise<void> {
    const t0 = group[0];
    let snaps: (Snapshot | null)[];
    try {
      snaps = parseSnapshotsIfChanged(await this.script(t0.fromOwners, t0.from, (sha) => snapshotChangedCommand(group.map((t) => t.key), sha, t0.fromBook, ifChanged)), group.length);
    } catch (err) {
      // Unknown whether any snapshot was taken: the keys are tried again, forcibly.
      for (const t of group) this.failed(node, t, err);
      return;
    }
    const targets: CopyTarget[] = [];
    const changed: Snapshot[] = [];
    snaps.forEach((snap, i) => {
      if (snap === null) return;
      targets.push(group[i]);
      changed.push(snap);
    });
    this.count.unchanged += group.length - changed.length;
    if (node.failed.size > 0) for (const t of group) node.failed.delete(t.key.toString('latin1'));
    // As few APPLY scripts as B allows (apply-burst.ts: one per ring node; on a cluster B one per
    // node for keys of any of its slots, per slot when that fails). A script's keys share a slot,
    // so they land on B together, or all meet the fence.
    if (changed.length === 0) return;
    const outcomes = await applyBurst(this.ctx, targets, changed, LANE);
    outcomes.forEach((outcome, i) => {
      if (outcome instanceof Error) return this.failed(node, targets[i], outcome);
      if (outcome.kind === 'applied') this.count.copied++;
      else if (outcome.kind === 'fenced' && outcome.version < changed[i].version) this.count.missedAfterFence++;
    });
  }

  /** One key, snapshot forced (a retry, or a key found on side B by a re-walk). */
  private async copyOne(node: NodeChanges, t: CopyTarget): Promise<void> {
    let snap: Snapshot;
    try {
      snap = parseSnapshot(await this.script(t.fromOwners, t.from, (sha) => snapshotCommand(t.key, sha, t.fromBook)));
    } catch (err) {
      return this.failed(node, t, err);
    }
    await this.applyOne(node, t, snap);
  }

  /** `snap` (null: unchanged, nothing to send) applied on the key's owner in B. */
  private async applyOne(node: NodeChanges, t: CopyTarget, snap: Snapshot | null): Promise<void> {
    const id = t.key.toString('latin1');
    try {
      if (snap === null) this.count.unchanged++;
      else {
        const outcome = parseApply(await this.script(t.toOwners, t.to, (sha) => applyCommand(t.key, snap, sha, t.toBook)));
        if (outcome.kind === 'applied') this.count.copied++;
        else if (outcome.kind === 'fenced' && outcome.version < snap.version) this.count.missedAfterFence++;
      }
      node.failed.delete(id);
    } catch (err) {
      // The snapshot is taken (and its fingerprint kept): only a forced one carries this state now.
      this.failed(node, t, err);
    }
  }

  /** A migration script by SHA1; by body where the node does not hold it (a restart, a failover). */
  private script(owners: SlotOwners | null, address: string, command: (bySha: boolean) => (Buffer | string)[]): Promise<Buffer> {
    return migrationScript(this.ctx, owners, address, command, LANE);
  }
}

/** Every key of one node, a SCAN batch at a time (a re-walk, change-copier.ts). */
export async function scanNode(ctx: ProxyContext, address: string, each: (keys: Buffer[]) => Promise<void>): Promise<void> {
  let cursor = '0';
  do {
    const reply = decodeReply(await request(ctx.pool.connection(address, LANE), ['SCAN', cursor, 'COUNT', SCAN_COUNT], ctx.forward.retryWindowMs), true);
    if (!Array.isArray(reply) || reply.length !== 2 || !Buffer.isBuffer(reply[0]) || !Array.isArray(reply[1])) throw new Error(`${address}: unexpected SCAN reply`);
    cursor = reply[0].toString('latin1');
    await each(reply[1].filter((k): k is Buffer => Buffer.isBuffer(k)));
  } while (cursor !== '0');
}
