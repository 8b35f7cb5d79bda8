/**
 * Where one command of side A's replication stream goes on side B (the moving-key router of the
 * replication carry, follow.ts). The node that wrote the stream is `source`; a key moves when its
 * owner in B is another node than `source` (in a ring grow `source` may be in B too: a key that
 * stays on it is already there).
 *
 * - Keys not owned by `source` in a ring A (written straight on it by another program), and the
 *   migration's bookkeeping, are skipped: their own node's stream carries them. A cluster node
 *   holds only its own slots' keys, so every key in its stream is its own (during a reshard the
 *   slot map lags; follow-handoff.ts orders the two owners' streams). `RESTORE-ASKING` (MIGRATE's)
 *   runs as `RESTORE ... REPLACE`: B may hold the copy the old owner's stream carried.
 * - A command whose moving keys all have one owner in B runs there as it is.
 * - `MSET`, `DEL`, `UNLINK` whose keys have several owners are split per owner, in key order.
 * - Any other command with keys on several owners (`RENAME`, `SMOVE`, `LMOVE`, `SUNIONSTORE`,
 *   ... and a command too long for one apply script) is carried as its result: its keys' states
 *   are read from A at a known offset (follow.ts, a marked snapshot).
 * - Keyless: `FLUSHALL`/`FLUSHDB` remove the moving keys' copies in B; `FUNCTION` writes reach
 *   every master of B; `PING`, `REPLCONF`, `PUBLISH`, `SPUBLISH`, `MULTI`, `EXEC`, `SELECT 0` and
 *   `CLUSTER` (Valkey 8's `SETSLOT`) are not replayed (a PUBLISH replayed on B would deliver every
 *   message twice). `SELECT` of another
 *   database, and a keyless write it does not know, stop the follow with the reason.
 */
import { CommandTable } from '../commands/table';
import { keyPositions } from '../commands/keys';
import { KeySpace, ownerOfKey } from '../../sharding/key-space';
import { isBookkeepingKey } from './converge';
import { withoutPastExpiry } from './follow-expiry';
import { Ring } from '../../sharding/ring';

export type Routed =
  | { kind: 'skip' }
  | { kind: 'apply'; parts: Part[] }
  | { kind: 'resnapshot'; keys: Buffer[] }
  | { kind: 'flush' }
  | { kind: 'every-master'; args: Buffer[] }
  | { kind: 'getack' }
  | { kind: 'stop'; reason: string };

/** Arguments for one node of B. */
export interface Part {
  to: string;
  args: Buffer[];
  /** The part's keys (for a marked snapshot's skips). */
  keys: Buffer[];
  /** A key's state carried for a refused command: carried again should B fail it too (its node down). */
  carries?: Buffer[];
}

/** Commands longer than this are carried as their result (one Lua unpack holds at most ~8000 values). */
export const MAX_APPLY_ARGS = 4000;

// `CLUSTER`: Valkey 8 sends its replicas `CLUSTER SETSLOT` (a slot's move inside a cluster A): that
// node's topology, not data; B has its own.
const SKIPPED = new Set(['ping', 'replconf', 'publish', 'spublish', 'multi', 'exec', 'cluster']);
/** Shared: most commands of a node's stream are for keys that stay (nothing is allocated for them). */
const SKIP: Routed = Object.freeze({ kind: 'skip' });
const SPLIT_STEP = new Map([['mset', 2], ['del', 1], ['unlink', 1]]);
const RENAMED = new Map([['restore-asking', 'RESTORE'], ['msetnx', 'MSET']]);

export class FollowRouter {
  /** Both sides rings hashing alike (a ring grown or shrunk): one hash finds a key's node in both. */
  private readonly rings: [Ring, Ring] | null;

  constructor(
    private readonly table: CommandTable,
    private readonly from: KeySpace,
    private readonly to: KeySpace,
    private readonly source: string,
  ) {
    this.rings = from instanceof Ring && to instanceof Ring && from.hashesLike(to) ? [from, to] : null;
  }

