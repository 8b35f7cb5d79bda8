/**
 * CONFIG GET: any master's answer (CONFIG SET reaches every node, so any one speaks for all), with
 * tracking-table-max-keys the proxy's own (the proxy keeps the tracking table: tracking/) and
 * requirepass the proxy's password (config-set.ts), never the nodes'.
 */
import { ForwardedCommand, ANY_MASTER } from './forward';
import { ProxyContext } from '../context';
import { ReplyOwner } from '../client/reply-slot';
import { withMaxKeys } from '../tracking/table-limit';
import { withConfigValue } from '../resp/config-reply';
import { REQUIREPASS_PARAM } from './config-set';

export class ConfigGet extends ForwardedCommand {
  constructor(ctx: ProxyContext, owner: ReplyOwner, payload: Buffer) {
    super(ctx, owner, payload, ANY_MASTER, true);
  }

  override complete(frame: Buffer): void {
    super.complete(withConfigValue(withMaxKeys(frame, this.ctx.caching.maxKeys), REQUIREPASS_PARAM, this.ctx.auth.requirepass));
  }
}
