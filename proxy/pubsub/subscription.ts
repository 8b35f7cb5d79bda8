/**
 * One client's subscribed mode through the proxy: its links to the nodes (home, event and shard
 * links), what it asked for in request order, the frames each link still owes and where their
 * replies go in the client's order, and following the topology. dispatch/pubsub.ts describes the
 * layout (one home, event links for keyspace notifications, shard links by slot).
 */
import { ClientSession, Releasable } from '../client/client-session';
import { ReplySlot } from '../client/reply-slot';
import { ProxyContext } from '../context';
import { CommandInfo } from '../commands/table';
import { PubSubLink } from '../backend/pubsub-link';
import { isKeyspaceChannel, mayMatchKeyspace } from './keyspace-channels';
import { decodeReply } from '../resp/decode-reply';
import * as encode from '../resp/encode';
import * as errors from '../resp/errors';
import { log } from '../telemetry/log';
import { EMPTY, MESSAGE, PMESSAGE, SMESSAGE, asPush, confirmationFrame, pubsubPong, startsWith, wantedKeyspaceEvent } from './pubsub-frames';
import { PlacementWatch, pubsubHome, placementWatch } from './pubsub-placement';
import { Barrier, CLASSIC, KINDS, Kind, LinkState, Role, SUBSCRIBE_KIND, SUBSCRIBE_NAME, UNSUBSCRIBE_KIND, UNSUBSCRIBE_NAME } from './subscription-state';

/** Redis's default `client-output-buffer-limit pubsub 32mb`. */
const SUBSCRIBER_OUTPUT_LIMIT_BYTES = 32 * 1024 * 1024;
const RELINK_BASE_MS = 50;
const RELINK_CAP_MS = 1000;

/** A session as Pub/Sub sees it: its subscribed mode, null when not subscribed. */
export interface SubscriberClient extends ClientSession {
  subscription: Subscription | null;
}

/** Whether a (p)subscription may receive keyspace notifications, which only the key's node publishes. */
function hearsKeyspace(kind: Kind, name: Buffer): boolean {
  if (kind === 'channel') return isKeyspaceChannel(name);
  return kind === 'pattern' && mayMatchKeyspace(name);
}

export class Subscription implements Releasable {
  private home: LinkState | null = null;
  /** Masters other than the home, by address: keyspace-capable subscriptions only. */
  private readonly eventLinks = new Map<string, LinkState>();
  private readonly shardLinks = new Map<string, LinkState>();
  /** What the client asked for (latin1 name -> name), sent again when a link is reopened. */
  private readonly wanted: Record<Kind, Map<string, Buffer>> = { channel: new Map(), pattern: new Map(), shard: new Map() };
  /** What the nodes confirmed (home and shard links): CLIENT LIST's counts, and which shard channels to subscribe again. */
  private readonly confirmed: Record<Kind, Set<string>> = { channel: new Set(), pattern: new Set(), shard: new Set() };
  private released = false;
  /** Subscribed mode is over in request order; the links answer what is owed, then close (endIfIdle). */
  private detached = false;
  private relinkAttempts = 0;
  private relinkTimer: NodeJS.Timeout | null = null;
  private readonly watch: PlacementWatch;

  constructor(
    private readonly ctx: ProxyContext,
    private readonly session: SubscriberClient,
    /** The proxy's own answer to a command it runs itself (QUIT, RESET: dispatch/local.ts). */
    private readonly answerLocally: (name: string, args: Buffer[]) => Buffer,
  ) {
    session.dedicated.add(this);
    this.watch = placementWatch(ctx);
    this.watch.add(this);
  }

  /** What the client asked for: channels (shard channels too) and patterns (ACL SETUSER checks them). */
  names(): { channels: Buffer[]; patterns: Buffer[] } {
    return { channels: [...this.wanted.channel.values(), ...this.wanted.shard.values()], patterns: [...this.wanted.pattern.values()] };
  }