  route(args: Buffer[]): Routed {
    if (args.length === 0) return { kind: 'stop', reason: 'an empty command in the replication stream' };
    // The table's entry names the command without a string made per command (the hot path).
    const found = this.table.lookup(args[0]);
    const name = found?.name ?? args[0].toString('latin1').toLowerCase();
    if (name === 'replconf' && args.length > 1 && args[1].toString('latin1').toLowerCase() === 'getack') return { kind: 'getack' };
    if (SKIPPED.has(name)) return SKIP;
    if (name === 'select') {
      return args[1]?.toString('latin1') === '0' ? SKIP : { kind: 'stop', reason: `a write to database ${args[1]?.toString('latin1') ?? '?'} (a migration carries database 0 only)` };
    }
    if (name === 'flushall' || name === 'flushdb') return { kind: 'flush' };
    if (name === 'function') return { kind: 'every-master', args: functionOnB(args) };
    const renamed = RENAMED.get(name);
    if (renamed !== undefined) args = [Buffer.from(renamed), ...args.slice(1)];
    // MIGRATE's RESTORE-ASKING: the key arriving from another master; B may still hold that master's copy.
    if (name === 'restore-asking' && !args.slice(4).some((a) => a.toString('latin1').toUpperCase() === 'REPLACE')) args.push(Buffer.from('REPLACE'));
    const info = renamed === undefined ? found : this.table.lookup(args[0]);
    if (info === undefined) return { kind: 'stop', reason: `the command ${name} is not in the back end's command table` };
    const positions = keyPositions(info, args);
    if (positions === null) return { kind: 'stop', reason: `the keys of ${name} cannot be found without the node (COMMAND GETKEYS)` };
    if (positions.length === 0) return { kind: 'stop', reason: `the keyless write ${name} cannot be carried` };

    let owner: string | null | undefined;
    let several = false;
    let moving = 0;
    for (const p of positions) {
      const to = this.ownerInB(args[p]);
      if (to === null) continue;
      moving++;
      if (owner === undefined) owner = to;
      else if (owner !== to) several = true;
    }
    if (moving === 0) return SKIP;
    const keys = positions.map((p) => args[p]);
    if (!several && moving === positions.length && args.length <= MAX_APPLY_ARGS) return { kind: 'apply', parts: [{ to: owner as string, args: withoutPastExpiry(info.name, args), keys }] };
    const step = SPLIT_STEP.get(info.name);
    if (step !== undefined && args.length <= MAX_APPLY_ARGS) return { kind: 'apply', parts: this.split(args, step) };
    return { kind: 'resnapshot', keys: keys.filter((k) => this.ownerInB(k) !== null) };
  }

  /**
   * The key's node in B when it moves there from `source`; null when it does not move (or is not
   * `source`'s). A node of a cluster A holds only keys of the slots it serves or imports, so every
   * key in its stream is its own, whatever the slot map says in the middle of a reshard.
   */
  ownerInB(key: Buffer): string | null {
    if (isBookkeepingKey(key)) return null;
    let to: string | null;
    if (this.rings !== null) {
      const [a, b] = this.rings;
      const hash = a.hashOf(key);
      if (a.addressOf(a.indexOfHash(hash)) !== this.source) return null;
      to = b.addressOf(b.indexOfHash(hash));
    } else {
      if (this.from.kind !== 'cluster' && ownerOfKey(this.from, key) !== this.source) return null;
      to = ownerOfKey(this.to, key);
    }
    if (to === this.source) return null;
    return to ?? '';
  }

  /** The slot map says `source` serves the key (what a flush or a new full sync of `source` removes from B). */
  heldInA(key: Buffer): boolean {
    return ownerOfKey(this.from, key) === this.source;
  }

  /** MSET/DEL/UNLINK split per owner in B, keeping key order within each owner. */
  private split(args: Buffer[], step: number): Part[] {
    const byOwner = new Map<string, Part>();
    for (let i = 1; i + step - 1 < args.length; i += step) {
      const to = this.ownerInB(args[i]);
      if (to === null) continue;
      let part = byOwner.get(to);
      if (part === undefined) byOwner.set(to, (part = { to, args: [args[0]], keys: [] }));
      for (let j = 0; j < step; j++) part.args.push(args[i + j]);
      part.keys.push(args[i]);
    }
    return [...byOwner.values()];
  }
}

/**
 * A FUNCTION write as it runs on every master of B: a library every node of A loads (a client's
 * FUNCTION LOAD goes to every master) reaches B once per node of A, so LOAD and RESTORE replace.
 */
function functionOnB(args: Buffer[]): Buffer[] {
  const sub = args[1]?.toString('latin1').toLowerCase();
  if (sub === 'load' && !args.slice(2, -1).some((a) => a.toString('latin1').toLowerCase() === 'replace')) {
    return [args[0], args[1], Buffer.from('REPLACE'), ...args.slice(2)];
  }
  if (sub === 'restore' && args.length === 3) return [...args, Buffer.from('REPLACE')];
  return args;
}
