/**
 * A client's write during a migration's double-write or read-new phase: sent to the keys' node in
 * ring A, then, for each key whose owner in ring B differs, the key's resulting state is copied
 * there (sharding/converge.ts) before the client gets A's reply. The copy runs on the same shared
 * connection lane as the write, after its reply, so the snapshot always sees the write.
 *
 * The client's reply is A's reply, unchanged, once every copy is done; if a copy fails (B node
 * down), the client gets an error saying the write ran on A but did not reach B (`migrate copy`
 * repairs it, and `migrate verify` finds it).
 */
import { BackendRequest } from '../backend/connection';
import { ProxyContext } from '../context';
import { ReplyOwner, ReplySlot } from '../reply-slot';
import { convergeKey } from '../../sharding/converge';
import * as encode from '../resp/encode';
import * as errors from '../errors';

/** A key of the write whose owner in ring B (`to`) differs from its node in ring A (`from`). */
export interface CopyTarget {
  key: Buffer;
  from: string;
  to: string;
}

export class ConvergingWrite extends ReplySlot implements BackendRequest {
  /** Settles when the client's reply is known (read-new holds the session's next requests on it). */
  readonly settled: Promise<void>;
  private settle: () => void = () => undefined;

  constructor(
    private readonly ctx: ProxyContext,
    owner: ReplyOwner,
    readonly payload: Buffer,
    private readonly address: string,
    private readonly targets: readonly CopyTarget[],
  ) {
    super(owner);
    this.settled = new Promise((resolve) => (this.settle = resolve));
  }

  start(): void {
    this.ctx.pool.connection(this.address, this.owner.id).send(this);
  }

  onReply(frame: Buffer): void {
    // Even an error reply may follow a partial change (a script that wrote, then failed): copy anyway.
    this.copyThenComplete(frame).catch(() => undefined);
  }

  onFailure(message: string, written: boolean): void {
    this.ctx.stats.backendErrors++;
    if (!written) {
      this.finish(encode.error(message));
      return;
    }
    // It may have run on A: still try to bring B up to date, then pass the failure on.
    this.copyThenComplete(encode.error(message)).catch(() => undefined);
  }

  private async copyThenComplete(frame: Buffer): Promise<void> {
    const failures: string[] = [];
    const copies: Promise<void>[] = [];
    for (const target of this.targets) {
      const from = this.ctx.pool.connection(target.from, this.owner.id);
      const to = this.ctx.pool.connection(target.to, this.owner.id);
      copies.push(
        convergeKey(from, to, target.key, 0).then(
          () => undefined,
          (err: unknown) => void failures.push(`${target.to}: ${err instanceof Error ? err.message : String(err)}`),
        ),
      );
    }
    await Promise.all(copies);
    if (failures.length > 0) {
      this.ctx.stats.backendErrors++;
      this.finish(encode.error(errors.migrationCopyFailed(this.address, failures[0])));
      return;
    }
    this.finish(frame);
  }

  private finish(frame: Buffer): void {
    this.complete(frame);
    this.settle();
  }
}