  /** Any command from a client in subscribed mode (or the SUBSCRIBE that starts it). */
  command(info: CommandInfo, args: Buffer[]): void {
    const name = info.name;
    const subKind = SUBSCRIBE_KIND.get(name);
    if (subKind !== undefined) return this.subscribe(subKind, args);
    const unsubKind = UNSUBSCRIBE_KIND.get(name);
    if (unsubKind !== undefined) return this.unsubscribe(unsubKind, args.slice(1));
    switch (name) {
      case 'ping':
        // Answered here, in its place: a link's own mode may differ from the client's (a home link
        // with nothing left while shard channels remain).
        return this.session.replyNow(args.length > 2 ? encode.error(errors.wrongArity('ping')) : pubsubPong(args));
      case 'quit':
        return this.session.replyNow(this.answerLocally('quit', args));
      case 'reset':
        // Confirmations asked for before RESET still come first, as on Redis; RESET's own unsubscribing is silent.
        this.detach();
        this.session.replyNow(this.answerLocally('reset', args));
        return this.endIfIdle();
      default:
        return this.session.replyNow(encode.error(errors.notAllowedWhileSubscribed(name)));
    }
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.session.dedicated.delete(this);
    this.watch.delete(this);
    if (this.relinkTimer !== null) clearTimeout(this.relinkTimer);
    if (this.session.subscription === this) this.session.subscription = null;
    if (this.home !== null) this.drop(this.home);
    for (const s of [...this.eventLinks.values(), ...this.shardLinks.values()]) this.drop(s);
    this.eventLinks.clear();
    this.shardLinks.clear();
  }

  /**
   * The topology changed (or a lost link waited its turn): move the home link to the current home,
   * give every other master an event link while keyspace-capable subscriptions exist, and close the
   * links to nodes that are no longer masters.
   */
  follow(): void {
    if (this.released || this.detached) return;
    const home = pubsubHome(this.ctx);
    if (this.home !== null && home !== null && this.home.link.address !== home) {
      if (this.home.owed.some((o) => !o.silent)) {
        // Confirmations the client waits for come from this link: move once they are in.
        this.scheduleFollow(RELINK_BASE_MS);
      } else {
        log.info({ from: this.home.link.address, to: home }, 'Pub/Sub home moved; subscribing there');
        this.dropHome();
      }
    }
    if (this.home === null && this.wanted.channel.size + this.wanted.pattern.size > 0 && this.homeLink() === null) this.scheduleFollow(RELINK_CAP_MS);
    this.followMasters(null);
  }

  private followMasters(barrier: Barrier | null): void {
    const home = this.home?.link.address ?? pubsubHome(this.ctx);
    const masters = new Set(this.ctx.router.masters());
    const names = CLASSIC.map((kind) => this.keyspaceNames(kind));
    const needed = names[0].length + names[1].length > 0;
    for (const [address, state] of this.eventLinks) {
      if (!needed || address === home || !masters.has(address)) {
        this.eventLinks.delete(address);
        this.drop(state);
      }
    }
    if (!needed) return;
    for (const address of masters) {
      if (address === home || this.eventLinks.has(address)) continue;
      const state = this.open(address, 'events');
      this.eventLinks.set(address, state);
      CLASSIC.forEach((kind, i) => {
        if (names[i].length > 0) this.write(state, encode.command([SUBSCRIBE_NAME[kind], ...names[i]]), names[i].length, true, barrier);
      });
    }
  }

  private keyspaceNames(kind: 'channel' | 'pattern'): Buffer[] {
    return [...this.wanted[kind].values()].filter((n) => hearsKeyspace(kind, n));
  }

  private scheduleFollow(delay: number): void {
    if (this.released || this.relinkTimer !== null) return;
    this.relinkTimer = setTimeout(() => {
      this.relinkTimer = null;
      const refreshed = this.ctx.topology?.refresh() ?? Promise.resolve();
      void refreshed.catch(() => undefined).then(() => this.follow());
    }, delay);
  }

  private subscribe(kind: Kind, args: Buffer[]): void {
    const names = args.slice(1);
    if (kind === 'shard' && !this.inOneSlot(names)) return this.endIfIdle();
    const state = kind === 'shard' ? this.shardLink(this.ctx.router.shardOf(names[0])) : this.homeLink();
    if (state === null) {
      this.session.replyNow(encode.error(kind === 'shard' ? errors.SLOT_NOT_SERVED : errors.PROXY_NOT_READY));
      return this.endIfIdle();
    }
    const confirmations = this.record(kind, names, true);
    const everywhere = names.filter((n) => hearsKeyspace(kind, n));
    if (everywhere.length > 0) {
      // Every other master hears these too (existing event links now, new ones with all names);
      // the client's confirmation waits until they all have answered.
      const barrier = new Barrier(this.session);
      const payload = encode.command([SUBSCRIBE_NAME[kind], ...everywhere]);
      for (const s of this.eventLinks.values()) this.write(s, payload, everywhere.length, true, barrier);
      this.followMasters(barrier);
      barrier.done();
    }
    this.write(state, encode.command(args), names.length, false, null, confirmations);
  }

