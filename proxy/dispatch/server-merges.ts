/**
 * The server reports one Redis gives about itself (SLOWLOG, LATENCY, MEMORY STATS/DOCTOR, LASTSAVE,
 * MODULE LIST), merged from every master's into the one reply a single server would give:
 * - SLOWLOG GET: every master's newest entries, newest first, cut to the count asked; an entry's id
 *   is the master's id * masters + the master's index, so ids stay unique and stable across calls;
 * - LATENCY LATEST: per event, the newest sample's time and latency, the largest maximum; LATENCY
 *   HISTORY: every master's samples by time (the largest at the same second), the newest 160;
 *   LATENCY RESET: how many distinct events it reset (latencyResetMerge);
 * - MEMORY STATS: byte counts summed as INFO's `# Memory` sums them, ratios made from the sums;
 * - MEMORY DOCTOR, LATENCY DOCTOR: the report when every master gives the same, else each distinct one;
 * - LASTSAVE: the oldest of the masters' saves (the moment by which everything was saved somewhere);
 * - MODULE LIST: the modules every master has loaded.
 * Replies come from the masters in RESP2; maps and doctors' texts are given in the client's protocol.
 */
import { arrayElements } from '../resp/reply-framer';
import { Reply, decodeReply, replyFields } from '../resp/decode-reply';
import * as encode from '../resp/encode';
import { Merge } from './fanout';

/** The first error among the masters' replies: the reply, as for every fan-out. */
function firstError(frames: Buffer[]): Buffer | undefined {
  return frames.find((f) => f[0] === 45);
}

function integerOf(frame: Buffer): number {
  return Number(frame.toString('latin1', 1, frame.length - 2));
}

function bulkText(frame: Buffer): string {
  return frame.toString('latin1', frame.indexOf(10) + 1, frame.length - 2);
}

/** SLOWLOG GET [count]: Redis's default count is 10, -1 is every entry. */
function slowlogGet(args: Buffer[]): Merge {
  const asked = args.length > 2 ? Number(args[2].toString('latin1')) : 10;
  return (frames) => {
    const err = firstError(frames);
    if (err !== undefined) return err;
    const entries = frames.flatMap((frame, master) =>
      (arrayElements(frame) ?? []).map((entry) => {
        const fields = arrayElements(entry) ?? [];
        const id = BigInt(integerOf(fields[0])) * BigInt(frames.length) + BigInt(master);
        return { id, time: integerOf(fields[1]), rest: fields.slice(1) };
      }),
    );
    entries.sort((a, b) => b.time - a.time || (b.id > a.id ? 1 : b.id < a.id ? -1 : 0));
    const count = asked === -1 ? entries.length : asked;
    return encode.arrayOfFrames(entries.slice(0, count).map((e) => encode.arrayOfFrames([encode.integer(e.id), ...e.rest])));
  };
}

/** LATENCY LATEST: `[event, time, latest, max]` per event. */
const latencyLatest: Merge = (frames) => {
  const err = firstError(frames);
  if (err !== undefined) return err;
  const events = new Map<string, { name: Buffer; time: number; latest: number; max: number }>();
  for (const frame of frames) {
    for (const entry of arrayElements(frame) ?? []) {
      const [name, time, latest, max] = arrayElements(entry) ?? [];
      const key = bulkText(name);
      const seen = events.get(key);
      const sample = { name, time: integerOf(time), latest: integerOf(latest), max: integerOf(max) };
      if (seen === undefined) events.set(key, sample);
      else {
        if (sample.time > seen.time || (sample.time === seen.time && sample.latest > seen.latest)) [seen.time, seen.latest] = [sample.time, sample.latest];
        seen.max = Math.max(seen.max, sample.max);
      }
    }
  }
  return encode.arrayOfFrames([...events.values()].map((e) => encode.arrayOfFrames([e.name, encode.integer(e.time), encode.integer(e.latest), encode.integer(e.max)])));
};

/** Redis keeps this many samples per event (LATENCY_TS_LEN). */
const LATENCY_SAMPLES = 160;

/** LATENCY HISTORY event: `[time, latency]` pairs, oldest first. */
const latencyHistory: Merge = (frames) => {
  const err = firstError(frames);
  if (err !== undefined) return err;
  const byTime = new Map<number, number>();
  for (const frame of frames) {
    for (const sample of arrayElements(frame) ?? []) {
      const [time, latency] = (arrayElements(sample) ?? []).map(integerOf);
      byTime.set(time, Math.max(byTime.get(time) ?? 0, latency));
    }
  }
  const samples = [...byTime.entries()].sort((a, b) => a[0] - b[0]).slice(-LATENCY_SAMPLES);
  return encode.arrayOfFrames(samples.map(([time, latency]) => encode.arrayOfFrames([encode.integer(time), encode.integer(latency)])));
};

/**
 * LATENCY RESET [event ...]: sent behind a LATENCY LATEST on each master (dispatcher.ts), so the
 * count is of the distinct events reset, as one server counts them, not one per master holding one.
 */
export function latencyResetMerge(args: Buffer[]): Merge {
  const named = new Set(args.slice(2).map((a) => a.toString('latin1')));
  return (latest, resets = []) => {
    const err = firstError(resets) ?? firstError(latest);
    if (err !== undefined) return err;
    const events = new Set<string>();
    for (const frame of latest) for (const entry of arrayElements(frame) ?? []) events.add(bulkText((arrayElements(entry) ?? [])[0]));
    return encode.integer(named.size === 0 ? events.size : [...named].filter((n) => events.has(n)).length);
  };
}

