/**
 * A command sent between WATCH and MULTI on the watched shard. It goes on the WATCH connection, in
 * order behind the WATCH. When that node cannot serve it (CLUSTERDOWN or TRYAGAIN during a
 * failover, a redirection after a reshard, a lost connection) the watch no longer guards anything:
 * the transaction is doomed (EXEC answers nil, as when a watched key was touched, and the client's
 * retry loop starts again) and the command rides out the trouble as any forwarded command does,
 * instead of handing the client an error one Redis would not have given.
 */
import { ProxyContext } from '../context';
import { ReplyOwner } from '../client/reply-slot';
import { DedicatedLink } from './dedicated';
import { ForwardedCommand, isRedirectOrRetry } from './forward';

/** What a watched command needs of its transaction: the flag that makes EXEC answer nil. */
interface Doomable {
  doomed: boolean;
}

export class WatchedCommand extends ForwardedCommand {
  private onWatchLink = true;

  constructor(ctx: ProxyContext, owner: ReplyOwner, payload: Buffer, shard: number, retrySafe: boolean, private readonly txn: Doomable, private readonly link: DedicatedLink) {
    super(ctx, owner, payload, shard, retrySafe);
  }

  override start(): void {
    if (!this.onWatchLink) return super.start();
    this.address = this.link.address;
    this.link.conn.send(this);
  }

  override onReply(frame: Buffer): void {
    if (this.onWatchLink && frame[0] === 45 /* - */ && isRedirectOrRetry(frame)) this.leaveWatch();
    super.onReply(frame);
  }

  override onFailure(message: string, written: boolean): void {
    if (this.onWatchLink) this.leaveWatch();
    super.onFailure(message, written);
  }

  private leaveWatch(): void {
    this.onWatchLink = false;
    this.txn.doomed = true;
  }
}
