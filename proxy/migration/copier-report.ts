/**
 * What the change copier (change-copier.ts) says of its nodes of side A: which are covered (every
 * change known to be on side B, or to be carried there), by whom (copier-lease.ts), and the lines
 * of PROXY MIGRATION STATUS, the fleet record and INFO proxy (feedInfoLines).
 */
import { VIEW_FRESH_MS } from './copier-lease';
import { ChangeCounts, NodeChanges } from './node-changes';

/** Covered by its own copier while this proxy holds the node; else its feed is up and the holder (read within VIEW_FRESH_MS) is live. */
export function isCovered(n: NodeChanges): boolean {
  if (n.mine) return n.covered;
  return n.feed?.ready === true && n.holder !== null && Date.now() - n.leaseSeenAt < VIEW_FRESH_MS && n.holderState === 'live';
}

/** Why switching to read-new or done must wait: one line per node of side A that is not covered. */
export function uncoveredLines(nodes: Iterable<NodeChanges>): string[] {
  const out: string[] = [];
  for (const n of nodes) {
    if (isCovered(n)) continue;
    if (!n.mine && n.feed?.ready === true) {
      const known = n.holder !== null && Date.now() - n.leaseSeenAt < VIEW_FRESH_MS;
      const why = !known ? 'no proxy is known to copy its changes (the fleet cannot be read)' : n.holder === '' ? 'no proxy copies its changes yet' : `its copier (proxy ${n.holder ?? ''}) is ${n.holderState}`;
      out.push(`${n.address} ${n.reported}: ${why}`);
      continue;
    }
    const why = n.state === 'behind' ? `${n.failed.size} keys not copied yet (${n.lastFailure})` : n.gapSince === null ? 'its change feed is starting' : `${n.gapReason} ${Math.round((Date.now() - n.gapSince) / 1000)} s ago`;
    out.push(`${n.address} ${n.state}: ${why}`);
  }
  return out;
}

/** For the fleet record: `live` when every node is covered, else the nodes that are not; `-` without feeds. */
export function feedSummary(nodes: readonly NodeChanges[]): string {
  if (nodes.length === 0) return '-';
  const open = nodes.filter((n) => !isCovered(n)).map((n) => `${n.address}=${n.reported}`);
  return open.length === 0 ? 'live' : open.join(',');
}

/** The fleet record's summary on the replication carry: the feeds', each follow that is not live named by its state. */
export function withFollows(feeds: string, follows: readonly string[]): string {
  if (feeds === '-' || follows.length === 0) return feeds;
  const nodeOf = (e: string): string => e.slice(0, e.lastIndexOf('='));
  const followed = new Set(follows.map(nodeOf));
  return [...(feeds === 'live' ? [] : feeds.split(',').filter((e) => !followed.has(nodeOf(e)))), ...follows].join(',');
}

/** False once the holder of some node another proxy copies says its follow failed or stopped (it will not catch up by itself). */
export function noHolderGaveUp(nodes: Iterable<NodeChanges>): boolean {
  for (const n of nodes) if (!n.mine && (n.holderState === 'failed' || n.holderState === 'stopped')) return false;
  return true;
}

/** Why a barrier on `n` timed out after `ms`; `follow` is the state of this proxy's follow of it, on the replication carry. */
export function barrierTimeoutWhy(n: NodeChanges, follow: string | null, ms: number): string {
  if (follow !== null) return `the follow of ${n.address} did not apply its changes on side B within ${ms} ms (${follow})`;
  if (n.feed?.ready !== true) return `the change feed of ${n.address} is down`;
  return n.mine ? `changes heard on ${n.address} not copied to side B within ${ms} ms` : `the copier of ${n.address} (proxy ${n.holder ?? 'unknown'}) did not confirm its changes on side B within ${ms} ms`;
}

/** `address=proxy id` of each node's copier holder (`?` while unknown). */
export function copierHolders(nodes: readonly NodeChanges[]): string[] {
  return nodes.map((n) => `${n.address}=${n.holder ?? '?'}`);
}

/** INFO proxy's lines of the change feeds. */
export function feedInfoLines(c: ChangeCounts, feeds: number, uncovered: number, held: number, copiers: readonly string[], answerAfterA: boolean): string[] {
  return [
    `migration_feeds:${feeds}`,
    `migration_feeds_uncovered:${uncovered}`,
    `migration_feed_keys_copied:${c.copied}`,
    `migration_feed_keys_unchanged:${c.unchanged}`,
    `migration_feed_copy_failures:${c.copyFailures}`,
    `migration_feed_gaps:${c.gaps}`,
    `migration_feed_rewalks:${c.rewalks}`,
    `migration_feed_missed_after_fence:${c.missedAfterFence}`,
    `migration_feed_barrier_timeouts:${c.barrierTimeouts}`,
    // Which proxy copies each node's changes (copier-lease.ts), and how many of them this one does.
    `migration_copiers_held:${held}`,
    `migration_copiers:${copiers.join(',')}`,
    // Double-write's writes: answered after side A alone (the feeds carry them), or once B holds them (read-barrier.ts).
    `migration_write_answer:${answerAfterA ? 'after-side-a' : 'converging'}`,
  ];
}
