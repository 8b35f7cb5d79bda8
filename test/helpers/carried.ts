// Jest helper for the replication carry: in double-write a write is answered after side A and
// reaches side B through its node's replication stream, so "on B" is checked once every replica
// of the A nodes (the proxy's follower among them) acknowledged A's offset at that moment. A
// follower acknowledges only what B has applied, so a replica's offset in A's INFO replication
// past A's own offset means B holds every write A had made; the follower itself (on port 0) must
// be among them. (WAIT is not used: on 7.2+ it counts
// from the asking connection's own last write, and this connection writes nothing.)
import Redis from 'ioredis';

const POLL_MS = 20;

function replicationOffsets(info: string): { offset: number; replicas: number[]; followers: number } {
  const offset = Number(/^master_repl_offset:(\d+)/m.exec(info)?.[1] ?? -1);
  const lines = [...info.matchAll(/^slave\d+:.*$/gm)].map((m) => m[0]);
  const replicas = lines.map((l) => Number(/\boffset=(\d+)/.exec(l)?.[1] ?? -1));
  // The proxy's follower announces port 0 (a real replica, its own listening port).
  const followers = lines.filter((l) => /\bport=0\b/.test(l)).length;
  return { offset, replicas, followers };
}

/** Resolves once every replica of each node (`host:port`) has what the node holds now; throws after `ms`. */
export async function carriedToB(nodes: readonly string[], ms = 30_000): Promise<void> {
  await Promise.all(
    nodes.map(async (addr) => {
      const [host, port] = addr.split(':');
      const c = new Redis({ host, port: Number(port), maxRetriesPerRequest: 0, disableClientInfo: true, lazyConnect: true });
      try {
        await c.connect();
        const now = replicationOffsets(String(await c.info('replication')));
        const deadline = Date.now() + ms;
        for (;;) {
          const seen = replicationOffsets(String(await c.info('replication')));
          const behind = seen.replicas.filter((o) => o < now.offset).length;
          // A follower whose link is down at first is waited for too: else nothing says B has it.
          if (behind === 0 && seen.followers > 0 && seen.replicas.length >= now.replicas.length) return;
          if (Date.now() > deadline) throw new Error(`${addr}: ${seen.followers === 0 ? 'no follower (a replica on port 0) attached' : `${behind} of ${seen.replicas.length} replicas still behind offset ${now.offset}`} after ${ms} ms`);
          await new Promise((resolve) => setTimeout(resolve, POLL_MS));
        }
      } finally {
        c.disconnect();
      }
    }),
  );
}

/** The carry a proxy chose for its migration (INFO's migration_carry), null outside one. */
export async function carryOf(proxy: Redis): Promise<'replication' | 'feeds' | null> {
  const m = /^migration_carry:(\w+)/m.exec(String(await proxy.info('proxy')));
  return m === null ? null : (m[1] as 'replication' | 'feeds');
}
