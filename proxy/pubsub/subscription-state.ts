/**
 * What a Subscription (subscription.ts) keeps: the kinds of subscription and the commands that make
 * them, and per link the frames it still owes, each with its place in the client's reply order, and
 * the barrier that holds the client's replies until every master confirmed a keyspace-capable one.
 */
import { ClientSession } from '../client/client-session';
import { ReplySlot } from '../client/reply-slot';
import { PubSubLink } from '../backend/pubsub-link';
import { EMPTY } from './pubsub-frames';

export type Kind = 'channel' | 'pattern' | 'shard';
export type Role = 'home' | 'events' | 'shard';

export const SUBSCRIBE_KIND = new Map<string, Kind>([
  ['subscribe', 'channel'],
  ['psubscribe', 'pattern'],
  ['ssubscribe', 'shard'],
]);
export const UNSUBSCRIBE_KIND = new Map<string, Kind>([
  ['unsubscribe', 'channel'],
  ['punsubscribe', 'pattern'],
  ['sunsubscribe', 'shard'],
]);
/** In RESP3, what a subscribed client's Subscription still handles; every other command runs as usual. */
export const SUBSCRIBED_MODE_COMMANDS = new Set([...SUBSCRIBE_KIND.keys(), ...UNSUBSCRIBE_KIND.keys(), 'reset']);
export const UNSUBSCRIBE_NAME: Record<Kind, string> = { channel: 'UNSUBSCRIBE', pattern: 'PUNSUBSCRIBE', shard: 'SUNSUBSCRIBE' };
export const SUBSCRIBE_NAME: Record<Kind, string> = { channel: 'SUBSCRIBE', pattern: 'PSUBSCRIBE', shard: 'SSUBSCRIBE' };
export const CLASSIC = ['channel', 'pattern'] as const;
export const KINDS = ['channel', 'pattern', 'shard'] as const;

/** How long a client's replies wait for the other masters to confirm a keyspace-capable subscription. */
const BARRIER_TIMEOUT_MS = 2000;

/** Frames a link still owes for one command written to it. */
export interface Owed {
  frames: number;
  /** The proxy's own (re-)subscription: answered silently. */
  silent: boolean;
  /**
   * The client's: a place per frame in its reply order, taken when it asked, so that replies read
   * in request order (as from one server) whichever link answers first, and messages that arrive
   * after a subscription come after its confirmation.
   */
  readonly places: Place[];
  /** The client's replies wait for this one (a keyspace-capable subscription on another master). */
  barrier: Barrier | null;
}

/**
 * One frame's place in the client's reply order, and, for a (un)subscribe, the confirmation one Redis
 * would send: made when the client asked, with the count and protocol of that moment in request
 * order (links answer in their own order, and RESET or HELLO may switch the protocol meanwhile).
 */
export interface Place {
  readonly slot: ReplySlot;
  readonly confirmation: Buffer | null;
}

export interface LinkState {
  link: PubSubLink;
  readonly owed: Owed[];
  readonly role: Role;
}

/**
 * A place in the client's reply order, taken when a keyspace-capable subscription is asked for and
 * filled (with nothing) once every master has answered it, or after BARRIER_TIMEOUT_MS: replies and
 * messages queue behind it, so the confirmation comes when the subscription is in force everywhere.
 */
export class Barrier {
  /** Writes still unanswered, plus one held by the creator until it has written them all. */
  private pending = 1;
  private readonly slot: ReplySlot;
  private readonly timer: NodeJS.Timeout;

  constructor(session: ClientSession) {
    this.slot = session.track(new ReplySlot(session));
    this.timer = setTimeout(() => this.open(), BARRIER_TIMEOUT_MS);
  }

  waitFor(): void {
    this.pending++;
  }

  done(): void {
    if (--this.pending <= 0) this.open();
  }

  open(): void {
    clearTimeout(this.timer);
    this.slot.complete(EMPTY);
  }
}
