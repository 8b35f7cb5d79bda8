/**
 * The commands of side A's stream that land on one node of side B, applied in the stream's order,
 * a batch per event-loop turn (follow.ts hands them over; follow-router.ts chose the node).
 *
 *   queued parts --one turn--> one script on the node: every command of the batch, then
 *   HSET <applied record> <source> "<replid> <offset> <last applied>"  --reply--> each part done (or failed)
 *
 * The record is written in the same script as the commands, so it never says more or less than the
 * node holds: a follower that resumes (a lost link, a takeover, a kill -9) skips on this node
 * exactly the commands at or before the recorded offset, and nothing runs twice. One batch is in
 * flight at a time, so batches run in order. A command the node refuses (a type it cannot hold,
 * a key it does not serve after a reshard of B) comes back failed, and follow.ts carries its keys as
 * their result instead. A node that does not answer (paused, slow past the command timeout,
 * restarting) refuses nothing: the same batch is sent again until it answers, and the script skips
 * a batch its record says it already holds (a batch whose connection timed out may still run).
 * A batch counts as done only once a replica of the node holds it too (follow-replicated.ts), so a
 * failover of B loses nothing done; one the old master answered alone goes back as refused.
 */
import { performance } from 'node:perf_hooks';
import { ProxyContext } from '../context';
import { SlotOwners } from '../../sharding/key-space';
import { migrationScript } from './side-request';
import { decodeReply } from '../resp/decode-reply';
import { request } from '../backend/request';
import { sha1 } from '../scripts/store';
import { log } from '../telemetry/log';
import { ReplicaConfirm } from './follow-replicated';
import { refusalField } from './follow-refusals';
import { NodeKeys, nodeKeysOf } from './follow-node-keys';

/**
 * ARGV: record key, field, value, B's fence key (fence.ts), mode, the refusals' key
 * (follow-refusals.ts), then per command its argument count and its arguments. Answers the 0-based indexes of the commands that failed, each followed
 * by its error; or {-1} when B is fenced: a proxy switches to done, so B takes writes of its own and
 * nothing more of A's stream may land there (an expiry on A must not delete a key B renewed).
 * A batch of stream commands at or before the record (same replid) is already on the node: nothing
 * runs, {} answers. Mode `states` is a batch of keys' whole states only (RESTORE or DEL of a refused
 * command's keys, carried behind later commands, so at an offset the record may have passed): they
 * run whatever the record says (running one twice writes the same state), and never move it back.
 * A stream command that fails is written into the refusals' key in the same run that moves the
 * record past it: a follower that dies before carrying its keys leaves it for the next one.
 */
export const APPLY_STREAM_SCRIPT = `#!lua flags=allow-cross-slot-keys
if redis.call('EXISTS', ARGV[4]) == 1 then
  return {-1}
end
local behind = false
local held = redis.call('HGET', ARGV[1], ARGV[2])
if held then
  local id, at = string.match(held, '^(%S+) (%d+)')
  local want, upto = string.match(ARGV[3], '^(%S+) (%d+)')
  behind = id ~= nil and id == want and tonumber(at) >= tonumber(upto)
end
if behind and ARGV[5] ~= 'states' then
  return {}
end
local failed = {}
local i = 7
local n = 0
while i <= #ARGV do
  local count = tonumber(ARGV[i])
  local r = redis.pcall(unpack(ARGV, i + 1, i + count))
  if type(r) == 'table' and r.err ~= nil then
    failed[#failed + 1] = n
    failed[#failed + 1] = r.err
    if ARGV[5] ~= 'states' then
      local held = {}
      for j = i + 1, i + count do
        held[#held + 1] = #ARGV[j] .. ':' .. ARGV[j]
      end
      -- pcall: a node that no longer serves the key's slot (B resharded) still applies the batch
      redis.pcall('HSET', ARGV[6], ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. n, table.concat(held))
    end
  end
  n = n + 1
  i = i + count + 1
end
if not behind then
  redis.call('HSET', ARGV[1], ARGV[2], ARGV[3])
end
return failed`;
const APPLY_STREAM_SHA = sha1(Buffer.from(APPLY_STREAM_SCRIPT));

/**
 * The node's record moves to the key of its new lowest slot (a reshard of B). That key may hold
 * another node's record: the slot came with its keys, that node's record hash among them. So this
 * node's own field goes there first: from its old key (ARGV[1]) where the node still serves it, else
 * the value this follower last wrote (ARGV[4], '' for none). ARGV: old key, new key, field, value.
 */
