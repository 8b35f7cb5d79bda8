/**
 * Pub/Sub through the proxy. A client that subscribes gets connections of its own (PubSubLink):
 *
 * - a home link, to one master, for SUBSCRIBE/PSUBSCRIBE: in a Redis Cluster every node hears every
 *   PUBLISH (the cluster bus broadcasts it), so one node is enough whichever node PUBLISH entered;
 * - one link per node for SSUBSCRIBE, to the node serving the channel's slot (SPUBLISH only reaches
 *   that shard), channels of one SSUBSCRIBE in one slot or CROSSSLOT, as Redis Cluster answers.
 *
 * Messages are forwarded as the node's raw bytes. Confirmations ((p|s)(un)subscribe) are re-encoded
 * with the count the client would see from a single server (its subscriptions over every link).
 * Each link keeps a FIFO of the confirmation frames still owed, per command, so frames are paired
 * with what asked for them, and the proxy's own re-subscriptions are answered silently.
 *
 * A subscriber is not lost when its node goes: a lost link is reopened (home: another master;
 * shard: the slot's owner after a topology refresh) and the client's subscriptions are sent again.
 * A node that gives a shard channel's slot away (failover, reshard) unsubscribes its clients from
 * it; the proxy subscribes again at the new owner instead of passing that on.
 *
 * Subscribed mode ends, as on Redis, when the client has no subscription left and nothing is owed.
 */
import { ClientSession, Releasable } from '../client/client-session';
import { ProxyContext } from '../context';
import { CommandInfo } from '../commands/table';
import { PubSubLink } from '../backend/pubsub-link';
import { answerLocally } from './local';
import { ANY_MASTER, ForwardedCommand } from './forward';
import { FanoutCommand, sumIntegers } from './fanout';
import { decodeReply } from '../resp/decode-reply';
import * as encode from '../resp/encode';
import * as errors from '../resp/errors';
import { log } from '../telemetry/log';

type Kind = 'channel' | 'pattern' | 'shard';

const SUBSCRIBE_KIND = new Map<string, Kind>([
  ['subscribe', 'channel'],
  ['psubscribe', 'pattern'],
  ['ssubscribe', 'shard'],
]);
const UNSUBSCRIBE_KIND = new Map<string, Kind>([
  ['unsubscribe', 'channel'],
  ['punsubscribe', 'pattern'],
  ['sunsubscribe', 'shard'],
]);
/** In RESP3, what a subscribed client's Subscription still handles; every other command runs as usual. */
export const SUBSCRIBED_MODE_COMMANDS = new Set([...SUBSCRIBE_KIND.keys(), ...UNSUBSCRIBE_KIND.keys(), 'reset']);
const UNSUBSCRIBE_NAME: Record<Kind, string> = { channel: 'UNSUBSCRIBE', pattern: 'PUNSUBSCRIBE', shard: 'SUNSUBSCRIBE' };
const SUBSCRIBE_NAME: Record<Kind, string> = { channel: 'SUBSCRIBE', pattern: 'PSUBSCRIBE', shard: 'SSUBSCRIBE' };

const MESSAGE = Buffer.from('*3\r\n$7\r\nmessage\r\n');
const PMESSAGE = Buffer.from('*4\r\n$8\r\npmessage\r\n');
const SMESSAGE = Buffer.from('*3\r\n$8\r\nsmessage\r\n');
/** Redis's default `client-output-buffer-limit pubsub 32mb`. */
const SUBSCRIBER_OUTPUT_LIMIT_BYTES = 32 * 1024 * 1024;
const RELINK_BASE_MS = 50;
const RELINK_CAP_MS = 1000;

/** Frames a link still owes for one command written to it. */
interface Owed {
  frames: number;
  /** The proxy's own re-subscription: answered silently. */
  silent: boolean;
}

interface LinkState {
  link: PubSubLink;
  readonly owed: Owed[];
  /** The slot-owner link for shard channels, or the home link. */
  readonly home: boolean;
}

/** A session as Pub/Sub sees it: its subscribed mode, null when not subscribed. */
export interface SubscriberClient extends ClientSession {
  subscription: Subscription | null;
}

