/**
 * One Redis Sentinel, as the proxy uses it: questions on a connection of their own
 * (`SENTINEL MASTER`, `SENTINEL REPLICAS`), and events heard on a subscribed connection:
 * `+switch-master`, and the two ends of a promotion under way (the leader is about to send its
 * replica SLAVEOF NO ONE: `+failover-state-send-slaveof-noone`; it gave up waiting for it:
 * `-failover-abort-slave-timeout`). Both are opened again when lost: questions on the next one asked, the
 * subscription after RESUBSCRIBE_MS, for as long as the link lives. Each subscription that takes
 * (the first, and every one after a loss) is reported, because switches may have been missed
 * while it was down: the owner then asks for every master again.
 */
import { BackendConnection, ConnectionOptions } from '../backend/connection';
import { PubSubLink } from '../backend/pubsub-link';
import { request } from '../backend/request';
import * as encode from '../resp/encode';
import { Reply, decodeReply, errorText } from '../resp/decode-reply';

const RESUBSCRIBE_MS = 500;
const SWITCH_MASTER = '+switch-master';
const PROMOTING = '+failover-state-send-slaveof-noone';
const PROMOTION_ABORTED = '-failover-abort-slave-timeout';
const SUBSCRIBE = encode.command(['SUBSCRIBE', SWITCH_MASTER, PROMOTING, PROMOTION_ABORTED]);

export interface SentinelEvents {
  /** `+switch-master`: the sentinels moved master `name` from `from` to `to` (host:port each). */
  switched(name: string, from: string, to: string): void;
  /** A replica of master `name` is being promoted (`ended` false), or that promotion was given up (`ended` true). */
  promoting(name: string, ended: boolean): void;
  /** The subscription is (again) in place. */
  subscribed(sentinel: string): void;
  /** The subscription was lost (the sentinel is down, or refused the handshake). */
  lost(sentinel: string, reason: string): void;
}

/** `ip` and `port` as one address, IPv6 in brackets as everywhere in slotproxy. */
export function hostPort(ip: string, port: string): string {
  return ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`;
}

function text(r: Reply): string {
  return Buffer.isBuffer(r) ? r.toString() : String(r);
}

/** The fields of one `SENTINEL replicas` entry (a flat name, value list). */
function fields(entry: Reply): Map<string, string> {
  const out = new Map<string, string>();
  if (!Array.isArray(entry)) return out;
  for (let i = 0; i + 1 < entry.length; i += 2) out.set(text(entry[i]), text(entry[i + 1]));
  return out;
}

/** A master as one sentinel sees it. */
export interface SentinelView {
  address: string;
  /** The config epoch of this view: the failover that made it master (higher is newer). */
  epoch: number;
}

/** A replica as a sentinel sees it: where, and whether the sentinel would use it. */
export interface SentinelReplica {
  address: string;
  /** Up, not disconnected, linked to its master (`master-link-status:ok`). */
  usable: boolean;
}

export class SentinelLink {
  private query: BackendConnection | null = null;
  private sub: PubSubLink | null = null;
  private resubscribe: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    readonly address: string,
    private readonly options: ConnectionOptions,
    private readonly events: SentinelEvents,
  ) {
    this.subscribe();
  }

  /**
   * Where the sentinel says master `name` is, with the config epoch of that view (a sentinel that
   * was down answers with an older one until it catches up); null when it does not know that name.
   * Throws when it cannot answer.
   */
  async master(name: string, timeoutMs: number): Promise<SentinelView | null> {
    let reply: Reply;
    try {
      reply = await this.ask(['SENTINEL', 'MASTER', name], timeoutMs);
    } catch (err) {
      if (err instanceof Error && err.message.endsWith('No such master with that name')) return null;
      throw err;
    }
    const f = fields(reply);
    const ip = f.get('ip');
    const port = f.get('port');
    if (ip === undefined || port === undefined) throw new Error(`sentinel ${this.address} answered SENTINEL MASTER ${name} without ip and port`);
    return { address: hostPort(ip, port), epoch: Number(f.get('config-epoch') ?? 0) };
  }

  /** The replicas of master `name` the sentinel knows. Throws when it cannot answer. */
  async replicas(name: string, timeoutMs: number): Promise<SentinelReplica[]> {
    const reply = await this.ask(['SENTINEL', 'replicas', name], timeoutMs);
    if (!Array.isArray(reply)) return [];
    return reply.map((entry) => {
      const f = fields(entry);
      const flags = (f.get('flags') ?? '').split(',');
      const down = flags.some((x) => x === 's_down' || x === 'o_down' || x === 'disconnected');
      return { address: hostPort(f.get('ip') ?? '', f.get('port') ?? ''), usable: !down && f.get('master-link-status') === 'ok' };
    });
  }

  close(): void {
    this.closed = true;
    if (this.resubscribe !== null) clearTimeout(this.resubscribe);
    this.query?.close('sentinel link closed');
    this.sub?.close();
  }

  private async ask(args: string[], timeoutMs: number): Promise<Reply> {
    if (this.closed) throw new Error('sentinel link closed');
    if (this.query === null || this.query.isClosed) this.query = new BackendConnection(this.address, this.options);
    const frame = await request(this.query, args, timeoutMs);
    const err = errorText(frame);
    if (err !== null) throw new Error(`sentinel ${this.address}: ${err}`);
    return decodeReply(frame);
  }

  private subscribe(): void {
    if (this.closed) return;
    const link = new PubSubLink(this.address, this.options, (frame) => this.heard(frame), (reason) => {
      if (this.sub !== link || this.closed) return;
      this.sub = null;
      this.events.lost(this.address, reason);
      this.resubscribe = setTimeout(() => this.subscribe(), RESUBSCRIBE_MS);
      this.resubscribe.unref();
    });
    this.sub = link;
    link.write(SUBSCRIBE);
  }

  private heard(frame: Buffer): void {
    const msg = decodeReply(frame);
    if (!Array.isArray(msg) || msg.length < 3) return;
    const [kind, channel] = [text(msg[0]), text(msg[1])];
    if (kind === 'subscribe') return channel === SWITCH_MASTER ? this.events.subscribed(this.address) : undefined;
    if (kind !== 'message') return;
    const parts = text(msg[2]).split(' ');
    // "<name> <old ip> <old port> <new ip> <new port>"
    if (channel === SWITCH_MASTER && parts.length === 5) this.events.switched(parts[0], hostPort(parts[1], parts[2]), hostPort(parts[3], parts[4]));
    // "slave <ip:port> <ip> <port> @ <master name> <master ip> <master port>"
    const at = parts.indexOf('@');
    if (channel === PROMOTING && at >= 0 && at + 1 < parts.length) this.events.promoting(parts[at + 1], false);
    // "master <name> <ip> <port>"
    if (channel === PROMOTION_ABORTED && parts[0] === 'master' && parts.length >= 2) this.events.promoting(parts[1], true);
  }
}
