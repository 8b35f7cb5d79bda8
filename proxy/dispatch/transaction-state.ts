/**
 * One client's transaction as the proxy holds it between MULTI (or WATCH) and EXEC: what is
 * queued, the keys that bind it to one shard, the WATCH connection, and the commands that reach
 * several nodes. transaction.ts fills it, exec.ts runs it.
 */
import { QueuedSubscription } from './exec-subscriptions';
import { ClientSession } from '../client/client-session';
import { ProxyContext } from '../context';
import { DedicatedLink } from './dedicated';
import { Merge } from './fanout';

/** No key seen yet: the transaction is not bound to a shard. */
export const UNBOUND = -2;

export class Transaction {
  inMulti = false;
  dirty = false;
  /** A command queued with keys of another shard than the transaction's: EXEC answers CROSSSLOT. */
  crossSlot = false;
  shard = UNBOUND;
  queued: Buffer[] = [];
  shas: Buffer[] = [];
  /** Queued commands that reach several nodes (DBSIZE, FLUSHALL, CONFIG SET ...), by their index in `queued`. */
  spread = new Map<number, Spread>();
  /** The keys WATCHed, each once (CLIENT LIST's `watch` on Redis 7.2 and later). */
  watchedKeys = new Set<string>();
  /** Every key named so far (WATCH and queued commands), to find the shard again at EXEC. */
  keys: Buffer[] = [];
  /** The keys of queued commands that write (a migration copies them after EXEC). */
  written: Buffer[] = [];
  /** A queued script or function, which may write keys it does not declare (migration/after-copy.ts). */
  writesUndeclared = false;
  /**
   * A WATCH the cluster refused for a while (CLUSTERDOWN, TRYAGAIN): the client got OK, and EXEC
   * will answer nil without running anything, as when a watched key was touched.
   */
  doomed = false;
  /** The WATCH connection, from WATCH to EXEC/DISCARD/UNWATCH. */
  watch: DedicatedLink | null = null;
  /** A PUBLISH or PUBSUB CHANNELS/NUMSUB/NUMPAT queued: a transaction of no key runs on the Pub/Sub home, whose count is one server's. */
  asksHome = false;
  /** (P|S)(UN)SUBSCRIBE queued: run by the proxy at EXEC, their confirmations inside EXEC's reply (exec-subscriptions.ts). */
  subscriptions: QueuedSubscription[] = [];

  /** True when a command on `shard` must use the WATCH connection. */
  pinnedTo(shard: number): boolean {
    return this.watch !== null && !this.doomed && shard === this.shard;
  }

  release(): void {
    this.watch?.releaseAfterReplies();
    this.watch = null;
  }
}

/**
 * A command of the transaction that Redis would answer from one server but the proxy sends to
 * several nodes: it runs on the transaction's node inside MULTI, then on the other nodes right
 * after EXEC, and its place in EXEC's reply is the merge of all their replies, as outside a
 * transaction. Not atomic across nodes (a client of another node may see it half done).
 */
export interface Spread {
  /** How the replies merge into one (the merge the command has outside a transaction). */
  merge: Merge;
  /** Masters and replicas (CONFIG SET/RESETSTAT/REWRITE), or the masters alone. */
  everyNode: boolean;
}

/** A session as the transaction commands see it: its open MULTI/WATCH, null outside one. */
export interface TransactionClient extends ClientSession {
  transaction: Transaction | null;
}

/** Where the writes of `shard` go: ring A's node during a migration, else the shard's node. */
export function writeNodeOf(ctx: ProxyContext, shard: number): string | null {
  return ctx.ring !== null ? ctx.ring.placement.writeAddress(shard) : ctx.router.nodeOf(shard);
}

/**
 * The shard the transaction is bound to, under the current placement: in ring mode a phase switch
 * renumbers shards, so it is found again from the first key (still one node in both rings).
 */
export function boundShard(ctx: ProxyContext, txn: Transaction): number {
  if (ctx.ring === null || txn.keys.length === 0) return txn.shard;
  return ctx.router.shardOf(txn.keys[0]);
}
