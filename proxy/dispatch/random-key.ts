/**
 * RANDOMKEY over the whole keyspace: DBSIZE on every master, one master picked with a probability
 * in proportion to its key count, then RANDOMKEY there. A master that turned out empty (its keys
 * were deleted or had expired since DBSIZE) is left out and another one is picked; nil only when
 * every master is empty. At most one RANDOMKEY per master.
 */
import { ProxyContext } from '../context';
import { ReplyOwner, ReplySlot } from '../client/reply-slot';
import * as encode from '../resp/encode';
import * as errors from '../resp/errors';

const DBSIZE = encode.command(['DBSIZE']);
const RANDOMKEY = encode.command(['RANDOMKEY']);

export class RandomKeyCommand extends ReplySlot {
  /** A master's DBSIZE failed: when no other has a key, the client gets that error, not nil. */
  private dbsizeError: Buffer | null = null;

  constructor(private readonly ctx: ProxyContext, owner: ReplyOwner, private readonly masters: readonly string[]) {
    super(owner);
  }

  start(): void {
    if (this.masters.length === 0) return this.complete(encode.error(errors.PROXY_NOT_READY));
    const sizes = new Array<number>(this.masters.length).fill(0);
    let missing = this.masters.length;
    this.masters.forEach((address, i) => {
      const done = (frame: Buffer): void => {
        if (frame[0] === 58 /* : */) sizes[i] = Number(frame.toString('latin1', 1, frame.length - 2));
        else this.dbsizeError = frame;
        if (--missing === 0) this.pick(sizes, null);
      };
      // The client's own lane (and protocol): DBSIZE comes after the client's earlier writes there.
      this.ctx.pool
        .connection(address, this.owner.id, this.owner.protocol)
        .send({ payload: DBSIZE, onReply: done, onFailure: (m) => done(encode.error(m)) });
    });
  }

  /** RANDOMKEY on a master drawn by weight; on nil (`nil`: that reply), the next draw leaves it out. */
  private pick(sizes: number[], nil: Buffer | null): void {
    const total = sizes.reduce((a, b) => a + b, 0);
    if (total === 0) return this.complete(this.dbsizeError ?? nil ?? (this.owner.protocol === 3 ? encode.RESP3_NULL : encode.NULL_BULK));
    let draw = Math.random() * total;
    let i = 0;
    while (i < sizes.length - 1 && draw >= sizes[i]) {
      draw -= sizes[i];
      i++;
    }
    const answer = (frame: Buffer): void => {
      if (!isNil(frame)) return this.complete(frame);
      sizes[i] = 0;
      this.pick(sizes, frame);
    };
    this.ctx.pool
      .connection(this.masters[i], this.owner.id, this.owner.protocol)
      .send({ payload: RANDOMKEY, onReply: answer, onFailure: (m) => this.complete(encode.error(m)) });
  }
}


function isNil(frame: Buffer): boolean {
  return (frame[0] === 36 /* $ */ && frame[1] === 45) /* $-1 */ || frame[0] === 95 /* _ */;
}