  private unsubscribe(kind: Kind, given: Buffer[]): void {
    const names = given.length > 0 ? given : [...this.wanted[kind].values()];
    if (names.length === 0) {
      this.pushNow(this.confirmation(UNSUBSCRIBE_NAME[kind].toLowerCase(), null, this.count(kind)));
      return this.endIfIdle();
    }
    if (kind === 'shard' && given.length > 1 && !this.inOneSlot(given)) return this.endIfIdle();
    // Each name goes to the link that holds it, names held nowhere are answered by the proxy, and
    // runs of names keep their order, so the confirmations come in the order the names were given.
    const everywhere = names.filter((n) => this.wanted[kind].has(n.toString('latin1')) && hearsKeyspace(kind, n));
    const holders = names.map((n) => (this.wanted[kind].has(n.toString('latin1')) ? this.linkHolding(kind, n) : null));
    const confirmations = this.record(kind, names, false);
    if (everywhere.length > 0) {
      const payload = encode.command([UNSUBSCRIBE_NAME[kind], ...everywhere]);
      for (const s of this.eventLinks.values()) this.write(s, payload, everywhere.length, true);
      this.followMasters(null);
    }
    for (let i = 0, j = 1; i < names.length; i = j++) {
      const state = holders[i];
      while (j < names.length && holders[j] === state) j++;
      if (state !== null) this.write(state, encode.command([UNSUBSCRIBE_NAME[kind], ...names.slice(i, j)]), j - i, false, null, confirmations.slice(i, j));
      else for (let k = i; k < j; k++) this.pushNow(confirmations[k]);
    }
    this.endIfIdle();
  }

  /** Shard channels of one command must share a slot, as Redis Cluster answers (nothing is sent otherwise). */
  private inOneSlot(names: Buffer[]): boolean {
    const router = this.ctx.router;
    const shard = router.shardOf(names[0]);
    for (let i = 1; i < names.length; i++) {
      if (router.shardOf(names[i]) !== shard) {
        this.ctx.stats.crossSlotErrors++;
        this.session.replyNow(encode.error(errors.CROSSSLOT));
        return false;
      }
    }
    return true;
  }

  /**
   * Applies a (un)subscribe to what the client has, in request order, and returns each name's
   * confirmation as one Redis would write it now: with the count after that name, in the client's
   * protocol of this moment.
   */
  private record(kind: Kind, names: Buffer[], subscribing: boolean): Buffer[] {
    const verb = (subscribing ? SUBSCRIBE_NAME : UNSUBSCRIBE_NAME)[kind].toLowerCase();
    return names.map((n) => {
      if (subscribing) this.wanted[kind].set(n.toString('latin1'), n);
      else this.wanted[kind].delete(n.toString('latin1'));
      return this.confirmation(verb, n, this.count(kind));
    });
  }

  private linkHolding(kind: Kind, name: Buffer): LinkState | null {
    if (kind !== 'shard') return this.home;
    const address = this.ctx.router.nodeOf(this.ctx.router.shardOf(name));
    return (address === null ? undefined : this.shardLinks.get(address)) ?? this.shardLinks.values().next().value ?? null;
  }

  /**
   * A place for a (un)subscribe confirmation or a message: sent whatever CLIENT REPLY says, as Redis
   * 7.0 sends them (they are pushes there, in RESP2 as in RESP3), in request order.
   */
  private pushSlot(): ReplySlot {
    const slot = this.session.track(new ReplySlot(this.session));
    slot.silent = false;
    return slot;
  }

  private pushNow(frame: Buffer): void {
    this.pushSlot().complete(frame);
  }

