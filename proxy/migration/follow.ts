/**
 * One node of side A followed as a replica follows its master, carrying every change of its
 * moving keys to side B in the node's own order (the replication carry):
 *
 *   link (replication/link.ts: handshake, PSYNC, ACK)
 *     -> snapshot (spooled to a file at the link's speed, then replication/rdb-reader.ts: entries
 *        of moving keys restored on their owners in B, ABSTTL REPLACE)
 *     -> stream (replication/stream-reader.ts: commands with their offsets; while B is more than
 *        MEMORY_BYTES behind, the link's bytes wait in a file, follow-spool.ts, so the link is read
 *        at full speed; a full spool stops reading the link, and A holds the rest as for a slow replica)
 *     -> router (follow-router.ts: which node of B, split, or carried as its result)
 *     -> appliers (follow-applier.ts: one per node of B, the offset recorded with the commands)
 *     -> offsets: `applied` is the offset through which every command is on B; ACKed to A.
 *
 * Exactness: B holds A's snapshot of the moving keys at offset O, then every command after O in
 * A's order, so at every applied offset B's moving keys are A's at that offset; nothing is
 * versioned. A resume (lost link, takeover, restart; a failover: the old master's records,
 * follow-lineage.ts) asks A for `PSYNC <replid> <lowest recorded offset + 1>`, and each node of B
 * skips what its own record says it holds. When A cannot continue, a new full sync first removes
 * the moving keys of this node from B (the new snapshot is the truth), so keys deleted on A
 * meanwhile do not survive on B. A slot of a cluster A moving between masters: follow-handoff.ts.
 *
 * A command B refuses, and one whose keys land on several nodes of B that cannot be split, is
 * carried as its keys' states read on A at a known offset (follow-carry.ts). A node of B that does
 * not answer is waited for, never taken for a refusal.
 */
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { ProxyContext } from '../context';
import { Placement } from '../../sharding/migration';
import { ReplicationLink } from '../replication/link';
import { StreamCommand, StreamReader } from '../replication/stream-reader';
import { FollowRouter, Part, Routed } from './follow-router';
import { FollowApplier } from './follow-applier';
import { ownersOf } from './copy-keys';
import { followFileOf, nextFollowNumber, removeStaleFollowFiles } from './follow-snapshot';
import { onEveryMaster, removeMovingKeys } from './follow-states';
import { StateCarry, Ticket } from './follow-carry';
import { ResumePoint, forgetRecords, resumeFrom } from './follow-lineage';
import { restoreSnapshot } from './follow-restore';
import { log } from '../telemetry/log';
import { Queue } from '../client/queue';
import { StreamIntake } from './follow-spool';
import { DEFAULT_FOLLOW_OPTIONS, FollowOptions, FollowState } from './follow-options';
import { SlotHandoff, isArrival } from './follow-handoff';
import { FullSyncWatch } from './follow-progress';
import { OffsetWaiters } from './offset-waiters';

const ACK_EVERY_MS = 1000;
/** The parts of a command with nothing for B (most of a stream: keys that stay), shared. */
const NO_PARTS: readonly Part[] = Object.freeze([]);
const RESUME_AFTER_MS = 200;
const RESUME_CAP_MS = 5000;

export class NodeFollower {
  state: FollowState = 'connecting';
  /** Why the follow is not live (a loss, a refusal), for status lines. */
  reason = '';
  replid = '';
  /** Every command through this offset is on B. */
  applied = -1;
  fullSyncs = 0;
  resumes = 0;
  /** The last full sync's: entries read, restored, and ms from its PSYNC reply to restored (0 until then). */
  snapshotEntries = 0;
  snapshotRestored = 0;
  snapshotMs = 0;
  private syncStartedAt = 0;
  private link: ReplicationLink | null = null;
  private stream = new StreamReader();
  private readonly appliers = new Map<string, FollowApplier>();
  private readonly tickets = new Queue<Ticket>();
  /** The end of the last ticket handed out. */
  private lastEnd = -1;
  /** What each node of B recorded at the resume: commands at or before it are there already. */
  private floors = new Map<string, number>();
  /** Keys carried as their state (B refused a command, or its result is carried): follow-carry.ts. */
  private readonly states: StateCarry;
  private commands = new Queue<StreamCommand>();
  /** The end of the last command parsed: what is parsed and not applied is held in memory. */
  private parsedThrough = -1;
  /** When the last chunk was parsed: its commands' age (one clock read per chunk, not per command). */
  private parsedAt = 0;
  /** Where the link's stream bytes wait while B is behind (its spool's bytes and fulls show in INFO). */
  readonly intake: StreamIntake;
  private processing = false;
  /** Set while the snapshot is restored: the stream waits behind it. */
  private loading = false;
  private ackTimer: NodeJS.Timeout | null = null;
  private readonly waiters = new OffsetWaiters();
  private ackWanted = -1;
  private stopped = false;
  private received = -1;
  /** Links lost in a row (a node that refuses PSYNC): the next attempt waits longer, up to RESUME_CAP_MS. */
  private losses = 0;
  /** B holds this history through `applied` (a snapshot restored, or a resume): its records may move there. */
  private historyOnB = false;
  private readonly live = (): boolean => !this.stopped;
  /** What an ACK says now: while a snapshot is restored B holds none of it, so 0 keeps the link alive, acknowledging nothing (WAIT on A counts ACKs). */
  private readonly ackValue = (): number => (this.loading ? 0 : this.applied);
  private routed: { placement: Placement; table: ProxyContext['table']; router: FollowRouter } | null = null;
  /** A cluster A's slots moving to this node: the earlier owner's changes on B first. */
  readonly handoff: SlotHandoff;
  /** The history copy's view of the full syncs: saved progress, restore rate, restarts (follow-progress.ts). */
  readonly sync: FullSyncWatch;

