/**
 * Command names looked up by their bytes, so that no string is made per request (making it and
 * hashing it were about 6% of the proxy's CPU under pipelined GETs). ASCII letters fold to lower
 * case and nothing else does, as Redis compares command names (strcasecmp in the C locale).
 */
export class NameIndex<T> {
  /** Lower-case names and their values, at the same index. */
  private readonly names: Buffer[] = [];
  private readonly values: T[] = [];
  /** Open addressing: 1 + an index into `names`, 0 for an empty slot. */
  private readonly slots: Int32Array;
  private readonly mask: number;

  constructor(entries: Iterable<readonly [string, T]>) {
    const list = [...entries];
    // At most a quarter full, so a lookup rarely probes past its first slot.
    let size = 16;
    while (size < list.length * 4) size *= 2;
    this.slots = new Int32Array(size);
    this.mask = size - 1;
    for (const [name, value] of list) {
      // A module's command name may hold any UTF-8 text; requests name it by those bytes.
      const folded = Buffer.from(name, 'utf8');
      for (let i = 0; i < folded.length; i++) folded[i] = fold(folded[i]);
      let slot = hashFolded(folded) & this.mask;
      while (this.slots[slot] !== 0) slot = (slot + 1) & this.mask;
      this.names.push(folded);
      this.values.push(value);
      this.slots[slot] = this.names.length;
    }
  }

  /** The value named by `name` in any case, or undefined. */
  get(name: Uint8Array): T | undefined {
    const mask = this.mask;
    let slot = hashFolded(name) & mask;
    for (;;) {
      const entry = this.slots[slot];
      if (entry === 0) return undefined;
      if (equalsFolded(this.names[entry - 1], name)) return this.values[entry - 1];
      slot = (slot + 1) & mask;
    }
  }
}

function fold(byte: number): number {
  return byte >= 65 && byte <= 90 ? byte + 32 : byte; // A-Z
}

/** FNV-1a over the folded bytes. */
function hashFolded(bytes: Uint8Array): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ fold(bytes[i]), 0x01000193);
  return h >>> 0;
}

/** `folded` is already lower case; `name` is compared folded. */
function equalsFolded(folded: Uint8Array, name: Uint8Array): boolean {
  if (folded.length !== name.length) return false;
  for (let i = 0; i < name.length; i++) if (folded[i] !== fold(name[i])) return false;
  return true;
}