/** MEMORY DOCTOR, LATENCY DOCTOR: one report, as a verbatim string in RESP3. */
function doctor(protocol: 2 | 3): Merge {
  return (frames) => {
    const err = firstError(frames);
    if (err !== undefined) return err;
    const texts = [...new Set(frames.map(bulkText))];
    return encode.verbatim(texts.join('\n\n'), protocol);
  };
}

/** LASTSAVE: the oldest save. */
const oldest: Merge = (frames) => firstError(frames) ?? encode.integer(Math.min(...frames.map(integerOf)));

/** MEMORY STATS fields that are ratios or per-key figures, made again from the sums. */
function memoryRatio(name: string, sum: (field: string) => number): number | undefined {
  const rss = sum('allocator.resident') + sum('rss-overhead.bytes');
  const netUsage = sum('total.allocated') - sum('startup.allocated');
  const ratio = (a: number, b: number): number => (b > 0 ? a / b : 0);
  switch (name) {
    case 'keys.bytes-per-key':
      return sum('keys.count') > 0 ? Math.floor(netUsage / sum('keys.count')) : 0;
    case 'dataset.percentage':
      return ratio(sum('dataset.bytes') * 100, netUsage);
    case 'peak.percentage':
      return ratio(sum('total.allocated') * 100, sum('peak.allocated'));
    case 'allocator-fragmentation.ratio':
      return ratio(sum('allocator.active'), sum('allocator.allocated'));
    case 'allocator-rss.ratio':
      return ratio(sum('allocator.resident'), sum('allocator.active'));
    case 'rss-overhead.ratio':
      return ratio(rss, sum('allocator.resident'));
    case 'fragmentation':
      return ratio(rss, rss - sum('fragmentation.bytes'));
    default:
      return undefined;
  }
}

function container(protocol: 2 | 3, fields: Buffer[]): Buffer {
  return protocol === 3 ? encode.mapOfFrames(fields) : encode.arrayOfFrames(fields);
}

/** A double as Redis replies one: a RESP3 double, or a bulk string in RESP2. */
function double(value: number, protocol: 2 | 3): Buffer {
  const text = String(value);
  return protocol === 3 ? Buffer.from(`,${text}\r\n`) : encode.bulk(text);
}

/** MEMORY STATS: the first master's fields in its order; integers summed, ratios made from the sums, `db.N` summed field by field. */
function memoryStats(protocol: 2 | 3): Merge {
  return (frames) => {
    const err = firstError(frames);
    if (err !== undefined) return err;
    const stats = frames.map((f) => replyFields(decodeReply(f, true)));
    const sum = (field: string): number => stats.reduce((acc, s) => acc + (typeof s.get(field) === 'number' ? (s.get(field) as number) : 0), 0);
    const out: Buffer[] = [];
    const names = [...new Set(stats.flatMap((s) => [...s.keys()]))];
    for (const name of names) {
      const value = stats.find((s) => s.has(name))?.get(name) ?? null;
      out.push(encode.bulk(name));
      const made = memoryRatio(name, sum);
      if (made !== undefined) out.push(Number.isInteger(value) ? encode.integer(made) : double(made, protocol));
      else if (typeof value === 'number') out.push(encode.integer(sum(name)));
      else if (Array.isArray(value)) {
        // db.N: its overheads summed over the masters that have it.
        const dbs = stats.map((s) => s.get(name)).filter((v): v is Reply[] => Array.isArray(v)).map(replyFields);
        const fields = [...replyFields(value).keys()].flatMap((f) => [encode.bulk(f), encode.integer(dbs.reduce((acc, d) => acc + Number(d.get(f) ?? 0), 0))]);
        out.push(container(protocol, fields));
      } else if (Buffer.isBuffer(value) && !Number.isNaN(Number(value.toString('latin1')))) {
        const values = stats.map((s) => s.get(name)).filter(Buffer.isBuffer).map((v) => Number(v.toString('latin1')));
        out.push(double(values.reduce((a, b) => a + b, 0) / values.length, protocol));
      } else out.push(Buffer.isBuffer(value) ? encode.bulk(value) : encode.NULL_BULK);
    }
    return container(protocol, out);
  };
}

/** MODULE LIST: the first master's entries for the modules every master has (by name). */
function moduleList(protocol: 2 | 3): Merge {
  return (frames) => {
    const err = firstError(frames);
    if (err !== undefined) return err;
    const entriesOf = (frame: Buffer): Buffer[] => arrayElements(frame) ?? [];
    const nameOf = (entry: Buffer): string => String(replyFields(decodeReply(entry, true)).get('name'));
    const everywhere = entriesOf(frames[0]).filter((entry) => frames.every((f) => entriesOf(f).some((e) => nameOf(e) === nameOf(entry))));
    return encode.arrayOfFrames(everywhere.map((entry) => container(protocol, arrayElements(entry) ?? [])));
  };
}

/** The merges of the server reports, by command, made for one request (its arguments and the client's protocol). */
export const SERVER_MERGES: ReadonlyMap<string, (args: Buffer[], protocol: 2 | 3) => Merge> = new Map<string, (args: Buffer[], protocol: 2 | 3) => Merge>([
  ['slowlog|get', (args) => slowlogGet(args)],
  ['latency|latest', () => latencyLatest],
  ['latency|history', () => latencyHistory],
  ['latency|doctor', (_args, protocol) => doctor(protocol)],
  ['memory|doctor', (_args, protocol) => doctor(protocol)],
  ['memory|stats', (_args, protocol) => memoryStats(protocol)],
  ['module|list', (_args, protocol) => moduleList(protocol)],
  ['lastsave', () => oldest],
]);
