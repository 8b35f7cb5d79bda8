/**
 * `slotproxy migrate copy` under the replication carry: the history copy is each node of side A's
 * full sync, run by the proxy that follows the node (follow.ts), which saves its progress on the
 * node (follow-progress.ts). This run, on the nodes alone:
 *
 *   1. writes its mark on every node of A: `rate` (moving keys restored per second: --rate shared
 *      among A's nodes, 0: no cap),
 *      and with --restart (or where the last full sync failed) a new `token`, which the follower
 *      hears on its change feed and answers with a new full sync (PSYNC ? -1);
 *   2. reads the records every POLL_MS until every node's full sync (the one answering its token,
 *      when it asked for one) is restored on side B, printing progress lines as the feeds' copy
 *      does (keys read of the snapshots' total, keys/s, time left, keys restored).
 *
 * An interrupted run leaves the full syncs running in the proxies; a rerun watches them on. A node
 * whose record does not move while no follower is connected to it for NO_FOLLOWER_MS stops the run.
 */
import { randomBytes } from 'node:crypto';
import { Placement } from '../../../sharding/migration';
import { ownersOf } from '../copy-keys';
import { RESTARTED, FOLLOW_REQUEST_KEY, FOLLOW_SYNC_KEY, FullSyncRecord, READ_SYNC_FIELDS, describeSync, nodeKeyOf, parseSyncRecord } from '../follow-progress';
import { NodeClient } from './node-client';
import { CopyOptions, CopyResult } from './copy';
import { Progress } from './progress';

const POLL_MS = 200;
const NO_FOLLOWER_MS = 30_000;

export interface FullSyncCopy extends CopyResult {
  /** Keys the snapshots held (their RESIZEDB), summed. */
  total: number;
  /** Every node's full sync was restored before this run, and none was asked for. */
  already: boolean;
}

/** Every node of side A's full sync record, in `placement.from.masters()` order. */
export async function readSyncRecords(nodes: NodeClient, placement: Placement): Promise<(FullSyncRecord | null)[]> {
  const owners = ownersOf(placement.from);
  return Promise.all(placement.from.masters().map(async (a) => parseSyncRecord(await nodes.callOn(owners, a, ['HMGET', nodeKeyOf(FOLLOW_SYNC_KEY, a, owners), ...READ_SYNC_FIELDS]))));
}

export async function copyByFullSync(nodes: NodeClient, placement: Placement, opts: CopyOptions, print: (lines: string[]) => void): Promise<FullSyncCopy> {
  // A new full sync first removes the node's moving keys from B: only while A alone is read.
  if (opts.restart && placement.phase !== 'double-write') throw new Error(`--restart under the replication carry runs a new full sync, which first removes the moving keys from side B: only in double-write (the config says ${placement.phase})`);
  const started = Date.now();
  const owners = ownersOf(placement.from);
  const sources = placement.from.masters();
  const before = await readSyncRecords(nodes, placement);
  const token = `${started.toString(36)}-${randomBytes(6).toString('hex')}`;
  // Per node, the token its full sync must answer (null: whichever is the last one).
  const asked = new Map<string, string | null>();
  const lines: string[] = [];
  // --rate is what B takes in all: each node's follower restores its share.
  const share = opts.rate === 0 ? 0 : Math.max(1, Math.ceil(opts.rate / Math.max(sources.length, 1)));
  for (const [i, a] of sources.entries()) {
    const renew = opts.restart || before[i]?.state === 'failed';
    await nodes.callOn(owners, a, ['HSET', nodeKeyOf(FOLLOW_REQUEST_KEY, a, owners), 'rate', String(share), ...(renew ? ['token', token] : [])]);
    asked.set(a, renew ? token : null);
    lines.push(`  ${a}: ${renew ? `a new full sync asked for (${before[i] === null ? 'none before' : `the last: ${describeSync(before[i])}`})` : describeSync(before[i])}`);
  }
  print([`copy: restores on side B ${share === 0 ? 'not capped (--rate 0)' : `capped at ${opts.rate} keys/s, ${share} for the full sync of each of the ${sources.length} nodes of side A`}`, ...lines]);
  const already = before.every((r) => r?.state === 'done') && [...asked.values()].every((t) => t === null);
  const progress = opts.progress ? new Progress('copy', 0) : null;
  const still = new Map<string, { seen: string; since: number }>();
  for (;;) {
    const records = await readSyncRecords(nodes, placement);
    let read = 0;
    let restored = 0;
    let total = 0;
    let finished = true;
    for (const [i, a] of sources.entries()) {
      const want = asked.get(a) ?? null;
      const r = records[i];
      const answered = r !== null && (want === null || r.request === want);
      if (answered && r.state === 'failed' && r.error !== RESTARTED) throw new Error(`${a}: its full sync failed: ${r.error} (slotproxy migrate copy asks for a new one)`);
      if (answered) {
        read += r.read;
        restored += r.restored;
        total += Math.max(r.total, r.read);
      }
      if (!answered || r.state !== 'done') {
        finished = false;
        await stalled(nodes, a, JSON.stringify(r), still);
      }
    }
    if (progress !== null) {
      progress.retotal(total);
      progress.update(read, `${restored} restored on side B`);
    }
    if (finished) {
      progress?.finish();
      return { scanned: read, copied: restored, skippedNewer: 0, seconds: (Date.now() - started) / 1000, total, already };
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

/** Throws once `a`'s record has not moved for NO_FOLLOWER_MS while no follower is connected to it. */
async function stalled(nodes: NodeClient, a: string, seen: string, still: Map<string, { seen: string; since: number }>): Promise<void> {
  const now = Date.now();
  const last = still.get(a);
  if (last === undefined || last.seen !== seen) return void still.set(a, { seen, since: now });
  if (now - last.since < NO_FOLLOWER_MS) return;
  const info = String(await nodes.call(a, ['INFO', 'replication']));
  if (/^connected_slaves:0\r?$/m.test(info)) {
    throw new Error(`no proxy has followed ${a} for ${NO_FOLLOWER_MS / 1000} s: start the proxies with this migration (their logs say why a follow fails)`);
  }
  still.set(a, { seen, since: now });
}
