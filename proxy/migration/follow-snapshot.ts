/**
 * A spooled full-sync snapshot read back at side B's pace: replication/rdb-reader.ts cuts it into
 * entries (each key's DUMP payload as the node would give it), and each is handed on in turn,
 * the file read no faster than `entry` resolves. Databases other than 0 stop it with the reason.
 *
 * The follower's files are named for the followed node, this host and this process
 * (`slotproxy-follow-<node>.<host>.<pid>.rdb`), so a follower starting finds those of an earlier
 * follower of the same node on this host whose process is gone (killed mid-snapshot) and removes
 * them; a file of a process still running, or of another host sharing the folder, is left alone.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RdbReader } from '../replication/rdb-reader';

export interface SnapshotSink {
  /** False for a key that does not move: its value is read past, no payload is built. */
  wants(key: Buffer): boolean;
  entry(key: Buffer, expireAtMs: number | null, dump: Buffer): Promise<void>;
  func(code: Buffer): Promise<void>;
  /** The keys the snapshot holds, from its RESIZEDB opcodes (summed over databases). */
  total?(keys: number): void;
  /** Keys of the snapshot read so far (moving or not), counted as the entries before them are handed on. */
  read?(keys: number): void;
}

const CHUNK = 1 << 20;

export async function readSnapshot(file: string, sink: SnapshotSink): Promise<void> {
  const queued: (() => Promise<void>)[] = [];
  let failure: Error | null = null;
  let total = 0;
  let seen = 0;
  const reader = new RdbReader({
    onResizeDb: (dbSize) => sink.total?.((total += dbSize)),
    wantEntry: (db, key) => (seen++, db !== 0 || sink.wants(key)),
    onEntry: (e) => {
      const at = seen;
      if (e.db !== 0) failure ??= new Error(`database ${e.db} holds keys (a migration carries database 0 only)`);
      else queued.push(() => sink.entry(e.key, e.expireAtMs, e.dump).then(() => sink.read?.(at)));
    },
    onFunction: (code) => queued.push(() => sink.func(code)),
    onEnd: () => undefined,
  });
  const fd = await fs.promises.open(file, 'r');
  try {
    const buf = Buffer.alloc(CHUNK);
    for (;;) {
      const { bytesRead } = await fd.read(buf, 0, CHUNK, null);
      if (bytesRead === 0) break;
      reader.push(Buffer.from(buf.subarray(0, bytesRead)));
      if (failure !== null) throw failure;
      for (const job of queued.splice(0)) await job();
      sink.read?.(seen);
    }
    reader.end();
    for (const job of queued.splice(0)) await job();
    if (failure !== null) throw failure;
    sink.read?.(seen);
  } finally {
    await fd.close();
  }
}

const PREFIX = 'slotproxy-follow-';

function safe(s: string): string {
  return s.replace(/[^0-9a-zA-Z]/g, '_');
}

let follows = 0;

/**
 * A number for each file a follow of this process opens: a follow that stops (its copier given up)
 * or a full sync that is cut removes its file while the next one of the same node may be written
 * already, so no two share one.
 */
export function nextFollowNumber(): number {
  return ++follows;
}

/** Where this process's follower of `source` writes its snapshot (rdb) or stream spool, file number `follow`. */
export function followFileOf(dir: string, source: string, kind: 'rdb' | 'stream', follow: number): string {
  return path.join(dir, `${PREFIX}${safe(source)}.${safe(os.hostname())}.${process.pid}-${follow}.${kind}`);
}

/** Files in `dir` of earlier followers of `source` on this host whose process is gone, removed; their names. */
export function removeStaleFollowFiles(dir: string, source: string): string[] {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return [];
  }
  const mine = new RegExp(`^${PREFIX}${safe(source)}\\.${safe(os.hostname())}\\.(\\d+)(?:-\\d+)?\\.(rdb|stream)$`);
  const removed: string[] = [];
  for (const name of names) {
    const pid = Number(mine.exec(name)?.[1] ?? NaN);
    if (!Number.isSafeInteger(pid) || pid === process.pid || running(pid)) continue;
    try {
      fs.rmSync(path.join(dir, name), { force: true });
      removed.push(name);
    } catch {
      // another follower removed it first
    }
  }
  return removed;
}

function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // alive, another user's
  }
}
