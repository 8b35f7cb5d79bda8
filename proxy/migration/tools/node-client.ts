/**
 * Direct connections to the ring nodes for the `migrate` tools (they work on the nodes, not
 * through a proxy): the proxy's own back-end pool, with the config's credentials and TLS.
 */
import { RingModeConfig } from '../../../config/schema';
import { BackendPool } from '../../backend/pool';
import { request } from '../../backend/request';
import { backendTls } from '../../security/tls';
import { Reply, decodeReply, errorText } from '../../resp/decode-reply';
import * as encode from '../../resp/encode';

export class NodeClient {
  private readonly pool: BackendPool;

  constructor(config: RingModeConfig, private readonly timeoutMs = 30_000) {
    const { username, password } = config.backend;
    this.pool = new BackendPool({
      connectionsPerNode: 1,
      connectTimeoutMs: config.backend.connectTimeoutMs,
      commandTimeoutMs: timeoutMs,
      handshake: password === undefined ? [] : [encode.command(username === undefined ? ['AUTH', password] : ['AUTH', username, password])],
      tls: backendTls(config.backend.tls),
      maxConnectsPerSecond: config.backend.maxConnectsPerSecond,
    });
  }

  /** The raw reply frame; throws on an error reply or a lost connection. */
  async raw(addr: string, args: readonly (Buffer | string)[]): Promise<Buffer> {
    const frame = await request(this.pool.connection(addr, 0), args, this.timeoutMs);
    const err = errorText(frame);
    if (err !== null) throw new Error(`${addr}: ${err}`);
    return frame;
  }

  /** The decoded reply, bulk strings as Buffers. */
  async call(addr: string, args: readonly (Buffer | string)[]): Promise<Reply> {
    return decodeReply(await this.raw(addr, args), true);
  }

  close(): void {
    this.pool.closeAll();
  }
}

/** One SCAN step: the next cursor and the keys. */
export async function scanStep(nodes: NodeClient, addr: string, cursor: string, count: number): Promise<{ cursor: string; keys: Buffer[] }> {
  const r = await nodes.call(addr, ['SCAN', cursor, 'COUNT', String(count)]);
  if (!Array.isArray(r) || r.length !== 2 || !Array.isArray(r[1])) throw new Error(`${addr}: unexpected SCAN reply`);
  const next = Buffer.isBuffer(r[0]) ? r[0].toString('latin1') : String(r[0]);
  return { cursor: next, keys: r[1].filter((k): k is Buffer => Buffer.isBuffer(k)) };
}

/** A key as text for people: printable keys as they are, others as hex. */
export function showKey(key: Buffer): string {
  for (const b of key) if (b < 0x20 || b > 0x7e) return `0x${key.toString('hex')}`;
  return key.toString('latin1');
}