const MOVE_RECORD_SCRIPT = `#!lua flags=allow-cross-slot-keys
local ok, held = pcall(redis.call, 'HGET', ARGV[1], ARGV[3])
if not ok or not held then held = ARGV[4] end
if held == '' then redis.call('HDEL', ARGV[2], ARGV[3]) else redis.call('HSET', ARGV[2], ARGV[3], held) end
return 1`;
const EVALSHA = Buffer.from('EVALSHA');
const EVAL = Buffer.from('EVAL');
const SHA = Buffer.from(APPLY_STREAM_SHA);
const BODY = Buffer.from(APPLY_STREAM_SCRIPT);
const NO_KEYS = Buffer.from('0');
const STREAM_MODE = Buffer.from('stream');
const STATES_MODE = Buffer.from('states');
/** Argument counts as bulk strings, made once (a batch holds one per command). */
const COUNTS = Array.from({ length: 64 }, (_, n) => Buffer.from(String(n)));

export interface AppliedPart {
  args: Buffer[];
  /** Offset of the stream command it comes from. */
  end: number;
  /** A key's whole state (a refused command's keys carried as their result): safe to run twice. */
  state?: boolean;
  /** `refusal`: where the node holds the refused command until its keys are carried (follow-refusals.ts). */
  done(error: string | null, refusal?: { node: string; field: string }): void;
}

const LANE = 0;
const KEYS_PLACED_MS = 1000;
const RETRY_MS = 100;
const RETRY_CAP_MS = 2000;
/** Error replies of a node that will take the batch shortly: waited for, never refusals. */
const TRANSIENT = /^(LOADING|BUSY|TRYAGAIN|CLUSTERDOWN|MASTERDOWN)\b/;
/**
 * The node is a replica now (a failover of B demoted it): the keyless script gets READONLY, not a
 * MOVED. Not a refusal of the commands: B's slot map is refreshed and the batch goes to the new master.
 */
const DEMOTED = /^READONLY\b/;
/** A command refused because the node no longer serves its key (a reshard or a failover inside B). */
const NOT_SERVED = /non.local key|^MOVED\b|^ASK\b/i;

export class FollowApplier {
  private queued: AppliedPart[] = [];
  /** Records asked for (recordThrough): resolved once the node's record is at or past them. */
  private marks: { offset: number; done: () => void }[] = [];
  /** Why the node does not answer now (null: it does), for status lines and one log line per episode. */
  unanswered: string | null = null;
  private inFlight = false;
  private scheduled = false;
  private closed = false;
  /** Where the record, fence and refusals live on the node (follow-node-keys.ts), placed at `keysAt`. */
  private keys: NodeKeys | null = null;
  private keysAt = -Infinity;
  /** A record left under the key of an older slot map, removed once the new one is written. */
  private staleRecordKey: string | null = null;
  /** The key the record was under before the slot map changed: this node's field is moved before the next batch. */
  private recordMovedFrom: string | null = null;
  /** Commands of A's stream that arrived once B was fenced for done (not applied). */
  afterFence = 0;
  /** The offset this node's record says (as far as this follower wrote it). */
  private recorded = -1;
  /**
   * The end of the last command this follower applied on the node (-1: none yet). Recorded third,
   * as `<replid> <offset> <last applied>`: past it the node took only no-ops (Sentinel's PUBLISHed
   * hellos, PINGs), so a resume on a promoted replica may start there (follow-lineage.ts).
   */
  private lastApplied = -1;
  private readonly replicas: ReplicaConfirm;

  constructor(
    private readonly ctx: ProxyContext,
    readonly address: string,
    /** B's live slot map (null for a ring B): where this node's record lives. */
    private readonly owners: SlotOwners | null,
    /** The field of the record: which node of A this is. */
    private readonly source: string,
    /** The node of A's replication id the offsets count in. */
    private replid: () => string,
    /** False once the follow stopped (a stalled proxy's): a batch queued before is not sent. */
    private readonly mayApply: () => boolean = () => true,
  ) {
    this.replicas = new ReplicaConfirm(ctx, address);
  }

  get pending(): number {
    return this.queued.length + (this.inFlight ? 1 : 0);
  }

