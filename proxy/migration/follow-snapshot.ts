/**
 * A spooled full-sync snapshot read back at side B's pace: replication/rdb-reader.ts cuts it into
 * entries (each key's DUMP payload as the node would give it), and each is handed on in turn,
 * the file read no faster than `entry` resolves. Databases other than 0 stop it with the reason.
 */
import fs from 'node:fs';
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

/** Where a follower of `source` writes its snapshot (rdb) or its stream's spool. */
export function spoolFileOf(dir: string, source: string, kind: 'rdb' | 'stream'): string {
  return path.join(dir, `slotproxy-follow-${process.pid}-${source.replace(/[^0-9a-zA-Z]/g, '_')}.${kind}`);
}
