/**
 * Which master serves each of the 16384 hash slots: built from a CLUSTER SLOTS reply by a pure
 * function, frozen, and replaced whole. A MOVED redirection makes a copy with one slot changed;
 * readers holding the old map are never affected.
 */
import { Reply, asArray, asNumber, asString } from '../resp/decode-reply';
import { interned } from '../../sharding/interned-address';

export const SLOT_COUNT = 16384;
const UNSERVED = -1;

export interface MasterNode {
  readonly address: string;
  readonly replicas: readonly string[];
}

export class SlotMap {
  private constructor(
    /** Index into `masters` per slot, or -1. */
    private readonly owners: Int32Array,
    /** Masters ordered by the lowest slot they serve, so fan-outs (SCAN) walk them in a stable order. */
    readonly masters: readonly MasterNode[],
  ) {
    Object.freeze(this);
  }

  static empty(): SlotMap {
    return new SlotMap(new Int32Array(SLOT_COUNT).fill(UNSERVED), Object.freeze([]));
  }

  /**
   * From `CLUSTER SLOTS`: [[start, end, [host, port, id, ...], replica...], ...]. An empty host means
   * "the node you asked" (Redis 7), so `askedHost` fills it in.
   */
  static fromClusterSlots(reply: Reply, askedHost: string): SlotMap {
    const ranges = asArray(reply).map((r) => {
      const entry = asArray(r);
      if (entry.length < 3) throw new Error('CLUSTER SLOTS entry without a master');
      const start = asNumber(entry[0]);
      const end = asNumber(entry[1]);
      if (!(start >= 0 && end < SLOT_COUNT && start <= end)) throw new Error(`CLUSTER SLOTS range ${start}-${end} is invalid`);
      const nodes = entry.slice(2).map((n) => endpoint(n, askedHost));
      return { start, end, master: nodes[0], replicas: nodes.slice(1) };
    });
    ranges.sort((a, b) => a.start - b.start);
    const index = new Map<string, number>();
    const masters: { address: string; replicas: Set<string> }[] = [];
    const owners = new Int32Array(SLOT_COUNT).fill(UNSERVED);
    for (const r of ranges) {
      let i = index.get(r.master);
      if (i === undefined) {
        i = masters.length;
        index.set(r.master, i);
        masters.push({ address: r.master, replicas: new Set() });
      }
      for (const rep of r.replicas) masters[i].replicas.add(rep);
      owners.fill(i, r.start, r.end + 1);
    }
    return new SlotMap(
      owners,
      Object.freeze(masters.map((m) => Object.freeze({ address: m.address, replicas: Object.freeze([...m.replicas]) }))),
    );
  }

  /** The master serving `slot`, or null when no node serves it. */
  ownerOf(slot: number): string | null {
    const i = this.owners[slot];
    return i === UNSERVED ? null : this.masters[i].address;
  }

  get servedSlots(): number {
    let n = 0;
    for (let s = 0; s < SLOT_COUNT; s++) if (this.owners[s] !== UNSERVED) n++;
    return n;
  }

  /** This map with one slot moved to `address` (after MOVED), adding the master if it is new. */
  withSlotMoved(slot: number, address: string): SlotMap {
    let i = this.masters.findIndex((m) => m.address === address);
    let masters = this.masters;
    if (i < 0) {
      i = masters.length;
      masters = Object.freeze([...masters, Object.freeze({ address: interned(address), replicas: Object.freeze([]) })]);
    }
    if (this.owners[slot] === i) return this;
    const owners = Int32Array.from(this.owners);
    owners[slot] = i;
    return new SlotMap(owners, masters);
  }

  /** Who serves which slots, as a string: two maps give the same one exactly when every slot has the same owner. */
  ownersKey(): string {
    let out = '';
    let start = 0;
    for (let s = 1; s <= SLOT_COUNT; s++) {
      if (s === SLOT_COUNT || this.owners[s] !== this.owners[start]) {
        out += `${start}-${s - 1}:${this.ownerOf(start) ?? '-'};`;
        start = s;
      }
    }
    return out;
  }

  /** Every address the map names, masters and replicas. */
  addresses(): Set<string> {
    const out = new Set<string>();
    for (const m of this.masters) {
      out.add(m.address);
      for (const r of m.replicas) out.add(r);
    }
    return out;
  }
}

function endpoint(node: Reply, askedHost: string): string {
  const parts = asArray(node);
  let host = asString(parts[0]);
  const port = asNumber(parts[1]);
  if (host === '' || host === '?') host = askedHost;
  return interned(host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`);
}