  push(part: AppliedPart): void {
    this.queued.push(part);
    if (!this.scheduled && !this.inFlight) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  /**
   * Nothing is waiting for this node and the follower applied through `offset`: the record moves
   * there too, so a resume need not go back to this node's last command (it may get none for long).
   */
  idle(offset: number): void {
    if (this.inFlight || this.closed || this.queued.length > 0 || offset <= this.recorded) return;
    this.inFlight = true;
    void this.send([], offset).finally(() => this.next(offset));
  }

  /** Resolves once the node's record says `offset` (or more), after what is queued; or on close. */
  recordThrough(offset: number): Promise<void> {
    if (offset <= this.recorded || this.closed) return Promise.resolve();
    return new Promise((done) => {
      this.marks.push({ offset, done });
      if (!this.inFlight && !this.scheduled) this.flush();
    });
  }

  close(reason: string): void {
    this.closed = true;
    for (const p of this.queued.splice(0)) p.done(reason);
    for (const m of this.marks.splice(0)) m.done();
  }

  /** A send through `through` answered (its record written, or refused: a record asked for is not asked again). */
  private next(through: number): void {
    this.inFlight = false;
    const covered = Math.max(this.recorded, through);
    for (const m of this.marks.filter((m) => m.offset <= covered)) m.done();
    this.marks = this.marks.filter((m) => m.offset > covered);
    if (this.queued.length > 0 || this.marks.length > 0) this.flush();
  }

  private flush(): void {
    this.scheduled = false;
    if (this.inFlight || this.closed || !this.mayApply()) return;
    if (this.queued.length === 0) {
      // Only records asked for: one empty batch at the furthest of them.
      if (this.marks.length === 0) return;
      const through = Math.max(...this.marks.map((m) => m.offset));
      this.inFlight = true;
      void this.send([], through).finally(() => this.next(through));
      return;
    }
    const batch = this.queued;
    this.queued = [];
    this.inFlight = true;
    void this.send(batch).finally(() => this.next(-1));
  }

  /** The batch until the node answers it (a slow or paused node is waited for); then each part done. */
  private async send(batch: AppliedPart[], through = Math.max(...batch.map((p) => p.end))): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      if (this.closed) {
        for (const p of batch) p.done(`${this.address}: the follow ended`);
        return;
      }
      const outcome = await this.attempt(batch, through);
      if (outcome === 'answered') break;
      // A cluster B's master replaced (failed over): its slots are served elsewhere now, so the parts go
      // back to follow.ts, which carries their keys to the owners B's slot map names now.
      if (this.owners !== null) {
        this.owners.requestRefresh();
        if (!this.owners.masterAddresses().includes(this.address)) {
          for (const p of batch) p.done(`${this.address}: no longer a master of side B (${outcome})`);
          return;
        }
      }
      if (this.unanswered === null) log.warn({ node: this.address, source: this.source, reason: outcome }, 'migration: a node of side B does not answer the follow\'s commands; they wait and are sent again');
      this.unanswered = outcome;
      await new Promise((resolve) => setTimeout(resolve, Math.min(RETRY_CAP_MS, RETRY_MS * 2 ** attempt)).unref());
    }
    if (this.unanswered !== null) {
      log.info({ node: this.address, source: this.source }, 'migration: a node of side B answers the follow\'s commands again');
      this.unanswered = null;
    }
  }

  /** One try: 'answered' once the node replied (each part done), else why it did not. */
  private async attempt(batch: AppliedPart[], through: number): Promise<string> {
    const keys = this.placeKeys();
    // The command by SHA1, built once; by body only where the node lacks the script.
    const last = batch.length > 0 ? Math.max(through, this.lastApplied) : this.lastApplied;
    const value = `${this.replid()} ${through}${last >= 0 ? ` ${last}` : ''}`;
    const states = batch.length > 0 && batch.every((p) => p.state === true);
    const bySha: Buffer[] = [EVALSHA, SHA, NO_KEYS, Buffer.from(keys.record), Buffer.from(this.source), Buffer.from(value), Buffer.from(keys.fence), states ? STATES_MODE : STREAM_MODE, Buffer.from(keys.refused)];
    for (const part of batch) {
      const n = part.args.length;
      bySha.push(n < COUNTS.length ? COUNTS[n] : Buffer.from(String(n)));
      for (const a of part.args) bySha.push(a);
    }
    let failed: Map<number, string>;
    try {
      if (this.recordMovedFrom !== null) await this.moveRecord(this.recordMovedFrom, keys.record);
      const byBody = (): Buffer[] => [EVAL, BODY, ...bySha.slice(2)];
      const frame = await migrationScript(this.ctx, null, this.address, (sha) => (sha ? bySha : byBody()), LANE);
      const reply = decodeReply(frame);
      if (reply instanceof Error && (TRANSIENT.test(reply.message) || DEMOTED.test(reply.message))) return `${this.address}: ${reply.message}`;
      if (!Array.isArray(reply)) {
        // A real error reply to the whole batch (OOM, NOPERM ...): each command is refused.
        const why = `${this.address}: ${reply instanceof Error ? reply.message : 'unexpected reply to the apply script'}`;
        for (const p of batch) p.done(why);
        return 'answered';
      }
      if (reply.length === 1 && Number(reply[0]) === -1) {
        // Fenced for done: these commands are past what B takes from A; counted, never applied.
        if (this.afterFence === 0 && batch.length > 0) log.info({ node: this.address, source: this.source }, 'migration: side B is fenced for done; the rest of side A\'s stream is not applied there');
        this.afterFence += batch.length;
        this.recorded = Math.max(this.recorded, through);
        this.lastApplied = last;
        for (const p of batch) p.done(null);
        return 'answered';
      }
      failed = new Map();
      for (let i = 0; i + 1 < reply.length; i += 2) failed.set(Number(reply[i]), String(reply[i + 1]));
      // B's slot map is read again, so the refused keys' states go to their owners now, not here again.
      if (this.owners !== null && [...failed.values()].some((e) => NOT_SERVED.test(e))) this.owners.requestRefresh();
    } catch (err) {
      // No reply (a timeout, a lost connection): nothing is refused, the batch goes again.
      this.keysAt = -Infinity; // a reshard of B may have moved them: placed again next time
      return `${this.address}: ${err instanceof Error ? err.message : String(err)}`;
    }
    if (batch.length > 0) {
      const record = (): string => this.placeKeys().record;
      const held = await this.replicas.confirm(record, this.source, value, () => !this.closed, () => this.stillMaster(), () => (this.keysAt = -Infinity));
      if (held !== 'confirmed') {
        // Not on a replica and its master gone: the keys' states go to the new owner (or the follow ended).
        const why = held === 'ended' ? `${this.address}: the follow ended` : `${this.address}: replaced before a replica held the batch`;
        for (const p of batch) p.done(why);
        return 'answered';
      }
    }
    this.recorded = Math.max(this.recorded, through);
    this.lastApplied = last;
    this.dropStaleRecord();
    batch.forEach((p, i) => {
      const error = failed.get(i) ?? null;
      p.done(error, error === null || states ? undefined : { node: this.address, field: refusalField(this.source, value, i) });
    });
    return 'answered';
  }

  /**
   * The node's keys, placed again for the slot map now at most once a second on a cluster B (and
   * when a reply says they moved); a ring B's node keeps its names.
   */
  private placeKeys(): NodeKeys {
    const now = performance.now();
    if (this.keys !== null && (this.owners === null || now - this.keysAt < KEYS_PLACED_MS)) return this.keys;
    this.keysAt = now;
    const keys = nodeKeysOf(this.address, this.owners);
    if (this.keys !== null && this.keys.record !== keys.record) this.staleRecordKey = this.recordMovedFrom = this.keys.record;
    this.keys = keys;
    return keys;
  }

  /** This node's field of the record under its new key before any batch reads it there (MOVE_RECORD_SCRIPT). */
  private async moveRecord(from: string, to: string): Promise<void> {
    const mine = this.recorded >= 0 ? `${this.replid()} ${this.recorded}${this.lastApplied >= 0 ? ` ${this.lastApplied}` : ''}` : '';
    const reply = await request(this.ctx.pool.connection(this.address, LANE), ['EVAL', MOVE_RECORD_SCRIPT, '0', from, to, this.source, mine], this.ctx.forward.retryWindowMs);
    if (reply[0] === 45) throw new Error(`moving the applied record to ${to}: ${reply.toString('utf8', 1, reply.length - 2)}`);
    if (this.keys?.record === to) this.recordMovedFrom = null;
  }

  /** The record now written under its new key, the old key's field goes: a reader with an older map finds none (a full sync), not a stale one. */
  private dropStaleRecord(): void {
    const stale = this.staleRecordKey;
    if (stale === null || stale === this.keys?.record) return;
    this.staleRecordKey = null;
    void request(this.ctx.pool.connection(this.address, LANE), ['HDEL', stale, this.source], this.ctx.forward.retryWindowMs).catch(() => undefined);
  }

  /** False once B's slot map no longer names this node a master (asked again meanwhile); a ring B's node stays. */
  private stillMaster(): boolean {
    if (this.owners === null) return true;
    this.owners.requestRefresh();
    return this.owners.masterAddresses().includes(this.address);
  }
}
