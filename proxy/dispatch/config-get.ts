/**
 * CONFIG GET: any master's answer (CONFIG SET reaches every node, so any one speaks for all), with
 * tracking-table-max-keys the proxy's own: the proxy keeps the tracking table (tracking/).
 */
import { ForwardedCommand, ANY_MASTER } from './forward';
import { ProxyContext } from '../context';
import { ReplyOwner } from '../client/reply-slot';
import { withMaxKeys } from '../tracking/table-limit';

export class ConfigGet extends ForwardedCommand {
  constructor(ctx: ProxyContext, owner: ReplyOwner, payload: Buffer) {
    super(ctx, owner, payload, ANY_MASTER, true);
  }

  override complete(frame: Buffer): void {
    super.complete(withMaxKeys(frame, this.ctx.caching.maxKeys));
  }
}