  constructor(
    private readonly ctx: ProxyContext,
    readonly source: string,
    private readonly placement: () => Placement,
    private readonly options: FollowOptions = DEFAULT_FOLLOW_OPTIONS,
  ) {
    this.intake = new StreamIntake(followFileOf(options.spoolDir, source, 'stream', nextFollowNumber()), options.spoolBytes, source, {
      inMemory: () => this.parsedThrough - this.applied,
      parse: (chunk, first) => this.parse(chunk, first),
      taking: () => !this.stopped && this.state !== 'failed',
      fail: (reason) => this.fail(reason),
    });
    this.handoff = new SlotHandoff(ctx, source, () => this.placement().from, () => this.placement().to, (a) => options.peer?.(a));
    this.sync = new FullSyncWatch(ctx, source, placement, () => this.snapshotRestored);
    this.states = new StateCarry(ctx, source, {
      stopped: () => this.stopped,
      router: () => this.router(),
      to: () => this.placement().to,
      open: (end, open) => this.open(end, open, performance.now()),
      hand: (ticket, parts) => this.hand(ticket, parts),
      advance: () => this.advance(),
      fail: (reason) => this.fail(reason),
    });
  }

  /** A new full sync, whatever A could continue (`migrate copy --restart`, follow-progress.ts). */
  resync(): void {
    if (this.stopped) return;
    this.sync.restart(this.loading);
    if (this.link !== null) this.link.close('a new full sync was asked for');
    else if (this.state === 'failed') void this.connect();
  }

  start(): void {
    const stale = removeStaleFollowFiles(this.options.spoolDir, this.source);
    if (stale.length > 0) log.info({ node: this.source, dir: this.options.spoolDir, files: stale }, 'migration: removed the snapshot files an earlier follower of this node left (its process is gone)');
    this.ackTimer = setInterval(() => {
      this.link?.ack(this.ackValue());
      this.recordIdle();
      this.handoff.watch(this.received);
    }, ACK_EVERY_MS).unref();
    void this.connect();
  }

