// Jest helper: a minimal client-side cache over one RESP3 connection, as a client library keeps
// one (node-redis's BasicClientSideCache does the same): CLIENT TRACKING ON, GETs answered from a
// local map, an entry dropped on its invalidation, everything dropped on a null one, and a GET in
// flight when its key is invalidated not cached (its reply may predate the change).

import net from 'node:net';
import { ReplyFramer } from '../../proxy/resp/reply-framer';
import { encodeRequest } from './raw-exchange';

const INVALIDATE_HEAD = '>2\r\n$10\r\ninvalidate\r\n';

export class CachingReader {
  readonly cache = new Map<string, string | null>();
  hits = 0;
  misses = 0;
  errors = 0;
  invalidations = 0;
  flushes = 0;
  private readonly framer = new ReplyFramer();
  private readonly pending: { key: string | null; resolve: (frame: string) => void }[] = [];
  /** Keys of GETs in flight that an invalidation reached before their reply. */
  private readonly spoiled = new Set<string>();
  private invalidationListeners: ((key: string | null) => void)[] = [];

  private constructor(private readonly socket: net.Socket) {
    socket.on('data', (d: Buffer) => this.framer.push(d, (f) => this.onFrame(f.toString('latin1'))));
    socket.on('error', () => undefined);
  }

  static async open(port: number): Promise<CachingReader> {
    const socket = net.connect(port, '127.0.0.1');
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    const reader = new CachingReader(socket);
    await reader.send(['HELLO', '3']);
    await reader.trackingOn();
    return reader;
  }

  /** CLIENT TRACKING ON (again): the proxy answers once it hears every node's changes. */
  async trackingOn(): Promise<void> {
    const on = await this.send(['CLIENT', 'TRACKING', 'ON']);
    if (on !== '+OK\r\n') throw new Error(`CLIENT TRACKING ON answered ${on}`);
  }

  /** Called with each invalidated key (null: everything). */
  onInvalidate(listener: (key: string | null) => void): void {
    this.invalidationListeners.push(listener);
  }

  /** The key's value, from the cache when it holds it. */
  async get(key: string): Promise<string | null> {
    if (this.cache.has(key)) {
      this.hits++;
      return this.cache.get(key) as string | null;
    }
    this.misses++;
    this.spoiled.delete(key);
    const frame = await this.send(['GET', key], key);
    if (frame.startsWith('-')) {
      this.errors++;
      return null;
    }
    return valueOf(frame);
  }

  close(): void {
    this.socket.destroy();
  }

  private send(args: string[], key: string | null = null): Promise<string> {
    return new Promise((resolve) => {
      this.pending.push({ key, resolve });
      this.socket.write(encodeRequest(args));
    });
  }

  private onFrame(frame: string): void {
    if (frame.startsWith('>')) {
      if (!frame.startsWith(INVALIDATE_HEAD)) return;
      const body = frame.slice(INVALIDATE_HEAD.length);
      if (body === '_\r\n') {
        this.flushes++;
        this.cache.clear();
        for (const p of this.pending) if (p.key !== null) this.spoiled.add(p.key);
        for (const l of this.invalidationListeners) l(null);
        return;
      }
      const keys = [...body.matchAll(/\$\d+\r\n([^\r]*)\r\n/g)].map((m) => m[1]);
      for (const key of keys) {
        this.invalidations++;
        this.cache.delete(key);
        if (this.pending.some((p) => p.key === key)) this.spoiled.add(key);
        for (const l of this.invalidationListeners) l(key);
      }
      return;
    }
    // Cached here, before any later frame of the same read is looked at: an invalidation right
    // behind the reply must find the value in the cache.
    const p = this.pending.shift();
    if (p === undefined) return;
    if (p.key !== null && !frame.startsWith('-') && !this.spoiled.has(p.key)) this.cache.set(p.key, valueOf(frame));
    if (p.key !== null) this.spoiled.delete(p.key);
    p.resolve(frame);
  }
}

function valueOf(frame: string): string | null {
  return frame === '_\r\n' ? null : frame.slice(frame.indexOf('\r\n') + 2, -2);
}
