/**
 * One client's CLIENT TRACKING state, and the option checks of CLIENT TRACKING and CLIENT CACHING,
 * with Redis 7.0's texts (networking.c, clientCommand; tracking.c). Pure: the hub that relays the
 * invalidations (client-caching.ts) reads this state, the CLIENT command (dispatch/) sets it.
 */
import { ReplySlot } from '../client/reply-slot';
import { parseInteger } from '../commands/keys';
import * as errors from '../resp/errors';

export interface TrackingRequest {
  on: boolean;
  /** 0: no REDIRECT. */
  redirect: number;
  bcast: boolean;
  optin: boolean;
  optout: boolean;
  noloop: boolean;
  prefixes: Buffer[];
}

export class ClientTracking {
  redirect = 0;
  bcast = false;
  optin = false;
  optout = false;
  noloop = false;
  /** CLIENT CACHING YES (OPTIN) or NO (OPTOUT), for the next command or transaction. */
  caching = false;
  /** The REDIRECT client went away: shown by TRACKINGINFO until tracking is switched on again. */
  brokenRedirect = false;
  /** BCAST prefixes ("" when none was given), kept in byte order as Redis lists them. */
  prefixes: Buffer[] = [];
  /** A read ran since the last "flush everything" (null) invalidation: another one is not redundant. */
  usedSinceFlush = true;
  /** Set while dispatching a command read with the invalidation feeds not all up: a flush follows its reply. */
  flushAfter = false;
  /** Keys the client read and is now writing itself: invalidated right after the write's reply, as Redis does. */
  ownInvalidations: Buffer[] | null = null;
  /** The client is running FLUSHALL/FLUSHDB itself: the null invalidation follows its reply. */
  ownFlush = false;
  /** NOLOOP: keys of the write being dispatched, claimed by the first reply slot it appends. */
  armedWrite: string[] | null = null;
  /**
   * A script or EXEC that may change keys the client read is being dispatched: Redis tells the
   * client right after its reply, before the next one; the proxy keeps a place there (pushHolds).
   */
  holdPushes = false;
  /** Places right after such replies, oldest first: the client's invalidations go into the first until the feeds have passed its command. */
  readonly pushHolds: { slot: ReplySlot; frames: Buffer[]; command: ReplySlot }[] = [];
  /** The reply slot the last armed write claimed, and the last one the feeds have passed. */
  lastClaimed: ReplySlot | null = null;
  lastReleased: ReplySlot | null = null;
  /** NOLOOP: the client's writes not yet answered, by reply slot; and per key how many are open. */
  readonly ownWrites = new Map<ReplySlot, OwnWrite>();
  /** NOLOOP: the client's writes whose invalidations some feed may still bring (answered or not). */
  readonly inFlight = new Set<OwnWrite>();
  readonly ownKeys = new Map<string, number>();
  /**
   * NOLOOP: keys read while the client's own write of them was in flight (`MSET k v` then `GET k`,
   * pipelined). One Redis tracks such a read after the write; the node's later invalidation of the
   * write must not make the proxy forget it.
   */
  readonly readAfterOwnWrite = new Set<string>();

  /** Default mode, or OPTIN after CACHING YES, or OPTOUT without CACHING NO: the command's keys are remembered. */
  get remembersKeys(): boolean {
    if (this.bcast) return false;
    if (this.optin) return this.caching;
    if (this.optout) return !this.caching;
    return true;
  }

  /** CLIENT TRACKING ON again, or for the first time: Redis's enableTracking(). */
  apply(request: TrackingRequest): void {
    this.redirect = request.redirect;
    this.brokenRedirect = false;
    this.optin = request.optin;
    this.optout = request.optout;
    this.noloop = request.noloop;
    this.bcast = request.bcast;
    if (request.bcast) {
      const added = request.prefixes.length === 0 ? [Buffer.alloc(0)] : request.prefixes;
      for (const p of added) if (!this.prefixes.some((q) => q.equals(p))) this.prefixes.push(p);
      this.prefixes.sort(Buffer.compare);
    }
  }

  /** The BCAST prefix `key` falls under, or null. */
  prefixOf(key: Buffer): Buffer | null {
    for (const p of this.prefixes) if (key.length >= p.length && key.subarray(0, p.length).equals(p)) return p;
    return null;
  }

  /** CLIENT TRACKINGINFO's `flags`, in Redis's order. */
  flags(): string[] {
    const out = ['on'];
    if (this.bcast) out.push('bcast');
    if (this.optin) out.push('optin', ...(this.caching ? ['caching-yes'] : []));
    if (this.optout) out.push('optout', ...(this.caching ? ['caching-no'] : []));
    if (this.noloop) out.push('noloop');
    if (this.brokenRedirect) out.push('broken_redirect');
    return out;
  }

  /** NOLOOP: the write's reply slot; its keys stay the client's own until the feeds have passed it. */
  claimWrite(slot: ReplySlot): void {
    const keys = this.armedWrite;
    if (keys === null) return;
    this.armedWrite = null;
    this.lastClaimed = slot;
    const write: OwnWrite = { keys, pending: null };
    this.ownWrites.set(slot, write);
    this.inFlight.add(write);
    for (const k of keys) this.ownKeys.set(k, (this.ownKeys.get(k) ?? 0) + 1);
  }