  stop(reason = 'the follow ended'): void {
    if (this.stopped) return;
    this.stopped = true;
    this.intake.close();
    this.sync.progress.stop();
    this.state = 'stopped';
    if (this.ackTimer !== null) clearInterval(this.ackTimer);
    this.link?.close(reason);
    for (const a of this.appliers.values()) a.close(reason);
    this.waiters.releaseAll();
  }
  /** Age of the oldest command handed on and not yet on B, in seconds. */
  get lagSeconds(): number {
    const head = this.tickets.peek();
    return head === undefined ? 0 : (performance.now() - head.at) / 1000;
  }
  /** Bytes received from A and not yet on B. */
  get lagBytes(): number {
    return Math.max(0, this.received - this.applied);
  }
  /** Resolves once every command through `offset` is on B (or the follow stopped); a snapshot's, once restored. */
  appliedThrough(offset: number): Promise<void> {
    if ((this.applied >= offset && !this.loading) || this.stopped) return Promise.resolve();
    return this.waiters.wait(offset);
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    this.state = 'connecting';
    let resume: ResumePoint | null = null;
    try {
      // Where to resume (follow-lineage.ts: after a failover, the old master's records), keeping what each node of B recorded.
      const to = this.placement().to;
      resume = to === null ? null : await resumeFrom(this.ctx, to, this.source);
      if (this.sync.forced) resume = null; // migrate copy --restart: a new full sync
      await this.handoff.look();
      await this.states.readLeft([this.source, ...(resume === null ? [] : [resume.recordedAs])]);
    } catch (err) {
      return this.lost(`cannot tell where to resume: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (resume !== null) this.floors = resume.floors;
    const opts = this.ctx.pool.linkOptions();
    this.stream = new StreamReader();
    this.commands = new Queue();
    this.intake.reset();
    let spool: { file: string; fd: number } | null = null;
    const link = new ReplicationLink(this.source, { tls: opts.tls, handshake: opts.handshake.filter((h) => !h.toString('latin1').toUpperCase().includes('READONLY')), connectTimeoutMs: opts.connectTimeoutMs, announcePort: this.options.announcePort, resume }, this.sync.watch({
      fullSync: (replid, offset) => {
        this.replid = replid;
        this.fullSyncs++;
        this.losses = 0;
        this.syncStartedAt = performance.now();
        [this.snapshotEntries, this.snapshotRestored, this.snapshotMs] = [0, 0, 0];
        this.state = 'full-sync';
        this.loading = true;
        this.historyOnB = false;
        this.floors = new Map();
        this.states.keys.clear();
        this.handoff.reset();
        this.applied = this.received = this.parsedThrough = offset;
        // A file of its own: a cut sync's file is removed later, while the next one may be written.
        const file = followFileOf(this.options.spoolDir, this.source, 'rdb', nextFollowNumber());
        try {
          spool = { file, fd: fs.openSync(file, 'w') };
        } catch (err) {
          return link.close(`cannot write the snapshot to ${file}: ${err instanceof Error ? err.message : String(err)}`);
        }
        log.info({ node: this.source, replid, offset }, 'migration: full sync of a node of side A begun');
      },
      snapshotBytes: (chunk) => {
        if (spool !== null) fs.writeSync(spool.fd, chunk);
      },
      snapshotEnd: () => {
        if (spool === null) return;
        fs.closeSync(spool.fd);
        const file = spool.file;
        spool = null;
        link.ackUntilStream(this.ackValue); // the stream comes while the snapshot is restored
        void this.load(link, file);
      },
      continued: (replid) => {
        this.replid = replid;
        this.resumes++;
        this.losses = 0;
        this.handoff.begin();
        this.state = 'live';
        this.reason = '';
        this.applied = resume?.offset ?? this.applied;
        this.historyOnB = true;
        this.received = this.parsedThrough = this.applied;
        log.info({ node: this.source, offset: this.applied, recordedAs: resume?.recordedAs }, 'migration: follow of a node of side A resumed (+CONTINUE)');
        this.states.recover(this.applied);
        const to = this.placement().to;
        if (resume !== null && resume.recordedAs !== this.source && to !== null) void forgetRecords(this.ctx, to, resume).catch(() => undefined);
      },
      streamBytes: (chunk, first) => this.heard(link, chunk, first),
      lost: (reason) => {
        if (spool !== null) {
          fs.closeSync(spool.fd); // cut mid-snapshot: nothing of it reached B, the next link starts over
          fs.rm(spool.file, { force: true }, () => undefined);
          spool = null;
          this.loading = false;
        }
        if (this.link === link) this.lost(reason);
      },
    }));
    this.link = link;
  }

  private lost(reason: string): void {
    if (this.stopped) return;
    this.link = null;
    this.state = 'lost';
    this.reason = reason;
    log.warn({ node: this.source, reason }, 'migration: replication link to a node of side A lost; resumed from the applied offset');
    // Once all received is on B (however slow) and every node records it: the resume asks for applied + 1.
    const again = (): void => {
      if (this.stopped || this.state === 'failed') return;
      if (this.loading || this.processing || this.commands.length > 0 || this.tickets.length > 0 || this.intake.spooled > 0) return void setTimeout(again, RESUME_AFTER_MS).unref();
      void this.recordApplied().then(() => this.connect());
    };
    this.losses++;
    setTimeout(again, Math.min(RESUME_CAP_MS, RESUME_AFTER_MS * 2 ** (this.losses - 1))).unref();
  }

  private fail(reason: string): void {
    this.state = 'failed';
    this.reason = reason;
    log.error({ node: this.source, reason }, 'migration: the follow of a node of side A stopped');
    // Unset first: the link's loss is this failure, not one to resume from (a resume would sync again).
    const link = this.link;
    this.link = null;
    link?.close(reason);
  }

  /** Every node of B records `applied` (after what it has queued), where this history is on B. */
  private async recordApplied(): Promise<void> {
    if (!this.historyOnB || this.applied < 0) return;
    await Promise.all((this.placement().to?.masters() ?? []).map((b) => this.applierOf(b).recordThrough(this.applied)));
  }

  private heard(link: ReplicationLink, chunk: Buffer, first: number): void {
    if (!this.mayApply()) return;
    this.received = first + chunk.length - 1;
    // Straight on while B is within MEMORY_BYTES; else into the spool (follow-spool.ts).
    if (this.intake.heard(link, chunk, first) && !this.loading) void this.process();
  }

  private parse(chunk: Buffer, first: number): void {
    this.parsedAt = performance.now();
    let cmds: StreamCommand[];
    try {
      cmds = this.stream.push(chunk, first);
    } catch (err) {
      return this.fail(err instanceof Error ? err.message : String(err));
    }
    for (const c of cmds) this.commands.push(c);
    if (cmds.length > 0) this.parsedThrough = cmds[cmds.length - 1].end;
  }

  /** The stream's commands in order; a command that needs A or every node of B first waits for it. */
  private async process(): Promise<void> {
    if (this.processing) return;
    this.processing = true;
    try {
      while (this.commands.length > 0 && !this.stopped && this.state !== 'failed') {
        const cmd = this.commands.peek() as StreamCommand;
        const router = this.router();
        const routed = router.route(cmd.args);
        try {
          const held = this.handoff.ahead(cmd.end, routed, this.received, router, isArrival(cmd.args[0]));
          if (held !== null) await held;
          // Most commands are handed on at once: only those that wait for A or B suspend the loop.
          const waiting = this.run(cmd, routed);
          if (waiting !== undefined) await waiting;
        } catch (err) {
          // Side A or B did not answer (a node restarting): the same command again shortly, nothing skipped.
          if (this.stopped) return;
          log.warn({ node: this.source, command: cmd.args[0]?.toString('latin1'), err: err instanceof Error ? err.message : String(err) }, 'migration: a command of the stream could not be carried yet; tried again');
          setTimeout(() => void this.process(), RESUME_AFTER_MS).unref();
          return;
        }
        this.commands.shift();
      }
    } finally {
      this.processing = false;
    }
  }

  /** Undefined once the command is handed on; a promise when it waits for A or for every node of B first. */
  private run(cmd: StreamCommand, routed: Routed): Promise<void> | undefined {
    switch (routed.kind) {
      case 'skip':
      case 'apply':
        this.ticket(cmd.end, routed.kind === 'apply' ? routed.parts : NO_PARTS);
        return undefined;
      case 'getack':
        this.ackWanted = cmd.end; // before the ticket, whose advance ACKs it once applied (at once when nothing waits)
        this.ticket(cmd.end, NO_PARTS);
        return undefined;
      case 'resnapshot':
        return this.states.result(cmd.end, routed.keys);
      case 'flush':
        return (async () => {
          await this.drained();
          await removeMovingKeys(this.ctx, this.placement().to, this.source, this.router(), this.live);
          this.ticket(cmd.end, NO_PARTS);
        })();
      case 'every-master':
        return (async () => {
          await this.drained();
          await onEveryMaster(this.ctx, this.placement().to, this.source, routed.args, this.live);
          this.ticket(cmd.end, NO_PARTS);
        })();
      case 'stop':
        this.fail(routed.reason);
        return undefined;
    }
  }

  /** The router of the current placement (a phase switch swaps it whole; the table is reloaded rarely). */
  private router(): FollowRouter {
    const p = this.placement();
    if (this.routed?.placement !== p || this.routed.table !== this.ctx.table) this.routed = { placement: p, table: this.ctx.table, router: new FollowRouter(this.ctx.table, p.from, p.to as NonNullable<Placement['to']>, this.source) };
    return this.routed.router;
  }

  /** One stream command's parts handed to their appliers; `end` counts as applied once all are done (at once, with no ticket made, for most: keys that stay). */
  private ticket(end: number, parts: readonly Part[]): void {
    if (parts.length === 0 && this.tickets.length === 0) this.applied = Math.max(this.applied, end);
    else this.hand(this.open(end, 0), parts);
    this.advance();
  }

  /** A ticket for the command at `end`, queued behind every ticket handed out before. */
  private open(end: number, open: number, at = this.parsedAt): Ticket {
    const ticket: Ticket = { end, open, at };
    this.tickets.push(ticket);
    this.lastEnd = Math.max(this.lastEnd, end);
    return ticket;
  }

  /** `parts` for the command at `ticket.end` given to their appliers; the ticket closes once all are done. */
  private hand(ticket: Ticket, parts: readonly Part[]): void {
    const end = ticket.end;
    for (const part of parts) {
      // A key's carried state runs whatever a node recorded at the resume: B refused its command.
      if (part.carries === undefined && (this.floors.get(part.to) ?? -1) >= end) continue;
      const covered = this.states.keys.covered(part.keys, end);
      if (covered > 0 && covered === part.keys.length) continue;
      this.states.keys.routed(part.keys, end);
      ticket.open++;
      // Some of its keys are on B past this command already (their state was carried): run, it would
      // apply twice to those (an LMOVE popping one more), so all its keys are carried as their state.
      if (covered > 0) {
        this.states.carry(part.keys, end, ticket, false);
        continue;
      }
      this.applierOf(part.to).push({
        args: part.args,
        end,
        state: part.carries !== undefined,
        done: (error, refusal) => {
          if (error !== null) return void this.states.refused(part, end, error, ticket, refusal);
          ticket.open--;
          this.advance();
        },
      });
    }
  }

  private advance(): void {
    while (this.tickets.length > 0 && (this.tickets.peek() as Ticket).open === 0) {
      const t = this.tickets.shift() as Ticket;
      this.applied = Math.max(this.applied, t.end);
      t.closed?.();
    }
    if (!this.loading) this.waiters.release(this.applied);
    if (this.ackWanted >= 0 && this.applied >= this.ackWanted) {
      this.ackWanted = -1;
      this.link?.ack(this.applied);
    } else if (!this.loading) this.link?.ackSoon(this.ackValue);
    if (this.intake.take() && !this.loading) void this.process();
  }
  /** Every node of B with nothing waiting records the applied offset (follow-applier.ts idle). */
  private recordIdle(): void {
    if (this.state !== 'live' || this.applied < 0) return;
    for (const b of this.placement().to?.masters() ?? []) this.applierOf(b).idle(this.applied);
  }
  private applierOf(address: string): FollowApplier {
    let a = this.appliers.get(address);
    if (a === undefined) {
      a = new FollowApplier(this.ctx, address, ownersOf(this.placement().to as NonNullable<Placement['to']>), this.source, () => this.replid, () => this.mayApply());
      this.appliers.set(address, a);
    }
    return a;
  }
  /** False once stopped: after a stall another proxy may follow the node, and none of this may land on B. */
  private mayApply(): boolean {
    this.options.beforeApply?.();
    return !this.stopped;
  }
  private drained(): Promise<void> {
    return this.appliedThrough(this.tickets.length === 0 ? this.applied : this.lastEnd);
  }
  /** The snapshot, read from its spool at B's pace (follow-restore.ts); the stream waits behind it. */
  private async load(link: ReplicationLink, file: string): Promise<void> {
    this.state = 'loading';
    try {
      const to = this.placement().to as NonNullable<Placement['to']>;
      await restoreSnapshot(this.ctx, to, this.source, file, {
        router: this.router(),
        removeMovingKeys: async () => {
          await this.handoff.barrier(this.received, [], to.masters());
          await removeMovingKeys(this.ctx, to, this.source, this.router(), this.live);
        },
        everyMaster: (args) => onEveryMaster(this.ctx, to, this.source, args, this.live),
        live: this.live,
        around: (sink) => this.sync.around(sink),
        progress: (entries, restored) => {
          this.snapshotEntries = entries;
          this.snapshotRestored = restored;
        },
        record: `${this.replid} ${this.applied}`,
      });
      this.snapshotMs = Math.round(performance.now() - this.syncStartedAt);
      log.info({ node: this.source, entries: this.snapshotEntries, restored: this.snapshotRestored, ms: this.snapshotMs }, 'migration: snapshot of a node of side A restored on side B');
      this.sync.done();
      this.states.forgetLeft();
      this.loading = false;
      this.historyOnB = true;
      // A link lost meanwhile stays lost: what it brought is applied, then the follow resumes.
      if (this.link === link) this.state = 'live';
      this.advance(); // barriers waiting on the snapshot's offset
      void this.process();
    } catch (err) {
      this.loading = false;
      if (this.stopped) return;
      const reason = err instanceof Error ? err.message : String(err);
      this.commands = new Queue();
      this.intake.reset();
      if (this.sync.failed(reason)) return; // a restart asked for: the link is closed, the next one syncs anew
      this.fail(`the snapshot could not be carried: ${reason}`);
      link.close(reason);
    } finally {
      fs.rm(file, { force: true }, () => undefined);
    }
  }
}