  /** `confirmations`: what the client is to get for each frame that confirms a (un)subscribe (else the node's frame). */
  private write(state: LinkState, payload: Buffer, frames: number, silent: boolean, barrier: Barrier | null = null, confirmations: Buffer[] = []): void {
    barrier?.waitFor();
    const places = silent ? [] : Array.from({ length: frames }, (_, i) => ({ slot: this.pushSlot(), confirmation: confirmations[i] ?? null }));
    state.owed.push({ frames, silent, barrier, places });
    state.link.write(payload);
  }

  /** The home link; a new one first subscribes again to everything the client already has. */
  private homeLink(): LinkState | null {
    if (this.home !== null) return this.home;
    const address = pubsubHome(this.ctx);
    if (address === null) return null;
    const state = this.open(address, 'home');
    this.home = state;
    for (const kind of CLASSIC) {
      const names = [...this.wanted[kind].values()];
      if (names.length > 0) this.write(state, encode.command([SUBSCRIBE_NAME[kind], ...names]), names.length, true);
    }
    return state;
  }

  private dropHome(): void {
    if (this.home === null) return;
    this.drop(this.home);
    this.home = null;
    for (const kind of CLASSIC) this.confirmed[kind].clear();
  }

  private shardLink(shard: number): LinkState | null {
    const address = this.ctx.router.nodeOf(shard);
    if (address === null) return null;
    let state = this.shardLinks.get(address);
    if (state === undefined) {
      state = this.open(address, 'shard');
      this.shardLinks.set(address, state);
    }
    return state;
  }

  private open(address: string, role: Role): LinkState {
    const state: LinkState = {
      link: new PubSubLink(
        address,
        this.ctx.pool.linkOptions(),
        (frame) => this.onFrame(state, frame),
        (reason) => this.onLinkLost(state, reason),
      ),
      owed: [],
      role,
    };
    return state;
  }

  /** Closes a link the proxy no longer wants (moved, or the client is done): what it owes is given up. */
  private drop(state: LinkState): void {
    state.link.close();
    for (const owed of state.owed) {
      owed.barrier?.done();
      for (const place of owed.places) place.slot.complete(EMPTY);
    }
    state.owed.length = 0;
  }

  private onFrame(state: LinkState, frame: Buffer): void {
    if (startsWith(frame, MESSAGE) || startsWith(frame, PMESSAGE) || startsWith(frame, SMESSAGE)) {
      if (this.detached || (state.role === 'events' && !wantedKeyspaceEvent(frame, this.wanted.channel, this.wanted.pattern))) return;
      const pending = this.session.pendingOutputBytes ?? 0;
      if (pending > SUBSCRIBER_OUTPUT_LIMIT_BYTES) {
        // Redis's client-output-buffer-limit for pubsub: a subscriber that does not read is closed.
        log.warn({ pendingBytes: pending }, 'closing a subscriber that does not read its messages');
        this.release();
        this.session.destroy?.();
        return;
      }
      this.pushNow(this.session.protocol === 3 ? asPush(frame) : frame);
      return;
    }
    if (state.role !== 'events') return this.onReply(state, frame);
    this.settle(state, frame, true);
    if (frame[0] === 45 /* - */) log.warn({ node: state.link.address, error: frame.toString('utf8', 1, frame.length - 2) }, 'a keyspace subscription was refused');
    else this.relinkAttempts = 0;
  }

  /** A confirmation, a PONG or an error from the home link or a shard link. */
  private onReply(state: LinkState, frame: Buffer): void {
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
    const subKind = SUBSCRIBE_KIND.get(kind);
    const unsubKind = UNSUBSCRIBE_KIND.get(kind);
    if (subKind !== undefined && channel !== null) {
      this.relinkAttempts = 0;
      this.confirmed[subKind].add(channel.toString('latin1'));
    } else if (unsubKind !== undefined) {
      if (channel !== null) this.confirmed[unsubKind].delete(channel.toString('latin1'));
    } else if (head?.silent === true && state.role === 'shard') {
      // An error to a re-subscription (MOVED: the slot moved again): try again shortly.
      this.resubscribeShard([...this.wanted.shard.values()].filter((n) => !this.confirmed.shard.has(n.toString('latin1'))));
    }
    const confirms = subKind ?? unsubKind;
    const made = head?.places[0]?.confirmation ?? null;
    this.settle(state, confirms === undefined ? frame : (made ?? this.confirmation(kind, channel, this.count(confirms))), head?.silent === true);
    this.endIfIdle();
  }

