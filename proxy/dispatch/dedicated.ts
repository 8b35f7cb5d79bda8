/**
 * Back-end connections owned by one client for a while (a WATCHed transaction, a blocking command),
 * outside the shared lanes. The session keeps every one it holds in `dedicated` and releases them
 * when its client disconnects, so a client that goes away while blocked frees the node's connection.
 */
import { BackendConnection, BackendRequest } from '../backend/connection';
import { ReplyOwner, ReplySlot } from '../client/reply-slot';
import { Releasable } from '../client/client-session';
import * as encode from '../resp/encode';

/** One dedicated connection, registered with its session until released. */
export class DedicatedLink implements Releasable {
  private released = false;

  constructor(readonly address: string, readonly conn: BackendConnection, private readonly holder: Set<Releasable>) {
    holder.add(this);
  }

  get isReleased(): boolean {
    return this.released;
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.holder.delete(this);
    this.conn.close('client released its dedicated connection');
  }

  /**
   * Releases it once the node has answered what was already sent on it (a WATCH pipelined before a
   * DISCARD or RESET still gets its own reply); at once when nothing is pending.
   */
  releaseAfterReplies(): void {
    if (this.released || this.conn.pending === 0) return this.release();
    this.conn.send({ payload: PING, onReply: () => this.release(), onFailure: () => this.release() });
  }
}

const PING = encode.command(['PING']);

/** A reply slot filled by exactly the node's reply on a dedicated connection (no redirects). */
export class DirectCommand extends ReplySlot implements BackendRequest {
  constructor(owner: ReplyOwner, readonly payload: Buffer) {
    super(owner);
  }

  onReply(frame: Buffer): void {
    this.complete(frame);
  }

  onFailure(message: string): void {
    this.complete(encode.error(message));
  }
}