/** A command other than the Pub/Sub ones, or the arguments to start subscribing with. */
export function pubsubCommand(ctx: ProxyContext, session: SubscriberClient, info: CommandInfo, args: Buffer[], raw: Buffer | null): void {
  if (info.name === 'publish') {
    const payload = raw ?? encode.command(args);
    // A Redis Cluster broadcasts PUBLISH to every node itself; standalone ring nodes do not, so in
    // ring mode it goes to every node (subscribers listen on one) and the counts are summed.
    if (ctx.topology !== null) session.track(new ForwardedCommand(ctx, session, payload, ANY_MASTER, false)).start();
    else session.track(new FanoutCommand(session, ctx.router.masters(), sumIntegers)).start(ctx, payload);
    return;
  }
  if (info.name === 'spublish') {
    // The channel's slot decides the node (its key spec marks it "not a key", so route it here).
    const shard = ctx.router.shardOf(args[1]);
    session.track(new ForwardedCommand(ctx, session, raw ?? encode.command(args), shard, false)).start();
    return;
  }
  const sub = session.subscription ?? new Subscription(ctx, session);
  session.subscription = sub;
  sub.command(info, args);
}

export class Subscription implements Releasable {
  private home: LinkState | null = null;
  private readonly shardLinks = new Map<string, LinkState>();
  /** What the client asked for (latin1 name -> name), sent again when a link is reopened. */
  private readonly wanted: Record<Kind, Map<string, Buffer>> = { channel: new Map(), pattern: new Map(), shard: new Map() };
  /** What the nodes confirmed, for the counts in confirmations. */
  private readonly confirmed: Record<Kind, Set<string>> = { channel: new Set(), pattern: new Set(), shard: new Set() };
  private released = false;
  private relinkAttempts = 0;

  constructor(private readonly ctx: ProxyContext, private readonly session: SubscriberClient) {
    session.dedicated.add(this);
  }

  /** Any command from a client in subscribed mode (or the SUBSCRIBE that starts it). */
  command(info: CommandInfo, args: Buffer[]): void {
    const name = info.name;
    const subKind = SUBSCRIBE_KIND.get(name);
    if (subKind !== undefined) return this.subscribe(subKind, args);
    const unsubKind = UNSUBSCRIBE_KIND.get(name);
    if (unsubKind !== undefined) return this.unsubscribe(unsubKind, args.slice(1));
    switch (name) {
      case 'ping': {
        const state = this.home ?? this.shardLinks.values().next().value ?? null;
        if (state === null) return this.session.replyNow(pubsubPong(args));
        return this.write(state, encode.command(args), 1, false);
      }
      case 'quit':
        return this.session.replyNow(answerLocally(this.ctx, this.session, 'quit', args));
      case 'reset':
        this.release();
        return this.session.replyNow(answerLocally(this.ctx, this.session, 'reset', args));
      default:
        return this.session.replyNow(encode.error(errors.notAllowedWhileSubscribed(name)));
    }
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.session.dedicated.delete(this);
    if (this.session.subscription === this) this.session.subscription = null;
    this.home?.link.close();
    for (const s of this.shardLinks.values()) s.link.close();
    this.shardLinks.clear();
  }

  private subscribe(kind: Kind, args: Buffer[]): void {
    const names = args.slice(1);
    let state: LinkState | null;
    if (kind === 'shard') {
      const shard = this.ctx.router.shardOf(names[0]);
      for (const n of names) {
        if (this.ctx.router.shardOf(n) !== shard) {
          this.ctx.stats.crossSlotErrors++;
          this.session.replyNow(encode.error(errors.CROSSSLOT));
          return this.endIfIdle();
        }
      }
      state = this.shardLink(shard);
    } else {
      state = this.homeLink();
    }
    if (state === null) {
      this.session.replyNow(encode.error(kind === 'shard' ? errors.SLOT_NOT_SERVED : errors.PROXY_NOT_READY));
      return this.endIfIdle();
    }
    for (const n of names) this.wanted[kind].set(n.toString('latin1'), n);
    this.write(state, encode.command(args), names.length, false);
  }

  private unsubscribe(kind: Kind, given: Buffer[]): void {
    const names = given.length > 0 ? given : [...this.wanted[kind].values()];
    if (names.length === 0) {
      this.session.replyNow(this.confirmation(UNSUBSCRIBE_NAME[kind].toLowerCase(), null, this.count(kind)));
      return this.endIfIdle();
    }
    // Each name goes to the link that holds it; names held nowhere are answered by the proxy.
    const byLink = new Map<LinkState, Buffer[]>();
    const local: Buffer[] = [];
    for (const n of names) {
      const key = n.toString('latin1');
      const state = this.wanted[kind].has(key) ? this.linkHolding(kind, n) : null;
      this.wanted[kind].delete(key);
      if (state === null) local.push(n);
      else byLink.set(state, [...(byLink.get(state) ?? []), n]);
    }
    for (const [state, list] of byLink) this.write(state, encode.command([UNSUBSCRIBE_NAME[kind], ...list]), list.length, false);
    for (const n of local) this.session.replyNow(this.confirmation(UNSUBSCRIBE_NAME[kind].toLowerCase(), n, this.count(kind)));
    this.endIfIdle();
  }

