/**
 * Which clients read which key through the proxy (default mode, OPTIN/OPTOUT): Redis's
 * TrackingTable, kept by the proxy because the nodes only see the proxy's shared connections.
 * An entry is taken whole when its key is invalidated, as Redis does. Bounded as Redis bounds it:
 * a read may take it past `maxKeys` (tracking-table-max-keys; 0 for no limit), and the caller
 * evicts back down (client-caching.ts, on the next command and on a timer), sending the clients
 * of each evicted key an invalidation so nothing they hold goes unwatched.
 */
export type ClientIds = number | Set<number>;

export class KeyTable {
  /** Key (latin1, byte for byte) -> the id of the one client that read it, or a set when several did. */
  private readonly keys = new Map<string, ClientIds>();
  evicted = 0;

  constructor(public maxKeys: number) {}

  get size(): number {
    return this.keys.size;
  }

  /** More keys than tracking-table-max-keys allows. */
  get overLimit(): boolean {
    return this.maxKeys > 0 && this.keys.size > this.maxKeys;
  }

  /** Key-client pairs (counted when asked: INFO only). */
  get items(): number {
    let n = 0;
    for (const ids of this.keys.values()) n += typeof ids === 'number' ? 1 : ids.size;
    return n;
  }

  add(key: string, id: number): void {
    const ids = this.keys.get(key);
    if (ids === undefined) {
      this.keys.set(key, id);
    } else if (typeof ids === 'number') {
      if (ids !== id) this.keys.set(key, new Set([ids, id]));
    } else {
      ids.add(id);
    }
  }

  /** Removes the key and returns who had read it. */
  take(key: string): ClientIds | undefined {
    const ids = this.keys.get(key);
    if (ids !== undefined) this.keys.delete(key);
    return ids;
  }

  /** Forgets that client `id` read `key`; true when it had. */
  drop(key: string, id: number): boolean {
    const ids = this.keys.get(key);
    if (ids === undefined) return false;
    if (typeof ids === 'number') {
      if (ids !== id) return false;
      this.keys.delete(key);
      return true;
    }
    const had = ids.delete(id);
    if (ids.size === 0) this.keys.delete(key);
    return had;
  }

  clear(): void {
    this.keys.clear();
  }

  /**
   * Removes the key remembered longest ago (Map order is insertion order) and returns it with who
   * had read it; undefined when empty. Redis evicts a random key: which one goes is not part of
   * what it promises, only that its clients are told.
   */
  evictOne(): [string, ClientIds] | undefined {
    const first = this.keys.entries().next();
    if (first.done === true) return undefined;
    const [key, ids] = first.value;
    this.keys.delete(key);
    this.evicted++;
    return [key, ids];
  }
}

/** Each id of an entry, without a Set for the common one-client case. */
export function forEachId(ids: ClientIds, fn: (id: number) => void): void {
  if (typeof ids === 'number') fn(ids);
  else for (const id of ids) fn(id);
}
