/**
 * What a cluster node's error asks of a request the migration sent it (side-request.ts), or of a
 * converging burst (MULTI, the write, SNAPSHOT, EXEC on side A when A is a Redis Cluster, as a
 * queue-time error): go to another node (MOVED, or ASK with ASKING first), or wait and send it
 * again (TRYAGAIN, CLUSTERDOWN). Nothing of a refused request or an aborted burst ran, so sending
 * it again is safe.
 */
import { splitAddress } from '../backend/connection';

export type Redirect = { kind: 'moved' | 'ask'; slot: number; address: string } | { kind: 'retry' };

/** Null when `frame` is no redirection (an answer, or an error to pass on). */
export function redirectOf(frame: Buffer | null, askedAddress: string): Redirect | null {
  if (frame === null || frame[0] !== 45 /* - */) return null;
  const text = frame.toString('latin1', 1, frame.length - 2);
  if (text.startsWith('TRYAGAIN') || text.startsWith('CLUSTERDOWN')) return { kind: 'retry' };
  const m = /^(MOVED|ASK) (\d+) (\S*)$/.exec(text);
  if (m === null) return null;
  // Redis 7 leaves the host out when it does not know its own: "the node you asked".
  const address = m[3].startsWith(':') ? splitAddress(askedAddress)[0] + m[3] : m[3];
  return { kind: m[1] === 'MOVED' ? 'moved' : 'ask', slot: Number(m[2]), address };
}