  private linkHolding(kind: Kind, name: Buffer): LinkState | null {
    if (kind !== 'shard') return this.home;
    const address = this.ctx.router.nodeOf(this.ctx.router.shardOf(name));
    return (address === null ? undefined : this.shardLinks.get(address)) ?? this.shardLinks.values().next().value ?? null;
  }

  private write(state: LinkState, payload: Buffer, frames: number, silent: boolean): void {
    state.owed.push({ frames, silent });
    state.link.write(payload);
  }

  private homeLink(): LinkState | null {
    if (this.home !== null) return this.home;
    const masters = this.ctx.router.masters();
    if (masters.length === 0) return null;
    this.home = this.open(masters[(this.session.id + this.relinkAttempts) % masters.length], true);
    return this.home;
  }

  private shardLink(shard: number): LinkState | null {
    const address = this.ctx.router.nodeOf(shard);
    if (address === null) return null;
    let state = this.shardLinks.get(address);
    if (state === undefined) {
      state = this.open(address, false);
      this.shardLinks.set(address, state);
    }
    return state;
  }

  private open(address: string, home: boolean): LinkState {
    const state: LinkState = {
      link: new PubSubLink(
        address,
        this.ctx.pool.linkOptions(),
        (frame) => this.onFrame(state, frame),
        (reason) => this.onLinkLost(state, reason),
      ),
      owed: [],
      home,
    };
    return state;
  }

  private onFrame(state: LinkState, frame: Buffer): void {
    if (startsWith(frame, MESSAGE) || startsWith(frame, PMESSAGE) || startsWith(frame, SMESSAGE)) {
      const pending = this.session.pendingOutputBytes ?? 0;
      if (pending > SUBSCRIBER_OUTPUT_LIMIT_BYTES) {
        // Redis's client-output-buffer-limit for pubsub: a subscriber that does not read is closed.
        log.warn({ pendingBytes: pending }, 'closing a subscriber that does not read its messages');
        this.release();
        this.session.destroy?.();
        return;
      }
      this.session.replyNow(this.session.protocol === 3 ? asPush(frame) : frame);
      return;
    }
    const head = state.owed[0];
    const decoded = frame[0] === 42 /* * */ ? decodeReply(frame, true) : null;
    const kind = Array.isArray(decoded) && Buffer.isBuffer(decoded[0]) ? decoded[0].toString('latin1').toLowerCase() : '';
    const channel = Array.isArray(decoded) && Buffer.isBuffer(decoded[1]) ? decoded[1] : null;
    if (kind === 'sunsubscribe' && channel !== null && this.wanted.shard.has(channel.toString('latin1')) && (head === undefined || head.silent)) {
      // The node gave the channel's slot away (failover, reshard): follow the slot, say nothing.
      this.confirmed.shard.delete(channel.toString('latin1'));
      this.resubscribeShard([channel]);
      return;
    }
    if (head !== undefined && --head.frames === 0) state.owed.shift();
    const silent = head?.silent === true;
    const subKind = SUBSCRIBE_KIND.get(kind);
    const unsubKind = UNSUBSCRIBE_KIND.get(kind);
    if (subKind !== undefined && channel !== null) {
      this.confirmed[subKind].add(channel.toString('latin1'));
      if (!silent) this.session.replyNow(this.confirmation(kind, channel, this.count(subKind)));
    } else if (unsubKind !== undefined) {
      if (channel !== null) this.confirmed[unsubKind].delete(channel.toString('latin1'));
      if (!silent) this.session.replyNow(this.confirmation(kind, channel, this.count(unsubKind)));
    } else if (silent) {
      // An error to a re-subscription (MOVED: the slot moved again): try again shortly.
      if (!state.home) this.resubscribeShard([...this.wanted.shard.values()].filter((n) => !this.confirmed.shard.has(n.toString('latin1'))));
    } else {
      this.session.replyNow(frame);
    }
    this.endIfIdle();
  }

  /** A (un)subscribe confirmation as a single server writes it: an array in RESP2, a push frame in RESP3. */
  private confirmation(kind: string, channel: Buffer | null, count: number): Buffer {
    if (this.session.protocol === 3) return encode.pushOfFrames([encode.bulk(kind), channel === null ? RESP3_NULL : encode.bulk(channel), encode.integer(count)]);
    return encode.arrayOfFrames([encode.bulk(kind), encode.bulk(channel), encode.integer(count)]);
  }

  /** CLIENT LIST's sub, psub and ssub. */
  counts(): { sub: number; psub: number; ssub: number } {
    return { sub: this.confirmed.channel.size, psub: this.confirmed.pattern.size, ssub: this.confirmed.shard.size };
  }

