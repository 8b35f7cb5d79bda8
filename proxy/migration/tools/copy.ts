/**
 * `slotproxy migrate copy`: copies every key of ring A whose owner changes to its owner in ring B,
 * with its TTL, through the same versioned snapshot/apply as double-write (migration/converge.ts), so it
 * never overwrites a newer state and never brings back a key deleted meanwhile. Run it while the
 * proxies are in double-write (or read-new): writes during the copy are carried by them.
 *
 * Resumable: a ring source saves each node's SCAN cursor on that node (COPY_STATE_KEY) after every
 * batch; a cluster source walks the slots and saves the next one (CLUSTER_COPY_STATE_KEY). A rerun
 * continues where the last one stopped (a batch done twice is harmless).
 */
import { Placement } from '../../../sharding/migration';
import { SlotOwners, ownerOfKey } from '../../../sharding/key-space';
import { SLOT_COUNT } from '../../../sharding/slot';
import { NodeClient, scanStep } from './node-client';
import type { Reply } from '../../resp/decode-reply';
import { APPLY_SCRIPT, BOOKKEEPING_PREFIX, SNAPSHOT_SCRIPT, applyCommand, bookkeepingOf, inSlot, isBookkeepingKey, parseApply, parseSnapshot, snapshotCommand } from '../converge';
import { ownersOf } from '../copy-keys';
import { Progress, RateLimiter } from './progress';

export const COPY_STATE_KEY = `${BOOKKEEPING_PREFIX}copy`;

/** A cluster source is walked this many slots at a time (their keys copied together). */
const SLOTS_AT_ONCE = 64;

/** Reads a ring node's saved copy progress (the reply decodes with parseCopyState). */
export const READ_COPY_STATE = ['HMGET', COPY_STATE_KEY, 'cursor', 'copied', 'scanned'];

export interface CopyState {
  /** The saved SCAN cursor, `done` when the node is finished, null before its first batch. */
  cursor: string | null;
  copied: number;
  /** Keys the walk has read so far (moving or not): how far it has gone, for the console's progress. */
  scanned: number;
}

export function parseCopyState(reply: Reply): CopyState {
  const [cursor, copied, scanned] = Array.isArray(reply) ? reply.map((c) => (Buffer.isBuffer(c) || typeof c === 'string' ? c.toString() : null)) : [null, null, null];
  return { cursor: cursor ?? null, copied: Number(copied ?? 0) || 0, scanned: Number(scanned ?? 0) || 0 };
}

export interface CopyOptions {
  /** Keys per second, 0 for no cap. */
  rate: number;
  /** Keys per SCAN batch. */
  batch: number;
  /** Forget saved cursors and start over. */
  restart: boolean;
  progress: boolean;
}

export interface CopyResult {
  scanned: number;
  copied: number;
  /** Snapshots B refused because it already had a newer state. */
  skippedNewer: number;
  seconds: number;
}

/**
 * Where a side A keeps the copy's saved progress: on a ring, on each node (its own SCAN cursor);
 * on a Redis Cluster, one record of the slot walk, in slot 0 (wherever that slot lives).
 */
export const CLUSTER_COPY_STATE_KEY = inSlot(COPY_STATE_KEY, 0);

export function readCopyState(key: string): string[] {
  return ['HMGET', key, 'cursor', 'copied', 'scanned'];
}

