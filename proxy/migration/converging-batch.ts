/**
 * Converging writes (converging-write.ts) that reach the same node of side A on the same connection
 * in one turn of the event loop (a client's pipeline, several clients sharing a lane) go as one
 * burst, and their keys as one APPLY per node (and fence) of side B:
 *
 *   on A:  MULTI, w1 ... wn, SNAPSHOT_MANY k..., EXEC      (one SNAPSHOT_MANY per bookkeeping)
 *   on B:  APPLY_MANY k... per node and fence
 *
 * Each client still gets its own element of EXEC's reply. The burst is an open group of its
 * connection (BackendConnection.openGroup): it is queued whole when the turn's output is written,
 * or before anything else one of its clients sends there (so nothing a client sends after its
 * write can run before it); other clients' requests go ahead of it meanwhile, as they may. The
 * snapshots follow every write of the burst inside one MULTI, so no other command
 * runs between a write and its key's snapshot: the version is the state right after it as far as
 * `done` is concerned (converge.ts). A key written twice in a burst is snapshotted once, after both.
 *
 * Redis refuses a whole MULTI when one command is refused at queue time (EXECABORT: nothing ran).
 * Writes that may be refused for reasons the others do not share stay apart (the caller's `group`:
 * writes Redis refuses when out of memory never share a burst with those it does not; on a Redis
 * Cluster side A, where a key's slot may be moving, none is shared). Should a shared burst still be
 * refused because of one write (an ACL rule of the proxy's user, say), that write gets its own
 * refusal and each other one is sent again on its own, unless a later request of its client is
 * already behind the burst (it would overtake the write): that write is answered that it did not
 * run. The node then gets one burst per write for a minute. The scripts go by SHA1 once a node is known to hold them (the first burst to a node sends
 * the body); a node that answers NOSCRIPT (a restart, SCRIPT FLUSH) gets the keys' snapshots taken
 * on their own after the burst, and its next burst sends the body again.
 */
import { BackendConnection, BackendRequest, OpenGroup } from '../backend/connection';
import { ProxyContext } from '../context';
import { arrayElements } from '../resp/reply-framer';
import { ApplyOutcome, Snapshot, parseSnapshots, snapshotManyCommand } from './converge';
import { CopyTarget, groupIndexes, snapshotThenApply } from './copy-keys';
import { applyBurst } from './apply-burst';
import * as encode from '../resp/encode';

/** A write of a burst: converging-write.ts. */
export interface BurstWrite {
  readonly payload: Buffer;
  readonly targets: readonly CopyTarget[];
  /** A script, which may write keys it does not declare: its declared keys are applied after the change feed's barrier. */
  readonly undeclared: boolean;
  readonly clientId: number;
  burstDone(result: BurstResult): void;
}

export type BurstResult =
  /**
   * EXEC ran: the write's element of its reply, its keys' snapshots and what their APPLYs answered.
   * `exact`: the snapshots were taken inside the burst; else afterwards, on their own (NOSCRIPT).
   */
  | { kind: 'ran'; reply: Buffer; snapshots: Snapshot[]; outcomes: ApplyOutcome[]; exact: boolean }
  /** EXEC ran but the keys' copy to side B failed. */
  | { kind: 'copy-failed'; message: string }
  /**
   * Nothing ran (EXECABORT). `alone`: the write was the burst's only one; `frames`: every part's
   * queue-time reply; `resendable`: nothing of its client is behind the burst, so it may be sent again.
   */
  | { kind: 'aborted'; alone: boolean; resendable: boolean; queued: Buffer; exec: Buffer; frames: (Buffer | null)[] }
  /**
   * The connection failed: no reply. `written`: EXEC reached the wire, so the burst may have run
   * (its keys were copied all the same); else nothing ran.
   */
  | { kind: 'failed'; message: string; written: boolean };

const MULTI = encode.command(['MULTI']);
const EXEC = encode.command(['EXEC']);
const ASKING = encode.command(['ASKING']);

/** The burst still open at the end of each connection's queue. */
const open = new WeakMap<BackendConnection, Burst>();
/** Nodes of side A known to hold SNAPSHOT_MANY: bursts to others send its body (which loads it). */
const loaded = new Set<string>();
/** Nodes of side A that refused one write of a shared burst: until when they get a burst per write. */
const unshared = new Map<string, number>();
const UNSHARED_MS = 60_000;
/** The burst's own commands (MULTI, the snapshots, EXEC) are no client's. */
const NO_CLIENT = Object.freeze({ id: -1 });

