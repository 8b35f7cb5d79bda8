/**
 * INFO through the proxy: sent to every master and merged into the reply one server would give.
 *
 * - `# Clients` is the proxy's own: its clients, its `maxclients`, and `blocked_clients`: clients
 *   whose blocking command their node has read (CLIENT LIST's flag `b`, see blocking.ts), so
 *   tools that wait for a client to block can go on safely, and clients waiting for a WAIT.
 * - `# Stats`: counters summed over the masters, and so are the rates (`instantaneous_*`: the
 *   cluster's ops/s and kbps); the gauges of one moment (`latest_fork_usec`, `current_*`) and the
 *   ratio `expired_stale_perc`: the largest of the masters'.
 * - `# Keyspace`, `# Commandstats`, `# Errorstats`: summed per line (`db0`, `cmdstat_get` ...);
 *   `usec_per_call` is recomputed from the sums, `avg_ttl` is the average weighted by `expires`.
 * - `# Memory`: the additive byte counts summed (`used_memory`, `used_memory_rss`,
 *   `used_memory_dataset` ...: the cluster's memory), their `_human` forms and the ratios made from
 *   them recomputed; per-node settings and allocator details are the first master's. The counts of
 *   scripts, functions and libraries are one server's, never a sum (cachedScripts, FUNCTION_COUNTS).
 * - `# Persistence`: `rdb_changes_since_last_save` summed (tools wait for it to reach 0), the
 *   in-progress flags and `loading` the largest (1 while any master is at it), the last save time
 *   the oldest, a last status `err` when any master's is; the rest the first master's.
 * - Every other section is the first master's as Redis writes it (clients parse redis_version,
 *   maxmemory_policy), and a `# Proxy` section about the proxy itself ends the reply.
 */
import { ProxyContext } from '../context';
import { asArray, decodeReply } from '../resp/decode-reply';
import * as encode from '../resp/encode';
import { Merge } from './fanout';

/** What INFO needs of the server around the dispatcher. */
export interface InfoServer {
  /** The `# Proxy` section. */
  proxySection(): string;
  /** The live `limits.maxClients`. */
  maxClients(): number;
  /** Clients of this proxy blocked on a node now (their `blocked` is set). */
  blockedClients(): number;
  /** Clients of this proxy in subscribed mode. */
  pubsubClients(): number;
}

/** Section names that include these sections (Redis's `default`, `all`, `everything`). */
const WITH_ALL = new Set(['all', 'everything', 'default']);

/** INFO [section ...]: does the request ask for `section`? */
function wantsSection(args: readonly Buffer[], section: string): boolean {
  if (args.length === 1) return true;
  return args.slice(1).some((a) => {
    const s = a.toString().toLowerCase();
    return s === section || WITH_ALL.has(s);
  });
}

/** INFO proxy: the proxy's section alone, no node needed. */
export function onlyProxySection(args: readonly Buffer[]): boolean {
  return args.length > 1 && args.slice(1).every((a) => a.toString().toLowerCase() === 'proxy');
}

interface Section {
  readonly title: string;
  readonly lines: string[];
}

/** At most this many of the store's SHAs are checked on each master behind INFO (40 bytes each). */
const CHECKED_SCRIPTS_MAX = 4096;

/** What each master got right behind INFO to count the script cache: SCRIPT EXISTS of the store's SHAs. */
interface ScriptCheck {
  /** Scripts in the proxy's store when INFO was sent. */
  readonly stored: number;
  /** How many of them were checked (the most recently used). */
  readonly checked: number;
}

/** INFO to every master: the merge, and the SCRIPT EXISTS sent behind INFO on each lane (null: none needed). */
export function infoFanout(ctx: ProxyContext, server: InfoServer, args: readonly Buffer[]): { merge: Merge; after: Buffer | null } {
  const shas = wantsSection(args, 'memory') ? ctx.scripts.recentShas(CHECKED_SCRIPTS_MAX) : [];
  const check = { stored: ctx.scripts.size, checked: shas.length };
  return { merge: infoMerge(ctx, server, args, check), after: shas.length === 0 ? null : encode.command(['SCRIPT', 'EXISTS', ...shas]) };
}

/**
 * The merge of every master's INFO reply into one server's. `check`: what was sent behind INFO to
 * count the scripts (none inside MULTI: no stored script is then known to be on any master).
 */
