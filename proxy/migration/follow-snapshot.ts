/**
 * A spooled full-sync snapshot read back at side B's pace: replication/rdb-reader.ts cuts it into
 * entries (each key's DUMP payload as the node would give it), and each is handed on in turn,
 * the file read no faster than `entry` resolves. Databases other than 0 stop it with the reason.
 */
import fs from 'node:fs';
import { RdbReader } from '../replication/rdb-reader';

export interface SnapshotSink {
  entry(key: Buffer, expireAtMs: number | null, dump: Buffer): Promise<void>;
  func(code: Buffer): Promise<void>;
}

const CHUNK = 1 << 20;

export async function readSnapshot(file: string, sink: SnapshotSink): Promise<void> {
  const queued: (() => Promise<void>)[] = [];
  let failure: Error | null = null;
  const reader = new RdbReader({
    onEntry: (e) => {
      if (e.db !== 0) failure ??= new Error(`database ${e.db} holds keys (a migration carries database 0 only)`);
      else queued.push(() => sink.entry(e.key, e.expireAtMs, e.dump));
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
    }
    reader.end();
    for (const job of queued.splice(0)) await job();
    if (failure !== null) throw failure;
  } finally {
    await fd.close();
  }
}
