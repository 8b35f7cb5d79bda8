/**
 * Keys whose state the follower (follow.ts) carries from side A instead of their stream commands
 * (B refused a command, or a command's result is carried): which commands of the stream B already
 * holds through those states, and a state read that nothing sent meanwhile can undo.
 *
 *   refused command --read DUMP + PEXPIRETIME on A at offset `at`--> RESTORE on B --> the key's
 *   commands at or before `at` skipped (the state holds them), later ones applied after it
 */
import { ProxyContext } from '../context';
import { statesAt } from './follow-states';
import { FollowRouter, Part } from './follow-router';

type States = NonNullable<Awaited<ReturnType<typeof statesAt>>>;

export class CarriedKeys {
  /** Per key, the offset its carried state was read at: its commands at or before it are in it. */
  private readonly through = new Map<string, number>();
  /** Keys with a state read out: the furthest end of a command for them handed to B meanwhile. */
  private readonly reading = new Map<string, { reads: number; routed: number }>();

  /** A new full sync: the snapshot replaces every state carried before it. */
  clear(): void {
    this.through.clear();
  }

  /** How many of `keys` B holds past the command at `end` already (their state was carried). */
  covered(keys: readonly Buffer[], end: number): number {
    if (this.through.size === 0) return 0;
    let n = 0;
    for (const k of keys) if ((this.through.get(k.toString('latin1')) ?? -1) >= end) n++;
    return n;
  }

  /** A command for `keys` ending at `end` was handed to B. */
  routed(keys: readonly Buffer[], end: number): void {
    if (this.reading.size === 0) return;
    for (const k of keys) {
      const r = this.reading.get(k.toString('latin1'));
      if (r !== undefined) r.routed = Math.max(r.routed, end);
    }
  }

  /**
   * The parts that put each moving key of `keys` on its owner in B as A holds it (RESTORE, or DEL
   * of a key gone), read at a known offset R (one MULTI: DUMP and PEXPIRETIME of each, then ROLE);
   * the stream's commands on them up to R are skipped from now on. Null when A did not answer.
   */
  async states(ctx: ProxyContext, source: string, keys: readonly Buffer[], router: () => FollowRouter, stopped: () => boolean): Promise<Part[] | null> {
    const read = await this.read(ctx, source, keys, stopped);
    if (read === null || stopped()) return null;
    const owners = router();
    const parts: Part[] = [];
    keys.forEach((k, i) => {
      const to = owners.ownerInB(k);
      const args = read.commands[i];
      // Not on the node any more (its slot moved inside A): the stream of the node it went to carries it.
      if (to === null || args === null) return;
      this.through.set(k.toString('latin1'), read.at);
      parts.push({ to, keys: [], carries: [k], args });
    });
    return parts;
  }

  /**
   * Each key's state on `source`, read again until it is at or past every command for these keys
   * handed to B while the read was out (the stream goes on meanwhile: a command past the read's
   * offset may reach B first, and the state put after it would undo it). Null when A did not answer.
   */
  private async read(ctx: ProxyContext, source: string, keys: readonly Buffer[], stopped: () => boolean): Promise<States | null> {
    const names = keys.map((k) => k.toString('latin1'));
    for (const n of names) {
      const r = this.reading.get(n);
      if (r === undefined) this.reading.set(n, { reads: 1, routed: -1 });
      else r.reads++;
    }
    try {
      for (;;) {
        const read = await statesAt(ctx, source, keys);
        if (read === null || stopped() || !names.some((n) => (this.reading.get(n)?.routed ?? -1) > read.at)) return read;
      }
    } finally {
      for (const n of names) {
        const r = this.reading.get(n);
        if (r !== undefined && --r.reads === 0) this.reading.delete(n);
      }
    }
  }
}
