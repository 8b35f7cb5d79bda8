/**
 * `slotproxy migrate copy`: copies every key of ring A whose owner changes to its owner in ring B,
 * with its TTL, through the same versioned snapshot/apply as double-write (migration/converge.ts), so it
 * never overwrites a newer state and never brings back a key deleted meanwhile. Run it while the
 * proxies are in double-write (or read-new): writes during the copy are carried by them.
 *
 * Resumable: each source node's SCAN cursor is saved on that node (COPY_STATE_KEY) after every
 * batch; a rerun continues where the last one stopped (a batch done twice is harmless).
 */
import { Placement } from '../../../sharding/migration';
import { ownerOfKey } from '../../../sharding/key-space';
import { NodeClient, scanStep } from './node-client';
import type { Reply } from '../../resp/decode-reply';
import { APPLY_SCRIPT, BOOKKEEPING_PREFIX, SNAPSHOT_SCRIPT, Snapshot, applyCommand, bookkeepingOf, isBookkeepingKey, parseApply, parseSnapshot, snapshotCommand } from '../converge';
import { ownersOf } from '../copy-keys';
import { Progress, RateLimiter } from './progress';

export const COPY_STATE_KEY = `${BOOKKEEPING_PREFIX}copy`;

/** Reads a source node's saved copy progress (the reply decodes with parseCopyState). */
export const READ_COPY_STATE = ['HMGET', COPY_STATE_KEY, 'cursor', 'copied'];

export interface CopyState {
  /** The saved SCAN cursor, `done` when the node is finished, null before its first batch. */
  cursor: string | null;
  copied: number;
}

export function parseCopyState(reply: Reply): CopyState {
  const [cursor, copied] = Array.isArray(reply) ? reply.map((c) => (Buffer.isBuffer(c) || typeof c === 'string' ? c.toString() : null)) : [null, null];
  return { cursor: cursor ?? null, copied: Number(copied ?? 0) || 0 };
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

export async function copyMoved(nodes: NodeClient, placement: Placement, opts: CopyOptions): Promise<CopyResult> {
  const to = placement.to;
  if (to === null) throw new Error('the config has no migration: section');
  const sources = placement.from.nodes.map((n) => n.addr);
  const fromBook = bookkeepingOf(placement.from.kind);
  const toBook = bookkeepingOf(to.kind);
  const toOwners = ownersOf(to);
  // By SHA1 (loaded below); a node that lost it (a replica promoted meanwhile) gets the body.
  const apply = async (addr: string, key: Buffer, snap: Snapshot): Promise<Buffer> => {
    try {
      return await nodes.rawOn(toOwners, addr, applyCommand(key, snap, true, toBook));
    } catch (err) {
      if (!String(err).includes('NOSCRIPT')) throw err;
      return nodes.rawOn(toOwners, addr, applyCommand(key, snap, false, toBook));
    }
  };
  if (opts.restart) await Promise.all(sources.map((a) => nodes.call(a, ['DEL', COPY_STATE_KEY])));
  // Loaded once, then called by SHA1 for every key.
  for (const addr of placement.allAddresses()) {
    await nodes.call(addr, ['SCRIPT', 'LOAD', SNAPSHOT_SCRIPT]);
    await nodes.call(addr, ['SCRIPT', 'LOAD', APPLY_SCRIPT]);
  }
  // Ring B's versions for a key are on its node; a cluster's per slot: see converge.ts.
  const sizes = await Promise.all(sources.map(async (a) => Number(await nodes.call(a, ['DBSIZE']))));
  const progress = opts.progress ? new Progress('copy', sizes.reduce((s, n) => s + n, 0)) : null;
  const limiter = new RateLimiter(opts.rate);
  const result: CopyResult = { scanned: 0, copied: 0, skippedNewer: 0, seconds: 0 };
  const started = Date.now();

  for (const source of sources) {
    const saved = await nodes.call(source, ['HGET', COPY_STATE_KEY, 'cursor']);
    let cursor = Buffer.isBuffer(saved) ? saved.toString('latin1') : '0';
    if (cursor === 'done') continue;
    do {
      const step = await scanStep(nodes, source, cursor, opts.batch);
      const moving = step.keys.filter((k) => !isBookkeepingKey(k) && placement.from.nodeOf(k).addr === source && ownerOfKey(to, k) !== source);
      const snaps = await Promise.all(moving.map((k) => nodes.raw(source, snapshotCommand(k, true, fromBook))));
      const applied = await Promise.all(moving.map((k, i) => apply(ownerOfKey(to, k) ?? '', k, parseSnapshot(snaps[i]))));
      for (const frame of applied) {
        const outcome = parseApply(frame);
        if (outcome.kind === 'applied') result.copied++;
        else if (outcome.kind === 'older') result.skippedNewer++;
        else throw new Error('ring B is fenced: a proxy already switched to done, so there is nothing left to copy');
      }
      cursor = step.cursor;
      await nodes.call(source, ['HSET', COPY_STATE_KEY, 'cursor', cursor === '0' ? 'done' : cursor]);
      await nodes.call(source, ['HINCRBY', COPY_STATE_KEY, 'copied', String(moving.length)]);
      result.scanned += step.keys.length;
      progress?.update(result.scanned, `${result.copied} copied`);
      await limiter.take(step.keys.length);
    } while (cursor !== '0');
  }
  progress?.finish();
  result.seconds = (Date.now() - started) / 1000;
  return result;
}
