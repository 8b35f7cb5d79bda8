/**
 * Scripts named in the config (`scripts:` files, or folders of *.lua) are loaded into every master
 * at start, and again into any master that lacks them later: a replica promoted by a failover, a
 * node added, a node restarted empty. A master is checked (SCRIPT EXISTS, then SCRIPT LOAD of what
 * is missing) whenever the topology reports in, after a lost back-end connection, and on a timer
 * (ring mode has no topology events). One check per master at a time.
 *
 * A script that does not compile is reported with its path and Redis's error and left out; the
 * others still load.
 */
import fs from 'node:fs';
import path from 'node:path';
import { BackendPool } from '../backend/pool';
import { Router } from '../../sharding/router';
import { ScriptStore } from './store';
import { request } from '../backend/request';
import { decodeReply, errorText } from '../resp/decode-reply';
import { log } from '../telemetry/log';

export interface ScriptFile {
  readonly path: string;
  readonly body: Buffer;
}

const RECHECK_MS = 5000;
const AFTER_LOST_CONNECTION_MS = 300;
const QUERY_TIMEOUT_MS = 5000;

/**
 * Reads every configured script: a file as is, a folder as its *.lua files (sorted, not recursive).
 * Synchronous so that a SIGHUP can refuse a file list that does not read before changing anything.
 */
export function readScriptFiles(paths: readonly string[]): ScriptFile[] {
  const out: ScriptFile[] = [];
  for (const p of paths) {
    const files = fs.statSync(p).isDirectory()
      ? fs.readdirSync(p).filter((f) => f.endsWith('.lua')).sort().map((f) => path.join(p, f))
      : [p];
    for (const f of files) out.push({ path: f, body: fs.readFileSync(f) });
  }
  return out;
}

/** What preloading needs of the running proxy (context.ts gives it). */
export interface PreloadTarget {
  readonly pool: BackendPool;
  readonly router: Router;
  readonly scripts: ScriptStore;
}

export class ScriptPreloader {
  private readonly checking = new Set<string>();
  private readonly again = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(private readonly ctx: PreloadTarget) {}

  /**
   * Compiles each file on a master (SCRIPT LOAD), pins those that load in the store, reports those
   * that do not, then loads the good ones on every other master.
   */
  async start(files: readonly ScriptFile[]): Promise<void> {
    await this.load(files);
    this.timer = setInterval(() => this.checkAll(), RECHECK_MS);
    this.timer.unref();
    this.ctx.pool.onConnectionLost(() => {
      if (this.stopped) return;
      setTimeout(() => this.checkAll(), AFTER_LOST_CONNECTION_MS).unref();
    });
  }

  /**
   * SIGHUP with a new `scripts:` list: the new files are compiled and put on every master; scripts
   * no longer listed stop being preloaded but stay known (a client may still EVALSHA them, and the
   * proxy still heals a NOSCRIPT for them) until the store evicts them.
   */
  async reload(files: readonly ScriptFile[]): Promise<void> {
    const kept = await this.load(files);
    this.ctx.scripts.keepPinnedOnly(kept);
  }

  /** Compiles and pins `files`, then checks every master; returns the SHAs now preloaded. */
  private async load(files: readonly ScriptFile[]): Promise<Set<string>> {
    const kept = new Set<string>();
    if (files.length === 0) return kept;
    const masters = this.ctx.router.masters();
    const first = masters[0];
    for (const file of files) {
      if (first === undefined) {
        kept.add(this.ctx.scripts.add(file.body, true));
        continue;
      }
      try {
        const frame = await request(this.ctx.pool.connection(first, 0), ['SCRIPT', 'LOAD', file.body], QUERY_TIMEOUT_MS);
        const err = errorText(frame);
        if (err !== null) {
          log.error({ script: file.path, error: err }, 'preloaded script does not load; the other scripts still do');
          continue;
        }
        const sha = this.ctx.scripts.add(file.body, true);
        kept.add(sha);
        log.info({ script: file.path, sha }, 'script preloaded');
      } catch (e) {
        // The master is unreachable: keep the script; the next check loads it.
        kept.add(this.ctx.scripts.add(file.body, true));
        log.warn({ script: file.path, node: first, err: (e as Error).message }, 'cannot preload script yet');
      }
    }
    await Promise.all(masters.map((m) => this.check(m)));
    return kept;
  }

  /** Checks every current master (the topology changed, or may have). */
  checkAll(): void {
    if (this.stopped || this.ctx.scripts.pinned().length === 0) return;
    for (const m of this.ctx.router.masters()) void this.check(m);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearInterval(this.timer);
  }

  private async check(address: string): Promise<void> {
    if (this.checking.has(address)) {
      this.again.add(address);
      return;
    }
    this.checking.add(address);
    try {
      const scripts = this.ctx.scripts.pinned();
      if (scripts.length === 0) return;
      const conn = this.ctx.pool.connection(address, 0);
      const exists = decodeReply(await request(conn, ['SCRIPT', 'EXISTS', ...scripts.map(([sha]) => sha)], QUERY_TIMEOUT_MS));
      if (!Array.isArray(exists)) return;
      const missing = scripts.filter((_, i) => exists[i] !== 1);
      for (const [sha, body] of missing) {
        const err = errorText(await request(conn, ['SCRIPT', 'LOAD', body], QUERY_TIMEOUT_MS));
        if (err !== null) log.warn({ node: address, sha, error: err }, 'cannot load a preloaded script');
      }
      if (missing.length > 0) log.info({ node: address, loaded: missing.length }, 'preloaded scripts loaded on a master that lacked them');
    } catch (e) {
      log.debug({ node: address, err: (e as Error).message }, 'preloaded-script check failed; retried later');
    } finally {
      this.checking.delete(address);
      if (this.again.delete(address) && !this.stopped) void this.check(address);
    }
  }
}

/** Reads the configured scripts and preloads them; a missing file fails the start (exit 1). */
export async function startPreloading(ctx: PreloadTarget, paths: readonly string[]): Promise<ScriptPreloader> {
  const preloader = new ScriptPreloader(ctx);
  await preloader.start(readScriptFiles(paths));
  return preloader;
}