  /**
   * One frame received: the head of what the link owes counts it down (and lets its barrier go when
   * done); unless the head is silent, `reply` goes to the client in the place taken for it, or after
   * everything when none was (a frame nobody asked for). An error answers the whole command, as a
   * node sends one error for it, however many frames its success would have been.
   */
  private settle(state: LinkState, reply: Buffer, silent: boolean): void {
    const head = state.owed[0];
    const place = head?.places.shift();
    if (!silent) {
      if (place !== undefined) place.slot.complete(reply);
      else if (!this.detached) this.session.replyNow(reply);
    }
    if (head === undefined) return;
    if (reply[0] === 45 /* - */) {
      head.frames = 0;
      for (const rest of head.places.splice(0)) rest.slot.complete(EMPTY);
    }
    if (--head.frames > 0) return;
    state.owed.shift();
    head.barrier?.done();
  }

  private confirmation(kind: string, channel: Buffer | null, count: number): Buffer {
    return confirmationFrame(this.session.protocol, kind, channel, count);
  }

  /** CLIENT LIST's sub, psub and ssub. */
  counts(): { sub: number; psub: number; ssub: number } {
    return { sub: this.confirmed.channel.size, psub: this.confirmed.pattern.size, ssub: this.confirmed.shard.size };
  }

  /** What the client has in request order; regular counts cover channels and patterns, shard channels are counted apart, as Redis does. */
  private count(kind: Kind): number {
    return kind === 'shard' ? this.wanted.shard.size : this.wanted.channel.size + this.wanted.pattern.size;
  }

  /** Leaves subscribed mode once no subscription is left in request order; releases the links once nothing is owed. */
  private endIfIdle(): void {
    if (this.released) return;
    if (!this.detached) {
      if (this.wanted.channel.size + this.wanted.pattern.size + this.wanted.shard.size > 0) return;
      this.detach();
    }
    if (this.home !== null && this.home.owed.length > 0) return;
    for (const s of this.shardLinks.values()) if (s.owed.length > 0) return;
    this.release();
  }

  /**
   * Subscribed mode ends here in request order: the session's next commands run as on Redis (a new
   * SUBSCRIBE starts a new Subscription), no more messages are passed on, the event links go now
   * (they owe the client nothing but barriers), and home and shard links stay for what they owe.
   */
  private detach(): void {
    this.detached = true;
    if (this.session.subscription === this) this.session.subscription = null;
    for (const kind of KINDS) this.wanted[kind].clear();
    this.followMasters(null);
  }

  private onLinkLost(state: LinkState, reason: string): void {
    if (this.released) return;
    log.info({ node: state.link.address, reason }, 'subscriber link lost; subscribing again');
    // Confirmations owed on the dead link will not come: answer them as the client expects.
    for (const owed of state.owed) {
      owed.barrier?.done();
      for (const place of owed.places) place.slot.complete(encode.error(errors.connectionLost(state.link.address)));
    }
    state.owed.length = 0;
    if (this.detached) {
      if (this.home === state) this.home = null;
      else if (this.shardLinks.get(state.link.address) === state) this.shardLinks.delete(state.link.address);
      return this.endIfIdle();
    }
    this.ctx.topology?.requestRefresh();
    const delay = Math.min(RELINK_CAP_MS, RELINK_BASE_MS * 2 ** this.relinkAttempts++);
    if (state.role === 'home') {
      this.home = null;
      for (const kind of CLASSIC) this.confirmed[kind].clear();
      this.scheduleFollow(delay);
    } else if (state.role === 'events') {
      if (this.eventLinks.get(state.link.address) === state) this.eventLinks.delete(state.link.address);
      this.scheduleFollow(delay);
    } else {
      this.shardLinks.delete(state.link.address);
      const lost = [...this.wanted.shard.values()].filter((n) => this.ctx.router.nodeOf(this.ctx.router.shardOf(n)) === state.link.address || !this.confirmed.shard.has(n.toString('latin1')));
      for (const n of lost) this.confirmed.shard.delete(n.toString('latin1'));
      setTimeout(() => this.resubscribeShard(lost), delay);
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
