/**
 * MONITOR through the proxy: every command the proxy's clients send, one line each to every client
 * in monitor mode, as Redis 7.0's replicationFeedMonitors writes them:
 * `+<seconds>.<micros> [0 <client addr>] "ARG" "ARG"...`, each argument quoted as sdscatrepr quotes
 * it, AUTH's, HELLO AUTH's and MIGRATE AUTH/AUTH2's secrets shown as "(redacted)".
 *
 * A monitor whose unsent lines pass `limits.monitorOutputBytes` is disconnected and logged.
 *
 * Cost when no monitor is attached: the dispatcher reads `active` once per request, nothing more.
 * As Redis 7's call() feeds its monitors, a command is shown once it has run: when its reply is
 * in, just after the reply is handed to its client (so a client never sees its command on a
 * monitor before its reply). Commands refused before they run (unknown, arity, NOAUTH, ACL,
 * CROSSSLOT) are not shown, nor `admin` commands (CONFIG, MONITOR...); a transaction's commands
 * are shown when EXEC has run them, before EXEC; a monitor may not touch the keyspace, and RESET
 * ends monitor mode.
 */
import { ClientSession, Releasable } from '../client/client-session';
import { CommandInfo } from '../commands/table';
import * as encode from '../resp/encode';
import { log } from '../telemetry/log';

/** A client as MONITOR sees it (server/session.ts implements it). */
export interface MonitorClient extends ClientSession {
  /** Its registration while in monitor mode, else null. */
  monitoring: Releasable | null;
  /** `ip:port`, as the lines name a client. */
  readonly addr: string;
  /** Appends `frame` after every reply the client is owed. */
  pushOutOfBand(frame: Buffer): void;
  /** Unsent bytes past which a monitor is disconnected (limits.monitorOutputBytes; 0: never). */
  readonly monitorOutputLimitBytes: number;
  /** Runs `show` once the reply of the request being dispatched is in (its reply slot filled). */
  whenAnswered(show: (reply: Buffer) => void): void;
}

/** Redis 7.0's processCommand refusal for a monitor (a replica, to Redis) touching the keyspace. */
const KEYSPACE_REFUSED = encode.error("ERR Replica can't interact with the keyspace");

const REDACTED = Buffer.from('(redacted)');
const CROSSSLOT = Buffer.from('-CROSSSLOT ');

/** Run at once inside MULTI, not queued: shown at once (the others when EXEC runs them). */
const RUN_INSIDE_MULTI: ReadonlySet<string> = new Set(['exec', 'discard', 'multi', 'reset', 'quit', 'watch']);

export class MonitorFeed {
  /** True while any client is in monitor mode: the hot path's one check. */
  active = false;
  private readonly monitors = new Set<MonitorClient>();
  /** Commands queued in MULTI while a monitor was attached, shown when EXEC runs them. */
  private readonly queued = new Map<MonitorClient, Buffer[][]>();

  /** MONITOR: monitor mode from now on (a second MONITOR gets no reply, as on Redis). */
  attach(client: MonitorClient): void {
    if (client.monitoring !== null) return;
    const registration: Releasable = { release: () => this.detach(client) };
    client.monitoring = registration;
    // Held like a dedicated connection: released when the client goes, and it keeps the client from
    // the idle timeout, from which Redis exempts monitors too.
    client.dedicated.add(registration);
    this.monitors.add(client);
    this.active = true;
    client.replyNow(encode.OK);
  }

  /** RESET or the client gone: out of monitor mode. */
  detach(client: MonitorClient): void {
    const registration = client.monitoring;
    if (registration === null) return;
    client.monitoring = null;
    client.dedicated.delete(registration);
    this.monitors.delete(client);
    this.active = this.monitors.size > 0;
    if (!this.active) this.queued.clear();
  }

  /**
   * Called for every request that passed the checks Redis makes before running a command, while
   * `active`. Returns the refusal a monitor gets for a keyspace command, else null (the command
   * runs, and is shown).
   */
  command(client: MonitorClient, info: CommandInfo, args: Buffer[], phase: 'run' | 'queue' | 'abort'): Buffer | null {
    if (client.monitoring !== null && touchesKeyspace(info)) return KEYSPACE_REFUSED;
    // Redis leaves `admin` commands out. Scripts (`skip_monitor`) it shows from its scripting code
    // instead, before the commands they run, so they are shown here like any other.
    if (info.flags.has('admin')) return null;
    const name = info.name;
    if (phase === 'queue' && !RUN_INSIDE_MULTI.has(name)) {
      const held = this.queued.get(client);
      if (held === undefined) this.queued.set(client, [args]);
      else held.push(args);
      return null;
    }
    // EXEC runs what was queued (an aborted EXEC runs nothing); DISCARD, RESET, QUIT drop it, and
    // a MULTI outside a transaction starts afresh.
    let shown: Buffer[][] = [args];
    if ((phase !== 'queue' || name !== 'multi') && (name === 'exec' || name === 'discard' || name === 'reset' || name === 'quit' || name === 'multi')) {
      const held = this.queued.get(client);
      this.queued.delete(client);
      if (held !== undefined && name === 'exec' && phase === 'run') shown = [...held, args];
    }
    // The monitors attached when it arrived: one that attaches while it runs does not see it (as
    // on Redis, where a command runs whole before or after a MONITOR).
    const watching = [...this.monitors];
    client.whenAnswered((reply) => {
      // Refused by the proxy where Redis Cluster refuses before running: not run, not shown.
      if (reply.subarray(0, CROSSSLOT.length).equals(CROSSSLOT)) return;
      for (const queued of shown) this.show(client, queued, watching);
    });
    return null;
  }