export async function copyMoved(nodes: NodeClient, placement: Placement, opts: CopyOptions): Promise<CopyResult> {
  const to = placement.to;
  if (to === null) throw new Error('the config has no migration: section');
  const fromBook = bookkeepingOf(placement.from.kind);
  const toBook = bookkeepingOf(to.kind);
  const fromOwners = ownersOf(placement.from);
  const toOwners = ownersOf(to);
  // By SHA1 (loaded below); a node that lost it (a replica promoted meanwhile) gets the body.
  const bySha = async (owners: SlotOwners | null, addr: string, command: (sha: boolean) => (Buffer | string)[]): Promise<Buffer> => {
    try {
      return await nodes.rawOn(owners, addr, command(true));
    } catch (err) {
      if (!String(err).includes('NOSCRIPT')) throw err;
      return nodes.rawOn(owners, addr, command(false));
    }
  };
  const sources = placement.from.masters();
  for (const addr of placement.allAddresses()) {
    await nodes.call(addr, ['SCRIPT', 'LOAD', SNAPSHOT_SCRIPT]);
    await nodes.call(addr, ['SCRIPT', 'LOAD', APPLY_SCRIPT]);
  }
  const sizes = await Promise.all(sources.map(async (a) => Number(await nodes.call(a, ['DBSIZE']))));
  const progress = opts.progress ? new Progress('copy', sizes.reduce((sum, n) => sum + n, 0)) : null;
  const limiter = new RateLimiter(opts.rate);
  const result: CopyResult = { scanned: 0, copied: 0, skippedNewer: 0, seconds: 0 };
  const started = Date.now();

  /**
   * Snapshot each key on its A node, then apply it on its B owner as soon as its snapshot is in
   * (A and B work at once, every request pipelined); counts what happened, returns the keys that move.
   */
  const copyKeys = async (keys: Buffer[]): Promise<number> => {
    const moving = keys.filter((k) => !isBookkeepingKey(k) && ownerOfKey(placement.from, k) !== ownerOfKey(to, k));
    const outcomes = await Promise.all(
      moving.map(async (k) => {
        const snap = await bySha(fromOwners, ownerOfKey(placement.from, k) ?? '', (sha) => snapshotCommand(k, sha, fromBook));
        return parseApply(await bySha(toOwners, ownerOfKey(to, k) ?? '', (sha) => applyCommand(k, parseSnapshot(snap), sha, toBook)));
      }),
    );
    for (const outcome of outcomes) {
      if (outcome.kind === 'applied') result.copied++;
      else if (outcome.kind === 'older') result.skippedNewer++;
      else throw new Error('side B is fenced: a proxy already switched to done, so there is nothing left to copy');
    }
    return moving.length;
  };
  /** After a batch's progress is saved: shown, and the rate kept. */
  const advance = async (scanned: number): Promise<void> => {
    result.scanned += scanned;
    progress?.update(result.scanned, `${result.copied} copied`);
    await limiter.take(scanned);
  };

  if (fromOwners === null) {
    // A ring: each node's keyspace by SCAN, all nodes at once, each cursor saved on its node after every batch.
    if (opts.restart) await Promise.all(sources.map((a) => nodes.call(a, ['DEL', COPY_STATE_KEY])));
    await Promise.all(
      sources.map(async (source) => {
        const saved = await nodes.call(source, ['HGET', COPY_STATE_KEY, 'cursor']);
        let cursor = Buffer.isBuffer(saved) ? saved.toString('latin1') : '0';
        if (cursor === 'done') return;
        do {
          const step = await scanStep(nodes, source, cursor, opts.batch);
          const moved = await copyKeys(step.keys.filter((k) => ownerOfKey(placement.from, k) === source));
          cursor = step.cursor;
          await nodes.call(source, ['HSET', COPY_STATE_KEY, 'cursor', cursor === '0' ? 'done' : cursor]);
          await nodes.call(source, ['HINCRBY', COPY_STATE_KEY, 'copied', String(moved)]);
          await nodes.call(source, ['HINCRBY', COPY_STATE_KEY, 'scanned', String(step.keys.length)]);
          await advance(step.keys.length);
        } while (cursor !== '0');
      }),
    );
  } else {
    // A cluster: slot by slot from whichever master serves each now (a failover or a reshard of A
    // moves slots between masters, not keys out of the walk), SLOTS_AT_ONCE slots at a time, the
    // next slot saved in slot 0 after each group.
    const state = (args: (Buffer | string)[]): Promise<Reply> => nodes.callOn(fromOwners, fromOwners.ownerOf(0) ?? '', args);
    const keysOf = async (slot: number): Promise<Buffer[]> => {
      const owner = fromOwners.ownerOf(slot) ?? '';
      const count = Number(await nodes.callOn(fromOwners, owner, ['CLUSTER', 'COUNTKEYSINSLOT', String(slot)]));
      if (count === 0) return [];
      // Keys written since the count (double-written, so on B already) would push older ones out
      // of a reply of `count` keys (which ones depends on the node's order: 7.4 and Valkey 8 list a
      // slot's keys in hash-table order): ask for more until the reply is short, so it holds them all.
      for (let want = count + 1; ; want *= 2) {
        const reply = await nodes.callOn(fromOwners, owner, ['CLUSTER', 'GETKEYSINSLOT', String(slot), String(want)]);
        const keys = Array.isArray(reply) ? reply.filter((k): k is Buffer => Buffer.isBuffer(k)) : [];
        if (keys.length < want) return keys;
      }
    };
    if (opts.restart) await state(['DEL', CLUSTER_COPY_STATE_KEY]);
    const saved = await state(['HGET', CLUSTER_COPY_STATE_KEY, 'cursor']);
    const from = Buffer.isBuffer(saved) ? saved.toString('latin1') : '0';
    for (let first = from === 'done' ? SLOT_COUNT : Number(from) || 0; first < SLOT_COUNT; first += SLOTS_AT_ONCE) {
      const slots = Array.from({ length: Math.min(SLOTS_AT_ONCE, SLOT_COUNT - first) }, (_, i) => first + i);
      const keys = (await Promise.all(slots.map(keysOf))).flat();
      let moved = 0;
      for (let i = 0; i < keys.length; i += opts.batch) moved += await copyKeys(keys.slice(i, i + opts.batch));
      const next = first + slots.length;
      await state(['HSET', CLUSTER_COPY_STATE_KEY, 'cursor', next >= SLOT_COUNT ? 'done' : String(next)]);
      await state(['HINCRBY', CLUSTER_COPY_STATE_KEY, 'copied', String(moved)]);
      await state(['HINCRBY', CLUSTER_COPY_STATE_KEY, 'scanned', String(keys.length)]);
      await advance(keys.length);
    }
  }
  progress?.finish();
  result.seconds = (Date.now() - started) / 1000;
  return result;
}