/** False while `address` gets a burst per write (it refused one write of a shared burst). */
export function sharesBursts(address: string): boolean {
  const until = unshared.get(address);
  if (until === undefined) return true;
  if (Date.now() < until) return false;
  unshared.delete(address);
  return true;
}

/** Whether a burst of `group` to `address` holding a write of client `clientId` is open on `conn`. */
export function joinsOpenBurst(conn: BackendConnection, address: string, group: string, clientId: number): boolean {
  const burst = open.get(conn);
  return burst !== undefined && burst.group === group && burst.address === address && burst.holds(clientId);
}

/**
 * Sends `write` on `conn` to `address`, in the burst open there when it has the same `group`,
 * else in a new one; `group` null: a burst of its own, sent at once (after ASKING when `asking`).
 */
export function sendConverging(ctx: ProxyContext, conn: BackendConnection, address: string, group: string | null, write: BurstWrite, asking = false): void {
  if (group !== null) {
    let burst = open.get(conn);
    if (burst === undefined || burst.group !== group || burst.address !== address) {
      burst = new Burst(ctx, conn, address, group, false);
      open.set(conn, burst);
      conn.openGroup(burst);
    }
    burst.add(write);
    return;
  }
  const burst = new Burst(ctx, conn, address, null, asking);
  // An open group of its own, sealed at once: whatever group was open is queued first, whole.
  conn.openGroup(burst);
  burst.add(write);
  burst.seal();
}

/** One command of the burst: its reply frame, or the failure. */
class Part implements BackendRequest {
  frame: Buffer | null = null;
  failure: { message: string; written: boolean } | null = null;

  constructor(
    readonly payload: Buffer,
    private readonly burst: Burst,
    readonly owner: { readonly id: number },
  ) {}

  onReply(frame: Buffer): void {
    this.frame = frame;
    this.burst.partDone();
  }

  onFailure(message: string, written: boolean): void {
    this.failure = { message, written };
    this.burst.partDone();
  }
}

class Burst implements OpenGroup {
  private readonly writes: BurstWrite[] = [];
  /** The clients of `writes` (asked for every request sent on the connection while the burst is open). */
  private readonly clients = new Set<number>();
  /** Every command sent, the writes', and EXEC. */
  private readonly parts: Part[] = [];
  private readonly writeParts: Part[] = [];
  private exec: Part | null = null;
  /** Every key of the burst once, and where it is in `targets`. */
  private readonly targets: CopyTarget[] = [];
  private readonly index = new Map<string, number>();
  /** The keys of each SNAPSHOT_MANY, as indexes into `targets`. */
  private snapshotGroups: number[][] = [];
  private bySha = false;
  private sealed = false;
  private outstanding = 0;

  constructor(
    private readonly ctx: ProxyContext,
    private readonly conn: BackendConnection,
    readonly address: string,
    readonly group: string | null,
    private readonly asking: boolean,
  ) {}

  add(write: BurstWrite): void {
    this.writes.push(write);
    this.clients.add(write.clientId);
    for (const t of write.targets) {
      const id = t.key.toString('latin1');
      if (this.index.has(id)) continue;
      this.index.set(id, this.targets.length);
      this.targets.push(t);
    }
  }

  holds(clientId: number): boolean {
    return !this.sealed && this.clients.has(clientId);
  }

  /** Queues the whole burst: called by the connection (an open group), or at once. */
  seal(): void {
    if (this.sealed) return;
    if (open.get(this.conn) === this) open.delete(this.conn);
    this.sealed = true;
    this.bySha = loaded.has(this.address);
    this.snapshotGroups = groupIndexes(this.targets, (t) => t.fromBook.versionsKey(t.key));
    // ASK: ASKING holds for a whole MULTI (Redis keeps the flag until EXEC).
    if (this.asking) this.send(ASKING, NO_CLIENT);
    this.send(MULTI, NO_CLIENT);
    for (const w of this.writes) this.writeParts.push(this.send(w.payload, { id: w.clientId }));
    for (const g of this.snapshotGroups) {
      const t0 = this.targets[g[0]];
      this.send(encode.command(snapshotManyCommand(g.map((i) => this.targets[i].key), this.bySha, t0.fromBook)), NO_CLIENT);
    }
    this.exec = this.send(EXEC, NO_CLIENT);
  }

  private send(payload: Buffer, owner: { readonly id: number }): Part {
    const part = new Part(payload, this, owner);
    this.parts.push(part);
    this.outstanding++;
    this.conn.send(part);
    return part;
  }

