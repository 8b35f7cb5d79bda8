/**
 * A split request's parts on the plain path: no ring migration to converge, no replica to read
 * from. Each part is written straight to its node as a request of four fields, and its reply goes
 * straight to the merge. Only a part that meets a redirect, a retryable error or a lost connection
 * becomes a ForwardedCommand, which carries on from there as for any request. In cluster mode a
 * split of 10 keys is 10 parts (one per slot), so what a part costs is most of what a split costs.
 */
import { BackendRequest } from '../backend/connection';
import { batchClock } from '../client/reply-flusher';
import { ReplyOwner } from '../client/reply-slot';
import { ProxyContext } from '../context';
import * as encode from '../resp/encode';
import { ForwardedCommand, isRedirectOrRetry } from './forward';
import { ShardGroup, SplitCommand, SplitRule, partCommand } from './split';

/** A SplitCommand whose parts are PartRequests; counted in the latency histogram and reply errors as one request. */
export class PlainSplit extends SplitCommand {
  private readonly startedAt = batchClock();

  constructor(
    private readonly ctx: ProxyContext,
    owner: ReplyOwner,
    rule: SplitRule,
    parts: readonly ShardGroup[],
    keyCount: number,
    private readonly retrySafe: boolean,
  ) {
    super(owner, rule, parts, keyCount);
  }

  /**
   * Writes every part to the node serving its shard: its request built from the client's `args`
   * (keys at `positions`); in cluster mode (`singles`) a part of one key as GET/SET.
   */
  send(rule: SplitRule, args: Buffer[], positions: readonly number[], singles: boolean): void {
    const parts = this.parts;
    for (let i = 0; i < parts.length; i++) {
      const payload = encode.commandOfKeys(partCommand(rule, args[0], parts[i], singles), args, positions, rule.stride, parts[i].keyIndexes);
      const address = this.ctx.router.nodeOf(parts[i].shard);
      if (address === null) {
        this.forwarded(i, payload).start(); // no node serves it yet: ForwardedCommand retries
        continue;
      }
      this.ctx.pool.connection(address, this.owner.id, 2).send(new PartRequest(payload, this, i, address));
    }
  }

  /** Part `i` as a ForwardedCommand replying to the merge. */
  forwarded(i: number, payload: Buffer): ForwardedCommand {
    return new ForwardedCommand(this.ctx, this.partSession(i), payload, this.parts[i].shard, this.retrySafe);
  }

  override complete(frame: Buffer): void {
    if (this.reply !== null) return;
    this.ctx.stats.latency.observe(batchClock() - this.startedAt);
    if (frame[0] === 45 /* - */) this.ctx.stats.replyErrors++;
    super.complete(frame);
  }
}

/** One part written to `address`. Parts speak RESP2, as PartSession does (the merge reads RESP2 headers). */
class PartRequest implements BackendRequest {
  constructor(
    readonly payload: Buffer,
    private readonly split: PlainSplit,
    private readonly index: number,
    private readonly address: string,
  ) {}

  onReply(frame: Buffer): void {
    if (frame[0] === 45 /* - */ && isRedirectOrRetry(frame)) {
      this.split.forwarded(this.index, this.payload).adopt(this.address).onReply(frame);
      return;
    }
    this.split.collect(this.index, frame);
  }

  onFailure(message: string, written: boolean): void {
    this.split.forwarded(this.index, this.payload).adopt(this.address).onFailure(message, written);
  }
}
