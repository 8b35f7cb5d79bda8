/**
 * What a command strategy (dispatch/) and a converging write (migration/) may ask of the client
 * session it answers. server/session.ts implements it; split.ts's stand-in for one part of a split
 * request does too. Strategies that keep per-client state (a transaction, a subscription) extend
 * it with their own field in their own file, so this file depends on none of them.
 */
import { ReplyOwner, ReplySlot } from './reply-slot';

/** Something a session must give back when its client goes away (a dedicated back-end connection). */
export interface Releasable {
  release(): void;
}

/** CLIENT REPLY: send replies (on), drop them (off), or drop the next request's reply (skip). */
export type ReplyMode = 'on' | 'off' | 'skip';

/** A blocking command in flight, which CLIENT UNBLOCK can end early (dispatch/blocking.ts). */
export interface Unblockable {
  /** Ends the block as its timeout would (`timeout`) or with Redis's UNBLOCKED error; false when it was not blocked on a node. */
  unblock(reason: 'timeout' | 'error'): Promise<boolean>;
}

export interface ClientSession extends ReplyOwner {
  name: Buffer | null;
  /** The user the client is signed in as: `default` until AUTH or HELLO names another. */
  user: string;
  /** The last command's full name (CLIENT LIST's `cmd`), set by the dispatcher. */
  command: string;
  /** The blocking command the client waits on, null when it is not blocked. */
  blocked: Unblockable | null;
  /** Close the client after this reply has been written (QUIT). */
  closeAfterReply: boolean;
  /** False until AUTH when the proxy requires it (security/auth.ts). */
  authenticated: boolean;
  /** Appends a slot to the session's reply order. */
  track<S extends ReplySlot>(slot: S): S;
  /** Appends an already-answered slot. */
  replyNow(reply: Buffer): void;
  /** CLIENT REPLY: applies from the request being dispatched on (ON's own reply is sent, OFF's and SKIP's are not). */
  setReplyMode(mode: ReplyMode): void;
  /** Dedicated back-end connections held for the client, released when it disconnects. */
  readonly dedicated: Set<Releasable>;
  /** Reply bytes not yet taken by the client (Pub/Sub closes a subscriber that lets them pile up); absent for stand-in sessions. */
  readonly pendingOutputBytes?: number;
  /** CLIENT SETINFO's LIB-NAME and LIB-VER, as CLIENT LIST shows them on Redis 7.2 and later; absent until set. */
  lib?: { name: string; ver: string };
  destroy?(): void;
}
