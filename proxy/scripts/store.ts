/**
 * The proxy's script store: SHA1 -> Lua body, for every script the proxy has seen (preloaded from
 * the config, SCRIPT LOADed, or run with EVAL). To a client slotproxy is one server with one script
 * cache, but each master has its own cache, emptied by a failover, a restart or a SCRIPT FLUSH run
 * on the node. Knowing the body lets the proxy load a script where it is missing (NOSCRIPT healing,
 * transactions) so clients never see the difference.
 *
 * Bounded by bytes: least recently used bodies are forgotten first; preloaded ones never are (they
 * are configuration, and the preloader puts them back on every master).
 */
import { createHash } from 'node:crypto';

interface StoredScript {
  readonly body: Buffer;
  readonly pinned: boolean;
}

export class ScriptStore {
  // Map keeps insertion order: re-inserting on use makes its first entries the least recently used.
  private readonly scripts = new Map<string, StoredScript>();
  private storedBytes = 0;
  evictions = 0;
  /** NOSCRIPT replies the proxy repaired (loaded the script, resent the command). */
  healed = 0;

  constructor(readonly maxBytes: number) {}

  get size(): number {
    return this.scripts.size;
  }

  get bytes(): number {
    return this.storedBytes;
  }

  /** Remembers a body (`pinned`: a preloaded script, never evicted); returns its SHA1 in lower-case hex. */
  add(body: Buffer, pinned = false): string {
    return this.insert(body, pinned).sha;
  }

  /** Remembers a body as add() does; returns its SHA1 when the store did not hold it before, else null. */
  learn(body: Buffer): string | null {
    const { sha, added } = this.insert(body, false);
    return added ? sha : null;
  }

  private insert(body: Buffer, pinned: boolean): { sha: string; added: boolean } {
    const sha = sha1(body);
    const existing = this.scripts.get(sha);
    if (existing !== undefined) {
      this.scripts.delete(sha);
      this.scripts.set(sha, pinned && !existing.pinned ? { body: existing.body, pinned } : existing);
      return { sha, added: false };
    }
    if (!pinned && body.length > this.maxBytes) return { sha, added: false };
    this.scripts.set(sha, { body, pinned });
    this.storedBytes += body.length;
    this.evict();
    return { sha, added: true };
  }

  /** The body of `sha` (any case), or undefined when the proxy never saw it or has forgotten it. */
  get(sha: Buffer | string): Buffer | undefined {
    const key = (typeof sha === 'string' ? sha : sha.toString('latin1')).toLowerCase();
    const found = this.scripts.get(key);
    if (found === undefined) return undefined;
    if (!found.pinned) {
      this.scripts.delete(key);
      this.scripts.set(key, found);
    }
    return found.body;
  }

  /** True when the proxy holds the body of `sha` (any case); unlike get(), not a use. */
  has(sha: Buffer | string): boolean {
    return this.scripts.has((typeof sha === 'string' ? sha : sha.toString('latin1')).toLowerCase());
  }

  /** Forgets one script that is not preloaded (an EVAL whose body does not compile). */
  forget(sha: string): void {
    const s = this.scripts.get(sha);
    if (s === undefined || s.pinned) return;
    this.scripts.delete(sha);
    this.storedBytes -= s.body.length;
  }

  /** SCRIPT FLUSH through the proxy: a single server would forget every script; preloaded ones stay. */
  forgetUnpinned(): void {
    for (const sha of this.scripts.keys()) this.forget(sha);
  }

  /** A reload changed the preloaded list: scripts not in `shas` become ordinary, evictable entries. */
  keepPinnedOnly(shas: ReadonlySet<string>): void {
    for (const [sha, s] of this.scripts) if (s.pinned && !shas.has(sha)) this.scripts.set(sha, { body: s.body, pinned: false });
    this.evict();
  }

  /** The preloaded scripts, as [sha, body]. */
  pinned(): [string, Buffer][] {
    const out: [string, Buffer][] = [];
    for (const [sha, s] of this.scripts) if (s.pinned) out.push([sha, s.body]);
    return out;
  }

  /** Every script held, as [sha, body], without counting as a use (a migration copies them all to side B). */
  all(): [string, Buffer][] {
    return [...this.scripts].map(([sha, s]) => [sha, s.body]);
  }

  /** The SHAs of the `limit` scripts used last (all when fewer), without counting as a use. */
  recentShas(limit: number): string[] {
    const shas = [...this.scripts.keys()];
    return shas.length <= limit ? shas : shas.slice(shas.length - limit);
  }

  infoLines(): string[] {
    return [
      `scripts_stored:${this.scripts.size}`,
      `scripts_stored_bytes:${this.storedBytes}`,
      `scripts_store_max_bytes:${this.maxBytes}`,
      `scripts_evicted:${this.evictions}`,
      `scripts_noscript_healed:${this.healed}`,
    ];
  }

  private evict(): void {
    if (this.storedBytes <= this.maxBytes) return;
    for (const [sha, s] of this.scripts) {
      if (this.storedBytes <= this.maxBytes) return;
      if (s.pinned) continue;
      this.scripts.delete(sha);
      this.storedBytes -= s.body.length;
      this.evictions++;
    }
  }
}

export function sha1(body: Buffer): string {
  return createHash('sha1').update(body).digest('hex');
}