  private show(from: MonitorClient, args: Buffer[], watching: readonly MonitorClient[]): void {
    const line = monitorLine(Date.now(), from.addr, redacted(args));
    for (const monitor of watching) {
      if (!this.monitors.has(monitor)) continue;
      // A RESET that ended monitor mode is not shown to itself.
      if (monitor === from && monitor.monitoring === null) continue;
      if (this.overLimit(monitor)) continue;
      monitor.pushOutOfBand(line);
    }
  }

  /** A monitor that does not read its lines is disconnected, as Redis's client-output-buffer-limit does. */
  private overLimit(monitor: MonitorClient): boolean {
    const limit = monitor.monitorOutputLimitBytes;
    const pending = monitor.pendingOutputBytes ?? 0;
    if (limit === 0 || pending <= limit) return false;
    log.warn({ client: monitor.addr, pendingBytes: pending, limitBytes: limit }, 'disconnecting a MONITOR client that does not read its lines (limits.monitorOutputBytes)');
    this.detach(monitor);
    monitor.destroy?.();
    return true;
  }
}

/** Redis refuses a replica's reads, writes and may-replicate commands. */
function touchesKeyspace(info: CommandInfo): boolean {
  const flags = info.flags;
  return flags.has('readonly') || flags.has('write') || flags.has('may_replicate');
}

/** The arguments with their secrets replaced, as Redis 7.0's redactClientCommandArgument leaves them. */
export function redacted(args: Buffer[]): Buffer[] {
  const name = args[0].toString('latin1').toLowerCase();
  if (name === 'auth') return [args[0], ...args.slice(1).map(() => REDACTED)];
  if (name !== 'hello' && name !== 'migrate') return args;
  const out = [...args];
  for (let i = 1; i < out.length; i++) {
    const word = out[i].toString('latin1').toLowerCase();
    if (name === 'hello' && word === 'auth' && i + 2 < out.length) {
      out[i + 1] = REDACTED;
      out[i + 2] = REDACTED;
      i += 2;
    } else if (name === 'migrate' && word === 'auth' && i + 1 < out.length) {
      out[++i] = REDACTED;
    } else if (name === 'migrate' && word === 'auth2' && i + 2 < out.length) {
      out[i + 1] = REDACTED;
      out[i + 2] = REDACTED;
      i += 2;
    } else if (name === 'migrate' && word === 'keys') {
      break; // key names follow, never secrets
    }
  }
  return out;
}

/** Microseconds since the epoch, as gettimeofday gives them (Date.now's milliseconds, refined by performance.now). */
function nowMicros(msNow: number): { sec: number; usec: number } {
  const fine = performance.timeOrigin + performance.now();
  const ms = Math.abs(fine - msNow) < 1000 ? fine : msNow;
  const micros = Math.floor(ms * 1000);
  return { sec: Math.floor(micros / 1e6), usec: micros % 1e6 };
}

/** One monitor line: a simple-string frame. */
export function monitorLine(msNow: number, addr: string, args: readonly Buffer[]): Buffer {
  const { sec, usec } = nowMicros(msNow);
  let line = `+${sec}.${String(usec).padStart(6, '0')} [0 ${addr}]`;
  for (const arg of args) line += ` ${repr(arg)}`;
  return Buffer.from(`${line}\r\n`, 'latin1');
}

/** sdscatrepr: a quoted string with \\, \" and \n \r \t \a \b escaped, other unprintable bytes as \xhh. */
export function repr(bytes: Buffer): string {
  let out = '"';
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    switch (b) {
      case 0x5c: out += '\\\\'; break;
      case 0x22: out += '\\"'; break;
      case 0x0a: out += '\\n'; break;
      case 0x0d: out += '\\r'; break;
      case 0x09: out += '\\t'; break;
      case 0x07: out += '\\a'; break;
      case 0x08: out += '\\b'; break;
      default:
        out += b >= 0x20 && b <= 0x7e ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, '0')}`;
    }
  }
  return `${out}"`;
}