  partDone(): void {
    if (--this.outstanding === 0 && this.sealed) {
      this.done().catch((err: unknown) => {
        for (const w of this.writes) w.burstDone({ kind: 'copy-failed', message: err instanceof Error ? err.message : String(err) });
      });
    }
  }

  private async done(): Promise<void> {
    const exec = this.exec as Part;
    const failed = this.parts.find((p) => p.failure !== null)?.failure ?? null;
    if (failed !== null) {
      // EXEC on the wire: it may have run on A, so B is brought up to date all the same.
      const written = exec.failure === null || exec.failure.written;
      if (written) await snapshotThenApply(this.ctx, this.writes[0].clientId, this.targets).catch(() => undefined);
      for (const w of this.writes) w.burstDone({ kind: 'failed', message: failed.message, written });
      return;
    }
    const execFrame = exec.frame as Buffer;
    const n = this.writes.length;
    const elements = arrayElements(execFrame);
    if (elements === null || elements.length !== n + this.snapshotGroups.length) return this.refused(execFrame);
    let snapshots: Snapshot[] | null = null;
    try {
      snapshots = this.parseSnapshots(elements.slice(n));
      loaded.add(this.address);
    } catch (err) {
      // The writes ran, their snapshots did not (NOSCRIPT, or the script failed): taken below, on their own.
      if (String(err).includes('NOSCRIPT')) loaded.delete(this.address);
    }
    if (this.writes.some((w) => w.undeclared)) {
      // A script's undeclared keys reach B before its declared ones are applied: should B be
      // fenced for `done` meanwhile, the declared APPLYs then all come after the fence, so the
      // script counts as missed and runs once on B, whole (its undeclared writes carried either way).
      const problem = await (this.ctx.changes?.after(this.address) ?? null);
      if (problem !== null) {
        for (const w of this.writes) w.burstDone({ kind: 'copy-failed', message: problem });
        return;
      }
    }
    if (snapshots !== null) {
      this.report(elements, snapshots, await applyBurst(this.ctx, this.targets, snapshots, this.writes[0].clientId), true);
      return;
    }
    let copied: { snapshots: Snapshot[]; outcomes: ApplyOutcome[] };
    try {
      copied = await snapshotThenApply(this.ctx, this.writes[0].clientId, this.targets);
    } catch (err) {
      for (const w of this.writes) w.burstDone({ kind: 'copy-failed', message: err instanceof Error ? err.message : String(err) });
      return;
    }
    this.report(elements, copied.snapshots, copied.outcomes, false);
  }

  /** EXECABORT: nothing ran. Whether each write may be sent again is decided before any is. */
  private refused(execFrame: Buffer): void {
    const queued = this.writeParts.map((p) => p.frame as Buffer);
    const frames = this.parts.map((p) => p.frame);
    const alone = this.writes.length === 1;
    if (!alone && queued.some((f) => f[0] === 45) && queued.some((f) => f[0] !== 45)) unshared.set(this.address, Date.now() + UNSHARED_MS);
    const later = open.get(this.conn);
    const resendable = this.writes.map((w) => !this.conn.mayHoldRequestOf(w.clientId) && later?.holds(w.clientId) !== true);
    this.writes.forEach((w, i) => w.burstDone({ kind: 'aborted', alone, resendable: resendable[i], queued: queued[i], exec: execFrame, frames }));
  }

  /** Per key of `targets`, its snapshot, from SNAPSHOT_MANY's replies (in snapshotGroups order). */
  private parseSnapshots(frames: Buffer[]): Snapshot[] {
    const out = new Array<Snapshot>(this.targets.length);
    this.snapshotGroups.forEach((g, i) => {
      const snaps = parseSnapshots(frames[i], g.length);
      g.forEach((t, j) => (out[t] = snaps[j]));
    });
    return out;
  }

  /** Each write gets its element of EXEC's reply with its keys' snapshots and outcomes. */
  private report(elements: Buffer[], snapshots: readonly Snapshot[], outcomes: readonly (ApplyOutcome | Error)[], exact: boolean): void {
    this.writes.forEach((w, i) => {
      const mine = w.targets.map((t) => this.index.get(t.key.toString('latin1')) as number);
      const failure = mine.map((k) => outcomes[k]).find((o): o is Error => o instanceof Error);
      if (failure !== undefined) return w.burstDone({ kind: 'copy-failed', message: failure.message });
      w.burstDone({ kind: 'ran', reply: elements[i], snapshots: mine.map((k) => snapshots[k]), outcomes: mine.map((k) => outcomes[k] as ApplyOutcome), exact });
    });
  }
}