  /** Regular counts cover channels and patterns; shard channels are counted apart, as Redis does. */
  private count(kind: Kind): number {
    return kind === 'shard' ? this.confirmed.shard.size : this.confirmed.channel.size + this.confirmed.pattern.size;
  }

  private endIfIdle(): void {
    if (this.released) return;
    const wanted = this.wanted.channel.size + this.wanted.pattern.size + this.wanted.shard.size;
    const confirmed = this.confirmed.channel.size + this.confirmed.pattern.size + this.confirmed.shard.size;
    if (wanted > 0 || confirmed > 0) return;
    if (this.home !== null && this.home.owed.length > 0) return;
    for (const s of this.shardLinks.values()) if (s.owed.length > 0) return;
    this.release();
  }

  private onLinkLost(state: LinkState, reason: string): void {
    if (this.released) return;
    log.info({ node: state.link.address, reason }, 'subscriber link lost; subscribing again elsewhere');
    // Confirmations owed on the dead link will not come: answer them as the client expects.
    for (const owed of state.owed) {
      if (owed.silent) continue;
      for (let i = 0; i < owed.frames; i++) this.session.replyNow(encode.error(errors.connectionLost(state.link.address)));
    }
    state.owed.length = 0;
    this.ctx.topology?.requestRefresh();
    const delay = Math.min(RELINK_CAP_MS, RELINK_BASE_MS * 2 ** this.relinkAttempts++);
    if (state.home) {
      this.home = null;
      for (const k of ['channel', 'pattern'] as const) for (const key of this.wanted[k].keys()) this.confirmed[k].delete(key);
      setTimeout(() => this.resubscribeHome(), delay);
    } else {
      this.shardLinks.delete(state.link.address);
      const lost = [...this.wanted.shard.values()].filter((n) => this.ctx.router.nodeOf(this.ctx.router.shardOf(n)) === state.link.address || !this.confirmedAnywhere(n));
      for (const n of lost) this.confirmed.shard.delete(n.toString('latin1'));
      setTimeout(() => this.resubscribeShard(lost), delay);
    }
  }

  private confirmedAnywhere(name: Buffer): boolean {
    return this.confirmed.shard.has(name.toString('latin1'));
  }

  private resubscribeHome(): void {
    if (this.released || this.home !== null) return;
    const state = this.homeLink();
    if (state === null) {
      setTimeout(() => this.resubscribeHome(), RELINK_CAP_MS);
      return;
    }
    for (const kind of ['channel', 'pattern'] as const) {
      const names = [...this.wanted[kind].values()];
      if (names.length > 0) this.write(state, encode.command([SUBSCRIBE_NAME[kind], ...names]), names.length, true);
    }
  }

  /** Subscribes shard channels again at their slot's owner, once the topology has caught up. */
  private resubscribeShard(names: Buffer[]): void {
    if (this.released || names.length === 0) return;
    const refreshed = this.ctx.topology?.refresh() ?? Promise.resolve();
    void refreshed
      .catch(() => undefined)
      .then(() => {
        if (this.released) return;
        const bySlot = new Map<number, Buffer[]>();
        for (const n of names) {
          if (!this.wanted.shard.has(n.toString('latin1'))) continue;
          const shard = this.ctx.router.shardOf(n);
          bySlot.set(shard, [...(bySlot.get(shard) ?? []), n]);
        }
        for (const [shard, list] of bySlot) {
          const state = this.shardLink(shard);
          if (state === null) {
            setTimeout(() => this.resubscribeShard(list), RELINK_CAP_MS);
            continue;
          }
          this.write(state, encode.command(['SSUBSCRIBE', ...list]), list.length, true);
        }
      });
  }
}

const RESP3_NULL = Buffer.from('_\r\n');

/**
 * A message for a RESP3 client. The links speak RESP2 (so messages and confirmations parse the same
 * whatever the client's protocol), and a message holds only bulk strings, so `*` -> `>` makes it
 * the push frame Redis would send.
 */
function asPush(frame: Buffer): Buffer {
  const push = Buffer.from(frame);
  push[0] = 62; // '>'
  return push;
}

/** PING in subscribed mode (RESP2): `*2 pong <arg or "">`. */
function pubsubPong(args: Buffer[]): Buffer {
  return encode.arrayOfFrames([encode.bulk('pong'), encode.bulk(args.length > 1 ? args[1] : Buffer.alloc(0))]);
}

function startsWith(frame: Buffer, prefix: Buffer): boolean {
  return frame.length > prefix.length && frame.compare(prefix, 0, prefix.length, 0, prefix.length) === 0;
}
