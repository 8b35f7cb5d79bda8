/**
 * Keys the follower (follow.ts) carries as their state read on side A instead of their stream
 * commands: B refused a command, a command's result is carried (its keys have several owners in
 * B), or an earlier follower left a refused command behind (a resume). The states join the
 * ticket of the command they stand for, so the follow's offset (and its ACK to A, and every
 * barrier on it) moves past that command only once they are on B; the node that refused it keeps
 * the command until then (follow-refusals.ts), for a follower that resumes after a crash.
 */
import { ProxyContext } from '../context';
import { KeySpace } from '../../sharding/key-space';
import { log } from '../telemetry/log';
import { CarriedKeys } from './follow-carried-keys';
import { FollowRouter, Part } from './follow-router';
import { Refusal, forgetRefusals, readRefusals, refusedKeys } from './follow-refusals';

const RETRY_MS = 200;

/** A stream command's parts on their way to B: `open` not yet applied; `at` (performance.now()) for the lag; `closed` once all are. */
export type Ticket = { end: number; open: number; at: number; closed?: () => void };

/** What the carry needs of its follower. */
export interface CarryHost {
  stopped(): boolean;
  router(): FollowRouter;
  to(): KeySpace | null;
  /** A ticket queued behind every one handed out before. */
  open(end: number, open: number): Ticket;
  /** Parts given to their appliers in `ticket`. */
  hand(ticket: Ticket, parts: Part[]): void;
  /** Closed tickets counted applied, in order. */
  advance(): void;
  fail(reason: string): void;
}

export class StateCarry {
  /** What of their stream B holds already through the carried states. */
  readonly keys = new CarriedKeys();
  /** Commands B's nodes held as refused when this link began (an earlier follower's, follow-refusals.ts). */
  private left: Refusal[] = [];

  constructor(
    private readonly ctx: ProxyContext,
    private readonly source: string,
    private readonly host: CarryHost,
  ) {}

  /** B refused a command: its keys are carried as their result, before the stream goes on. */
  refused(part: Part, end: number, error: string, ticket: Ticket, refusal?: { node: string; field: string }): void {
    if (this.host.stopped()) return; // the appliers closed: nothing was refused
    if (refusal !== undefined) this.forgetOnClose(ticket, [{ ...refusal, args: part.args }]);
    if (part.carries === undefined) log.warn({ node: this.source, to: part.to, command: part.args[0].toString('latin1'), error }, 'migration: side B refused a command of the stream; its keys are carried as their state');
    // A carried state B failed as well (its node down): carried again after a pause, never dropped.
    this.carry(part.carries ?? part.keys, end, ticket, part.carries !== undefined);
  }

  /** Before a link: the refused commands B's nodes hold under `sources` (this node, and the address its records are under). */
  async readLeft(sources: readonly string[]): Promise<void> {
    const to = this.host.to();
    this.left = to === null ? [] : await readRefusals(this.ctx, to, sources);
  }

  /** A full sync restored: its snapshot holds what every command refused before it left. */
  forgetLeft(): void {
    const to = this.host.to();
    if (to !== null && this.left.length > 0) void forgetRefusals(this.ctx, to, this.left).catch(() => undefined);
  }

  /** A resume at `offset`: the keys of commands B refused under an earlier follower that died before carrying them, carried first. */
  recover(offset: number): void {
    const refused = this.left;
    if (refused.length === 0) return;
    const router = this.host.router();
    const keys = refusedKeys(this.ctx.table, refused).filter((k) => router.ownerInB(k) !== null);
    log.info({ node: this.source, commands: refused.length, keys: keys.length }, 'migration: side B holds commands it refused before this follow resumed; their keys are carried as their state');
    const ticket = this.host.open(offset, 1);
    this.forgetOnClose(ticket, refused);
    if (keys.length > 0) return this.carry(keys, offset, ticket, false);
    ticket.open = 0;
    this.host.advance();
  }

  /** `keys` carried as their state for the command at `end`, in its ticket; after a pause when `later`. */
  carry(keys: Buffer[], end: number, ticket: Ticket, later: boolean): void {
    const done = (): void => {
      ticket.open--;
      this.host.advance();
    };
    const retry = (): void => void this.result(end, keys, ticket).then(done, () => void (this.host.stopped() || setTimeout(retry, RETRY_MS).unref()));
    if (later) setTimeout(retry, RETRY_MS).unref();
    else retry();
  }

  /** The keys' states read on A, restored on B as the command at `end`: in `into` when given, else a ticket of their own. */
  async result(end: number, keys: Buffer[], into?: Ticket): Promise<void> {
    const parts = await this.keys.states(this.ctx, this.source, keys, () => this.host.router(), () => this.host.stopped());
    if (this.host.stopped()) return;
    if (parts === null) return this.host.fail(`cannot read the state of ${keys.length} keys on ${this.source}`);
    const ticket = into ?? this.host.open(end, 0);
    this.host.hand(ticket, parts);
    if (into === undefined) this.host.advance();
  }

  /** Once `ticket` closes (its keys' states on B), the nodes that refused its commands forget them. */
  private forgetOnClose(ticket: Ticket, refusals: Refusal[]): void {
    const before = ticket.closed;
    ticket.closed = () => {
      before?.();
      const to = this.host.to();
      if (to !== null) void forgetRefusals(this.ctx, to, refusals).catch(() => undefined);
    };
  }
}
