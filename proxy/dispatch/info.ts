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
 * - Every other section is the first master's as Redis writes it (clients parse redis_version,
 *   maxmemory_policy), and a `# Proxy` section about the proxy itself ends the reply.
 */
import { ProxyContext } from '../context';
import { decodeReply } from '../resp/decode-reply';
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

/** The merge of every master's INFO reply into one server's. */
export function infoMerge(ctx: ProxyContext, server: InfoServer, args: readonly Buffer[]): Merge {
  const proxy = wantsSection(args, 'proxy');
  return (frames) => {
    const err = frames.find((f) => f[0] === 45);
    if (err !== undefined) return err;
    const parsed = frames.map((f) => parseSections(String(decodeReply(f))));
    const sections = parsed[0].map(({ title }) => {
      if (title === 'Clients') return { title, lines: clientLines(ctx, server) };
      const all = parsed.map((p) => p.find((s) => s.title === title)?.lines ?? []);
      return { title, lines: mergeSection(title, all) };
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
    case 'Keyspace':
    case 'Commandstats':
    case 'Errorstats':
      return sumFields(all);
    default:
      return [...all[0]];
  }
}

/** The proxy's clients, in Redis's field order; fields the proxy does not track are left out. */
function clientLines(ctx: ProxyContext, server: InfoServer): string[] {
  return [
    `connected_clients:${ctx.stats.connectedClients}`,
    'cluster_connections:0',
    `maxclients:${server.maxClients()}`,
    `blocked_clients:${server.blockedClients() + ctx.stats.waitingClients}`,
    'tracking_clients:0',
  ];
}

/** Stats fields that are one moment's value or a ratio: the largest master's, not a sum. */
const LARGEST = new Set(['expired_stale_perc', 'latest_fork_usec', 'current_eviction_exceeded_time', 'current_active_defrag_time']);
const NUMBER = /^-?\d+(\.\d+)?$/;

function mergeStats(all: string[][]): string[] {
  const values = all.map((lines) => new Map(lines.map((l) => splitField(l, ':'))));
  return all[0].map((line) => {
    const [name, first] = splitField(line, ':');
    const each = values.map((v) => v.get(name) ?? '');
    if (!each.every((v) => NUMBER.test(v))) return line;
    const numbers = each.map(Number);
    const merged = LARGEST.has(name) ? Math.max(...numbers) : numbers.reduce((a, b) => a + b, 0);
    return `${name}:${formatLike(first, merged)}`;
  });
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

function splitField(text: string, sep: string): [string, string] {
  const i = text.indexOf(sep);
  return i < 0 ? [text, ''] : [text.slice(0, i), text.slice(i + 1)];
}

/** `n` written with as many decimals as `like` has (`0.00` stays two decimals). */
function formatLike(like: string, n: number): string {
  const dot = like.indexOf('.');
  return dot < 0 ? String(Math.round(n)) : n.toFixed(like.length - dot - 1);
}
