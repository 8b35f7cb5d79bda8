/**
 * One node's changes, as the proxy hears them: a RESP3 connection of its own in BCAST mode
 * with no prefix (`CLIENT TRACKING ON BCAST`), so the node pushes the name of every key that
 * changes on it, whoever changed it (a client of any proxy, a client connected straight to the
 * node, a script, expiry, eviction), and a null on FLUSHALL/FLUSHDB. The node batches the keys
 * of one event-loop turn into one push. Client-side caching opens one per node reads go to while
 * some client tracks keys (tracking/client-caching.ts); a migration opens one per node of side A
 * while writes converge (migration/change-copier.ts).
 *
 * A PING fence tells when the node has sent every change caused before it.
 */
import { BackendPool } from './pool';
import { PubSubLink } from './pubsub-link';
import { arrayElements } from '../resp/reply-framer';
import * as encode from '../resp/encode';

export interface FeedEvents {
  ready(feed: ChangeFeed): void;
  lost(feed: ChangeFeed, reason: string): void;
  /** Keys that changed on the node; null: the node was flushed. */
  changed(keys: Buffer[] | null, feed: ChangeFeed): void;
}

const TRACKING_ON = encode.command(['CLIENT', 'TRACKING', 'ON', 'BCAST']);
const PING = encode.command(['PING']);
/** `>2 $10 invalidate`, then the keys (an array) or a null. */
const PUSH_HEAD = Buffer.from('>2\r\n$10\r\ninvalidate\r\n');

export class ChangeFeed {
  /** True once the node has accepted CLIENT TRACKING: from then on no change on it goes unreported. */
  ready = false;
  private readonly link: PubSubLink;
  private readonly fences: (() => void)[] = [];

  constructor(
    readonly address: string,
    pool: BackendPool,
    private readonly events: FeedEvents,
    /** Only keys with this prefix (the replication carry hears only the fleet's own bookkeeping here). */
    prefix: string | null = null,
  ) {
    this.link = new PubSubLink(address, pool.linkOptions(3), this.onFrame, (reason) => this.onClose(reason));
    this.link.write(prefix === null ? TRACKING_ON : encode.command(['CLIENT', 'TRACKING', 'ON', 'BCAST', 'PREFIX', prefix]));
  }

  get isClosed(): boolean {
    return this.link.isClosed;
  }

  /** Calls `done` once every invalidation the node queued before now has been handled. */
  fence(done: () => void): void {
    if (this.link.isClosed) {
      done();
      return;
    }
    this.fences.push(done);
    this.link.write(PING);
  }

  close(): void {
    this.link.close();
    this.releaseFences();
  }

  private readonly onFrame = (frame: Buffer): void => {
    if (frame[0] === 62 /* > */) {
      this.events.changed(changedKeys(frame), this);
      return;
    }
    if (frame[0] === 45 /* - */) {
      this.link.close();
      this.onClose(`CLIENT TRACKING refused: ${frame.toString('utf8', 1, frame.length - 2)}`);
      return;
    }
    if (!this.ready) {
      this.ready = true; // +OK to CLIENT TRACKING
      this.events.ready(this);
      return;
    }
    this.fences.shift()?.(); // +PONG
  };

  private onClose(reason: string): void {
    const wasOpen = this.ready;
    this.ready = false;
    this.releaseFences();
    this.events.lost(this, wasOpen ? reason : `${reason} (before tracking was on)`);
  }

  private releaseFences(): void {
    for (const done of this.fences.splice(0)) done();
  }
}

/** The keys of an `invalidate` push, or null for a flush (and for a push the proxy cannot read: when in doubt, flush). */
export function changedKeys(frame: Buffer): Buffer[] | null {
  if (!frame.subarray(0, PUSH_HEAD.length).equals(PUSH_HEAD)) return null;
  const elements = arrayElements(frame.subarray(PUSH_HEAD.length));
  if (elements === null) return null;
  return elements.map(bulkValue);
}

function bulkValue(element: Buffer): Buffer {
  const cr = element.indexOf(13);
  return element.subarray(cr + 2, element.length - 2);
}
