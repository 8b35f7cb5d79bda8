/**
 * What the change copier (change-copier.ts) keeps per node of side A: its feed, the keys heard and
 * not yet copied, the barriers waiting on them, and whether changes may have gone unseen (a gap).
 */
import { ChangeFeed } from '../backend/change-feed';
import { CopyTarget, groupIndexes } from './copy-keys';
import { MigrationFeedCounts } from '../telemetry/metrics';

export type FeedState = 'starting' | 'live' | 'lost' | 're-walking' | 'behind';

/** One key to copy; `force`: snapshot even if unchanged (a copy that failed, a key found on B). */
export interface Pending {
  key: Buffer;
  force: boolean;
}

export class NodeChanges {
  feed: ChangeFeed | null = null;
  readonly pending = new Map<string, Pending>();
  /** Keys whose copy failed, sent again (forcibly) after RETRY_FAILED_MS. */
  readonly failed = new Map<string, Buffer>();
  lastFailure = '';
  heard = 0;
  copiedThrough = 0;
  draining = false;
  readonly copyWaiters: { seq: number; done: () => void }[] = [];
  /** When changes may have gone unseen, and why; null while covered. */
  gapSince: number | null = null;
  gapReason = '';
  /** Bumped when a gap opens: a re-walk covers it only if no other opened while it ran. */
  gapEpoch = 0;
  rewalking = false;
  /** The open gap is a takeover of the copier (copier-lease.ts): barriers wait for its re-walk. */
  takenOver = false;
  /** Re-walked since this proxy started (a gap covered). */
  walked = false;
  /** While another proxy copies the node: the keys heard since it last confirmed (standby.ts). */
  readonly standby = new Map<string, { key: Buffer; seq: number }>();
  /** The standby set holds every change the copier has not confirmed (a confirmation, and no gap since). */
  standbyOk = false;
  pruning = false;
  readonly coverWaiters: (() => void)[] = [];
  /**
   * Who holds this node's copier (copier-lease.ts): null until the first lease tick answers;
   * `mine` while it is this proxy, which alone then copies what the feed names.
   */
  holder: string | null = null;
  holderState = '';
  mine = false;
  /** When the lease was last read (a holder's state older than a lease counts as unknown). */
  leaseSeenAt = 0;

  constructor(readonly address: string) {}

  /** Its own feed's state while it holds the copier; else the holder's, as long as its own feed is up. */
  get reported(): string {
    if (this.mine || this.feed === null || !this.feed.ready) return this.state;
    return this.holder === null ? 'starting' : this.holderState;
  }

  get state(): FeedState {
    if (this.feed === null) return 'lost';
    if (!this.feed.ready) return this.gapSince === null ? 'starting' : 'lost';
    if (this.gapSince !== null) return this.rewalking ? 're-walking' : 'lost';
    return this.failed.size > 0 ? 'behind' : 'live';
  }

  get covered(): boolean {
    return this.state === 'live';
  }

  /** Every push up to `through` is copied: the barriers waiting for that far are let go. */
  copied(through: number): void {
    this.copiedThrough = Math.max(this.copiedThrough, through);
    let i = 0;
    while (i < this.copyWaiters.length) {
      if (this.copyWaiters[i].seq <= this.copiedThrough) this.copyWaiters.splice(i, 1)[0].done();
      else i++;
    }
  }

  /** `done` once every push up to `seq` is copied. */
  whenCopied(seq: number, done: () => void): void {
    if (this.copiedThrough >= seq && !this.draining) return done();
    this.copyWaiters.push({ seq, done });
  }
}

/** What the copier counts: the feed counts /metrics shows (telemetry/metrics.ts), and barriers that timed out. */
export type ChangeCounts = Omit<MigrationFeedCounts, 'feeds' | 'uncovered'> & { barrierTimeouts: number };

/** Targets grouped by A node and bookkeeping (a ring node's, or a cluster slot's). */
export function groupByBookkeeping(targets: readonly CopyTarget[]): CopyTarget[][] {
  // A ring node has one versions hash: its address alone names the group (no string built per key).
  return groupIndexes(targets, (t) => (t.fromOwners === null ? t.from : `${t.from} ${t.fromBook.versionsKey(t.key)}`)).map((g) => g.map((i) => targets[i]));
}
