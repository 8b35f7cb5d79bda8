/**
 * The snapshot's entries restored on side B as fast as B takes them: each RESTORE is one request on
 * the pool's connection to its node (many share a write, as clients' requests do), with at most
 * WINDOW unanswered at a time for the whole snapshot. A cluster's redirect (B resharded meanwhile)
 * is followed for that key alone (side-request.ts); any other refusal fails the snapshot.
 */
import { ProxyContext } from '../context';
import { SlotOwners } from '../../sharding/key-space';
import { sideRequest } from './side-request';
import { redirectOf } from './redirect';
import * as encode from '../resp/encode';
import { tooSoon } from './follow-expiry';

const WINDOW = 20_000;
const RESTORE = Buffer.from('RESTORE');
const REPLACE = Buffer.from('REPLACE');
const ABSTTL = Buffer.from('ABSTTL');

/** A snapshot entry's RESTORE on B; an expiry already (nearly) past is A's to carry out, with a DEL in its stream (follow-expiry.ts). */
export function restoreArgs(key: Buffer, expireAtMs: number | null, dump: Buffer): Buffer[] {
  const ttl = expireAtMs === null || tooSoon(expireAtMs) ? null : expireAtMs;
  return [RESTORE, key, Buffer.from(ttl === null ? '0' : String(ttl)), dump, REPLACE, ...(ttl === null ? [] : [ABSTTL])];
}
const LANE = 0;
const NO_CLIENT = Object.freeze({ id: -1 });

export class BulkRestore {
  private open = 0;
  private failure: Error | null = null;
  private wake: (() => void) | null = null;
  restored = 0;

  constructor(
    private readonly ctx: ProxyContext,
    private readonly owners: SlotOwners | null,
  ) {}

  /** Sends one RESTORE; resolves at once unless WINDOW are unanswered (then once fewer are). */
  async push(to: string, args: Buffer[]): Promise<void> {
    if (this.failure !== null) throw this.failure;
    this.open++;
    const payload = encode.command(args);
    this.ctx.pool.connection(to, LANE).send({
      payload,
      internal: true,
      owner: NO_CLIENT,
      onReply: (frame) => {
        if (frame[0] !== 45) return this.done(null);
        if (this.owners !== null && redirectOf(frame, to) !== null) {
          void sideRequest(this.ctx.pool, this.owners, to, args, { lane: LANE, maxRedirects: this.ctx.forward.maxRedirects, retryWindowMs: this.ctx.forward.retryWindowMs }).then(
            (f) => this.done(f[0] === 45 ? `RESTORE on ${to}: ${f.toString('utf8', 1, f.length - 2)}` : null),
            (err: unknown) => this.done(String(err)),
          );
          return;
        }
        this.done(`RESTORE on ${to}: ${frame.toString('utf8', 1, frame.length - 2)}`);
      },
      onFailure: (message) => this.done(`RESTORE on ${to}: ${message}`),
    });
    if (this.open >= WINDOW) await new Promise<void>((resolve) => (this.wake = resolve));
  }

  /** Resolves once every RESTORE sent is answered; rejects with the first refusal. */
  async finish(): Promise<void> {
    while (this.open > 0) await new Promise<void>((resolve) => (this.wake = resolve));
    if (this.failure !== null) throw this.failure;
  }

  private done(error: string | null): void {
    this.open--;
    if (error === null) this.restored++;
    else this.failure ??= new Error(error);
    const wake = this.wake;
    if (wake !== null && (this.open < WINDOW / 2 || this.open === 0)) {
      this.wake = null;
      wake();
    }
  }
}
