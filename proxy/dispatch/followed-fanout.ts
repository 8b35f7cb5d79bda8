/**
 * A fan-out to side A's masters that side B follows during a migration (FUNCTION LOAD, SCRIPT
 * LOAD ...; migration/target-mirror.ts): the merged reply of A's masters is held until B has the
 * command too, then given to the client, or B's failure instead. A refusal by A is the client's
 * at once, and B never sees the command.
 */
import { ReplyOwner } from '../client/reply-slot';
import * as encode from '../resp/encode';
import { FanoutCommand, Merge } from './fanout';

export class FollowedFanout extends FanoutCommand {
  private following = false;

  /** `follow`: sends the command to B; null when B took it, else the error text for the client. */
  constructor(owner: ReplyOwner, masters: readonly string[], merge: Merge, private readonly follow: () => Promise<string | null>) {
    super(owner, masters, merge);
  }

  override complete(frame: Buffer): void {
    if (this.reply !== null || this.following) return;
    if (frame[0] === 45) {
      super.complete(frame);
      return;
    }
    this.following = true;
    this.follow().then(
      (problem) => super.complete(problem === null ? frame : encode.error(problem)),
      (err: unknown) => super.complete(encode.error(`ERR slotproxy: ${err instanceof Error ? err.message : String(err)}`)),
    );
  }
}