export function infoMerge(ctx: ProxyContext, server: InfoServer, args: readonly Buffer[], check: ScriptCheck | null = null): Merge {
  const proxy = wantsSection(args, 'proxy');
  return (frames, after) => {
    const err = frames.find((f) => f[0] === 45);
    if (err !== undefined) return err;
    const parsed = frames.map((f) => parseSections(String(decodeReply(f))));
    const held = frames.map((_, m) => heldCount(after?.[m]));
    const scripts = { stored: check?.stored ?? ctx.scripts.size, checked: after === undefined ? 0 : (check?.checked ?? 0), held };
    const sections = parsed[0].map(({ title }) => {
      const all = parsed.map((p) => p.find((s) => s.title === title)?.lines ?? []);
      if (title === 'Clients') return { title, lines: clientLines(ctx, server, all) };
      const lines = title === 'Memory' ? mergeMemory(all, scripts) : mergeSection(title, all);
      return { title, lines: title === 'Stats' ? withProxyTracking(ctx, lines) : lines };
    });
    const text = sections.map((s) => `${[`# ${s.title}`, ...s.lines].join('\r\n')}\r\n`).join('\r\n');
    if (!proxy) return encode.bulk(text);
    return encode.bulk(`${text === '' ? '' : `${text}\r\n`}${server.proxySection()}\r\n`);
  };
}

function parseSections(text: string): Section[] {
  const out: Section[] = [];
  for (const line of text.split('\r\n')) {
    if (line.startsWith('# ')) out.push({ title: line.slice(2), lines: [] });
    else if (line !== '' && out.length > 0) out[out.length - 1].lines.push(line);
  }
  return out;
}

function mergeSection(title: string, all: string[][]): string[] {
  switch (title) {
    case 'Stats':
      return mergeStats(all);
    case 'Persistence':
      return mergePersistence(all);
    case 'Keyspace':
    case 'Commandstats':
    case 'Errorstats':
      return sumFields(all);
    default:
      return [...all[0]];
  }
}

/**
 * Clients fields newer back ends have (Redis 7.2+, Valkey): the keys and the clients with a timeout
 * are per node, each node's the proxy's clients' (and direct clients') share, so summed; counted
 * in the proxy only where it knows one server's answer (pubsub_clients).
 */
const CLIENTS_SUMMED = ['watching_clients', 'clients_in_timeout_table', 'total_watched_keys', 'total_blocking_keys', 'total_blocking_keys_on_nokey'];

/**
 * The proxy's clients, in Redis's field order; fields the proxy does not track are left out, and
 * those only a newer back end has are there when the first master has them.
 */
function clientLines(ctx: ProxyContext, server: InfoServer, all: string[][]): string[] {
  const lines = [
    `connected_clients:${ctx.stats.connectedClients}`,
    'cluster_connections:0',
    `maxclients:${server.maxClients()}`,
    `blocked_clients:${server.blockedClients() + ctx.stats.waitingClients}`,
    `tracking_clients:${ctx.caching.trackingClients}`,
  ];
  const values = fieldsOfEach(all);
  const has = (name: string): boolean => values[0]?.has(name) === true;
  if (has('pubsub_clients')) lines.push(`pubsub_clients:${server.pubsubClients()}`);
  for (const name of CLIENTS_SUMMED) {
    if (has(name)) lines.push(`${name}:${values.reduce((n, v) => n + (Number(v.get(name)) || 0), 0)}`);
  }
  return lines;
}

/**
 * The tracking table is the proxy's (tracking/), not the nodes': theirs only hold the proxy's own
 * BCAST feeds. So `tracking_total_*` describe the proxy's clients, as one server's would.
 */
function withProxyTracking(ctx: ProxyContext, lines: string[]): string[] {
  const own = new Map([
    ['tracking_total_keys', ctx.caching.trackedKeys],
    ['tracking_total_items', ctx.caching.trackedItems],
    ['tracking_total_prefixes', ctx.caching.trackedPrefixes],
  ]);
  return lines.map((line) => {
    const name = line.slice(0, line.indexOf(':'));
    const value = own.get(name);
    return value === undefined ? line : `${name}:${value}`;
  });
}

/** Stats fields that are one moment's value or a ratio: the largest master's, not a sum. */
const LARGEST = new Set(['expired_stale_perc', 'latest_fork_usec', 'current_eviction_exceeded_time', 'current_active_defrag_time']);
const NUMBER = /^-?\d+(\.\d+)?$/;

function mergeStats(all: string[][]): string[] {
  const values = fieldsOfEach(all);
  return all[0].map((line) => {
    const [name, first] = splitField(line, ':');
    const each = values.map((v) => v.get(name) ?? '');
    if (!each.every((v) => NUMBER.test(v))) return line;
    const numbers = each.map(Number);
    const merged = LARGEST.has(name) ? Math.max(...numbers) : numbers.reduce((a, b) => a + b, 0);
    return `${name}:${formatLike(first, merged)}`;
  });
}

/** # Memory fields that add up over the masters: bytes held. */
const MEMORY_SUMS = new Set([
  'used_memory', 'used_memory_rss', 'used_memory_peak', 'used_memory_overhead', 'used_memory_startup', 'used_memory_dataset',
  'used_memory_lua', 'used_memory_vm_eval', 'used_memory_scripts_eval', 'used_memory_vm_functions', 'used_memory_vm_total',
  'used_memory_functions', 'used_memory_scripts',
  'allocator_allocated', 'allocator_active', 'allocator_resident', 'mem_fragmentation_bytes', 'mem_not_counted_for_evict',
  'mem_replication_backlog', 'mem_total_replication_buffers', 'mem_clients_slaves', 'mem_clients_normal', 'mem_cluster_links',
  'mem_aof_buffer', 'lazyfree_pending_objects', 'lazyfreed_objects',
]);

/**
 * The libraries and their functions, as one server's: the largest master's. Every change to them
 * goes to every master (FUNCTION LOAD, DELETE, FLUSH, RESTORE fan out; a migration copies them),
 * and a master keeps them through restarts and failovers (RDB, AOF, replication), so each master
 * holds the same libraries and any one's count is one server's; the largest, so that a master
 * that missed a change (unreachable at the time, or new) does not hide them. Not FUNCTION LIST's
 * union: a master busy with a function answers FUNCTION STATS but refuses FUNCTION LIST, and both
 * must give the same counts (function-stats.ts).
 */
const FUNCTION_COUNTS = new Set(['number_of_functions', 'number_of_libraries']);

/** What the masters' script caches hold of the proxy's store: `held[m]`, how many of the `checked` master m has. */
interface ScriptsOnMasters {
  stored: number;
  checked: number;
  held: number[];
}

/**
 * number_of_cached_scripts as one server's: the scripts a client of the proxy can run by SHA, each
 * once. Those are every script in the proxy's store (it loads one on any master that misses it,
 * and SCRIPT EXISTS answers 1 for it) and the others that every master holds (loaded past this
 * proxy). Not a sum (100 SCRIPT LOADs are on every master: 100, not 300) nor the largest master's
 * (100 EVALs of different scripts spread over 3 masters: 100, not 34). A master's scripts outside
 * the store are its count less the stored ones it has (SCRIPT EXISTS behind INFO); those on every
 * master are the smallest of these, less the stored scripts not checked (taken to be everywhere).
 */
function cachedScripts(counts: number[], s: ScriptsOnMasters): number {
  const outside = Math.min(...counts.map((c, m) => c - s.held[m]));
  return s.stored + Math.max(0, outside - (s.stored - s.checked));
}

/** How many 1s a SCRIPT EXISTS reply holds (0 for an error or no reply). */
function heldCount(frame: Buffer | undefined): number {
  if (frame === undefined || frame[0] === 45) return 0;
  return (asArray(decodeReply(frame)) as number[]).filter((x) => x === 1).length;
}

function mergeMemory(all: string[][], scripts: ScriptsOnMasters): string[] {
  const values = fieldsOfEach(all);
  const counts = (name: string): number[] | null => {
    const each = values.map((v) => v.get(name) ?? '');
    return each.every((v) => NUMBER.test(v)) ? each.map(Number) : null;
  };
  const sums = new Map<string, number>();
  for (const name of MEMORY_SUMS) {
    const each = values.map((v) => v.get(name));
    if (each.every((v) => v !== undefined && NUMBER.test(v))) sums.set(name, each.reduce((n, v) => n + Number(v), 0));
  }
  const sum = (name: string): number => sums.get(name) ?? 0;
  return all[0].map((line) => {
    const [name, first] = splitField(line, ':');
    const total = sums.get(name);
    if (total !== undefined) return `${name}:${total}`;
    const each = name === 'number_of_cached_scripts' || FUNCTION_COUNTS.has(name) ? counts(name) : null;
    if (each !== null) return `${name}:${FUNCTION_COUNTS.has(name) ? Math.max(...each) : cachedScripts(each, scripts)}`;
    // A `_human` form of a summed field, and the ratios Redis makes from the summed fields.
    const base = name.endsWith('_human') ? sums.get(name.slice(0, -'_human'.length)) : undefined;
    if (base !== undefined) return `${name}:${bytesToHuman(base)}`;
    if (name === 'used_memory_peak_perc' && sum('used_memory_peak') > 0) return `${name}:${percent(sum('used_memory'), sum('used_memory_peak'))}`;
    if (name === 'used_memory_dataset_perc' && sum('used_memory') > sum('used_memory_startup')) {
      return `${name}:${percent(sum('used_memory_dataset'), sum('used_memory') - sum('used_memory_startup'))}`;
    }
    if (name === 'mem_fragmentation_ratio' && sum('used_memory') > 0) return `${name}:${formatLike(first, sum('used_memory_rss') / sum('used_memory'))}`;
    return line;
  });
}

/** # Persistence fields that are 1 while any master is busy with them. */
const PERSISTENCE_ANY = /^(loading|async_loading|.*_in_progress|aof_rewrite_scheduled|module_fork_in_progress)$/;

function mergePersistence(all: string[][]): string[] {
  const values = fieldsOfEach(all);
  return all[0].map((line) => {
    const [name] = splitField(line, ':');
    const each = values.map((v) => v.get(name) ?? '');
    const numbers = each.every((v) => NUMBER.test(v)) ? each.map(Number) : null;
    if (name === 'rdb_changes_since_last_save' && numbers !== null) return `${name}:${numbers.reduce((a, b) => a + b, 0)}`;
    if (PERSISTENCE_ANY.test(name) && numbers !== null) return `${name}:${Math.max(...numbers)}`;
    if (name === 'rdb_last_save_time' && numbers !== null) return `${name}:${Math.min(...numbers)}`;
    if (name.endsWith('_status') && each.includes('err')) return `${name}:err`;
    return line;
  });
}

/** Redis's bytesToHuman: `1023B`, `1.00K`, `12.34M` ... */
function bytesToHuman(n: number): string {
  const units = ['K', 'M', 'G', 'T', 'P', 'E'];
  if (n < 1024) return `${n}B`;
  let value = n / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(2)}${units[unit]}`;
}

/** `part` as a percentage of `whole`, as Redis writes it (`12.34%`). */
function percent(part: number, whole: number): string {
  return `${((part * 100) / whole).toFixed(2)}%`;
}

/** `name:f=v,f=v` lines summed field by field over the masters, in first-seen order. */
function sumFields(all: string[][]): string[] {
  const merged = new Map<string, Map<string, number>>();
  for (const lines of all) {
    for (const line of lines) {
      const [name, rest] = splitField(line, ':');
      const fields = new Map(rest.split(',').map((kv) => splitField(kv, '=')));
      let sums = merged.get(name);
      if (sums === undefined) merged.set(name, (sums = new Map()));
      for (const [f, v] of fields) {
        // avg_ttl is summed weighted by the keys with an expiry, and divided at the end.
        const n = f === 'avg_ttl' ? Number(v) * Number(fields.get('expires') ?? 0) : Number(v);
        sums.set(f, (sums.get(f) ?? 0) + (Number.isFinite(n) ? n : 0));
      }
    }
  }
  return [...merged].map(([name, sums]) => {
    const fields = [...sums].map(([f, v]) => `${f}=${derived(f, v, sums)}`);
    return `${name}:${fields.join(',')}`;
  });
}

function derived(field: string, sum: number, sums: Map<string, number>): string {
  if (field === 'usec_per_call') {
    const calls = sums.get('calls') ?? 0;
    return (calls === 0 ? 0 : (sums.get('usec') ?? 0) / calls).toFixed(2);
  }
  if (field === 'avg_ttl') {
    const expires = sums.get('expires') ?? 0;
    return String(expires === 0 ? 0 : Math.round(sum / expires));
  }
  return String(sum);
}

/** Each master's `field:value` lines as a map. */
function fieldsOfEach(all: string[][]): Map<string, string>[] {
  return all.map((lines) => new Map(lines.map((l) => splitField(l, ':'))));
}

function splitField(text: string, sep: string): [string, string] {
  const i = text.indexOf(sep);
  return i < 0 ? [text, ''] : [text.slice(0, i), text.slice(i + 1)];
}

/** `n` written with as many decimals as `like` has (`0.00` stays two decimals). */
function formatLike(like: string, n: number): string {
  const dot = like.indexOf('.');
  return dot < 0 ? String(Math.round(n)) : n.toFixed(like.length - dot - 1);
}
