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
  readonly coverWaiters: (() => void)[] = [];

  constructor(readonly address: string) {}

  get state(): FeedState {
    if (this.feed === null) return 'lost';
    if (!this.feed.ready) return this.gapSince === null ? 'starting' : 'lost';
    if (this.gapSince !== null) return this.rewalking ? 're-walking' : 'lost';
    return this.failed.size > 0 ? 'behind' : 'live';
  }

  get covered(): boolean {
    return this.state === 'live';
  }
}

/** What the copier counts: the feed counts /metrics shows (telemetry/metrics.ts), and barriers that timed out. */
export type ChangeCounts = Omit<MigrationFeedCounts, 'feeds' | 'uncovered'> & { barrierTimeouts: number };

/** Targets grouped by A node and bookkeeping (a ring node's, or a cluster slot's). */
export function groupByBookkeeping(targets: readonly CopyTarget[]): CopyTarget[][] {
  return groupIndexes(targets, (t) => `${t.from} ${t.fromBook.versionsKey(t.key)}`).map((g) => g.map((i) => targets[i]));
}