  /** NOLOOP: a write whose reply came, or null when `slot` is no write of the client's. */
  writeAnswered(slot: ReplySlot): OwnWrite | null {
    const write = this.ownWrites.get(slot);
    if (write === undefined) return null;
    this.ownWrites.delete(slot);
    return write;
  }

  /** NOLOOP: whether an invalidation of `key` that `feed` brings now may be the client's own write's. */
  ownChange(key: string, feed: object): boolean {
    if (!this.noloop) return false;
    for (const w of this.inFlight) if (w.keys.includes(key) && (w.pending === null || w.pending.has(feed))) return true;
    return false;
  }

  /** NOLOOP: the feeds have delivered whatever the write caused. */
  releaseWrite(write: OwnWrite): void {
    this.inFlight.delete(write);
    for (const k of write.keys) {
      const n = (this.ownKeys.get(k) ?? 1) - 1;
      if (n > 0) {
        this.ownKeys.set(k, n);
        continue;
      }
      this.ownKeys.delete(k);
      this.readAfterOwnWrite.delete(k);
    }
  }
}

/**
 * NOLOOP: a write of the client's: its keys, and the feeds that have not yet passed a PING written
 * after its reply (null until the reply came: every feed). A feed brings a write's invalidation
 * before that PING's reply, so what it brings after is someone else's change.
 */
export interface OwnWrite {
  readonly keys: string[];
  pending: Set<object> | null;
}

/** CLIENT TRACKING ON|OFF [REDIRECT id] [BCAST] [PREFIX p ...] [OPTIN] [OPTOUT] [NOLOOP]: the request, or Redis's error. */
export function parseTracking(args: Buffer[], clientExists: (id: number) => boolean, current: ClientTracking | null): TrackingRequest | string {
  const request: TrackingRequest = { on: false, redirect: 0, bcast: false, optin: false, optout: false, noloop: false, prefixes: [] };
  for (let j = 3; j < args.length; j++) {
    const option = args[j].toString('latin1').toLowerCase();
    const moreArgs = j + 1 < args.length;
    if (option === 'redirect' && moreArgs) {
      j++;
      if (request.redirect !== 0) return 'ERR A client can only redirect to a single other client';
      const id = parseInteger(args[j]);
      if (id === null) return errors.NOT_INTEGER;
      if (!clientExists(id)) return 'ERR The client ID you want redirect to does not exist';
      request.redirect = id;
    } else if (option === 'bcast') request.bcast = true;
    else if (option === 'optin') request.optin = true;
    else if (option === 'optout') request.optout = true;
    else if (option === 'noloop') request.noloop = true;
    else if (option === 'prefix' && moreArgs) request.prefixes.push(args[++j]);
    else return errors.SYNTAX_ERROR;
  }
  const onOff = args[2].toString('latin1').toLowerCase();
  if (onOff === 'off') return request;
  if (onOff !== 'on') return errors.SYNTAX_ERROR;
  request.on = true;
  if (!request.bcast && request.prefixes.length > 0) return 'ERR PREFIX option requires BCAST mode to be enabled';
  if (current !== null && current.bcast !== request.bcast) {
    return "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.";
  }
  if (request.bcast && (request.optin || request.optout)) return 'ERR OPTIN and OPTOUT are not compatible with BCAST';
  if (request.optin && request.optout) return "ERR You can't specify both OPTIN mode and OPTOUT mode";
  if (current !== null && ((request.optin && current.optout) || (request.optout && current.optin))) {
    return "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.";
  }
  if (request.bcast) return prefixCollision(request.prefixes, current?.prefixes ?? []) ?? request;
  return request;
}

/** Redis's checkPrefixCollisionsOrReply: no prefix of a client may be a prefix of another. */
function prefixCollision(given: Buffer[], existing: Buffer[]): string | null {
  const overlap = (a: Buffer, b: Buffer): boolean => {
    const n = Math.min(a.length, b.length);
    return a.subarray(0, n).equals(b.subarray(0, n));
  };
  for (let i = 0; i < given.length; i++) {
    for (const e of existing) {
      if (overlap(e, given[i])) {
        return `ERR Prefix '${given[i].toString('latin1')}' overlaps with an existing prefix '${e.toString('latin1')}'. Prefixes for a single client must not overlap.`;
      }
    }
    for (let j = i + 1; j < given.length; j++) {
      if (overlap(given[i], given[j])) {
        return `ERR Prefix '${given[i].toString('latin1')}' overlaps with another provided prefix '${given[j].toString('latin1')}'. Prefixes for a single client must not overlap.`;
      }
    }
  }
  return null;
}

/** CLIENT CACHING YES|NO: null when accepted (the flag is set), else Redis's error. */
export function setCaching(tracking: ClientTracking | null, value: Buffer): string | null {
  if (tracking === null) return 'ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled';
  const v = value.toString('latin1').toLowerCase();
  if (v === 'yes') {
    if (!tracking.optin) return 'ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.';
  } else if (v === 'no') {
    if (!tracking.optout) return 'ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.';
  } else {
    return errors.SYNTAX_ERROR;
  }
  tracking.caching = true;
  return null;
}
