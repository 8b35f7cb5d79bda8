/**
 * Proxies of one ring that know of each other, so a migration does not depend on an operator
 * switching each one by hand in the right order. Every proxy in ring mode holds a connection to
 * every node of side A named after itself (CLIENT SETNAME `slotproxy-fleet|id|phase|addr|pid|version|refused|feeds|copies|to|host|config`:
 * what the target's rules refused through it, target-refusals.ts, the state of its change
 * feeds, change-copier.ts, the nodes whose copier it holds, copier-lease.ts, which side B it
 * migrates to, side-fingerprint.ts, and the host and config file it runs from, for `migrate phase`),
 * renamed at each heartbeat. The fleet is what `CLIENT LIST` on ring A's nodes shows: a proxy that
 * dies loses its connections (or, if its host vanished, stops renewing them and is idle too long).
 * Nothing is written into the keyspace, so clients see no key and no keyspace event of it.
 */
import { MigrationPhase } from '../../config/schema';

const NAME_PREFIX = 'slotproxy-fleet';
/** How often a proxy renews its name, and how long without a renewal before it counts as gone. */
export const FLEET_HEARTBEAT_MS = 1000;
export const FLEET_STALE_SECONDS = 3;

/** A proxy's phase as the fleet sees it: `none` when its config has no migration. */
export type FleetPhase = MigrationPhase | 'none';

const PHASE_ORDER: readonly FleetPhase[] = ['none', 'double-write', 'read-new', 'done'];

export interface ProxyRecord {
  id: string;
  /** Where clients (and `migrate phase`) reach it, `host:port`. */
  addr: string;
  phase: FleetPhase;
  pid: number;
  version: string;
  /** What the target's rules refused through this proxy, by command (`mset=3,...`, `-` for nothing). */
  targetRefused: string;
  /** Its change feeds: `live` (all covered), the nodes that are not (`addr=lost,...`), or `-` (none). */
  feeds: string;
  /** The nodes of side A whose copier it holds (copier-lease.ts): `addr,addr`, or `-`. */
  copies: string;
  /** Side B's fingerprint (side-fingerprint.ts), `-` without a migration. */
  to: string;
  /** The host name of the machine it runs on (`-` when registered by an older slotproxy). */
  host: string;
  /** The absolute path of the config file it was started from, on `host` (`-` when unknown). */
  config: string;
}

/** ProxyRecord.copies of a list of nodes. */
export function copiesField(nodes: readonly string[]): string {
  return nodes.length === 0 ? '-' : nodes.join(',');
}

/** The connection name that carries `r` (Redis allows no spaces or special characters in names). */
export function connectionName(r: ProxyRecord): string {
  return [NAME_PREFIX, r.id, r.phase, r.addr, String(r.pid), r.version, r.targetRefused, r.feeds, r.copies, r.to, r.host, pathField(r.config)].join('|');
}

/** A path as a name may carry it: percent-encoded (spaces, `|`, `%` and non-ASCII), `-` for none. */
function pathField(file: string): string {
  return file === '' || file === '-' ? '-' : encodeURI(file).replace(/\|/g, '%7C');
}

function pathOfField(field: string | undefined): string {
  if (field === undefined || field === '-') return '-';
  try {
    return decodeURI(field);
  } catch {
    return field;
  }
}

/** True when `phase` comes before `other` in a migration. */
export function isBehind(phase: FleetPhase, other: FleetPhase): boolean {
  return PHASE_ORDER.indexOf(phase) < PHASE_ORDER.indexOf(other);
}

/** The live proxies in one node's CLIENT LIST text. */
export function parseClientList(text: string): ProxyRecord[] {
  const out: ProxyRecord[] = [];
  for (const line of text.split('\n')) {
    const name = / name=(\S*)/.exec(line)?.[1] ?? '';
    const idle = Number(/ idle=(\d+)/.exec(line)?.[1] ?? Infinity);
    const [prefix, id, phase, addr, pid, version, targetRefused, feeds, copies, to, host, config] = name.split('|');
    if (prefix !== NAME_PREFIX || idle > FLEET_STALE_SECONDS || !PHASE_ORDER.includes(phase as FleetPhase) || addr === undefined) continue;
    out.push({ id, phase: phase as FleetPhase, addr, pid: Number(pid) || 0, version: version ?? '', targetRefused: targetRefused ?? '-', feeds: feeds ?? '-', copies: copies ?? '-', to: to ?? '-', host: host ?? '-', config: pathOfField(config) });
  }
  return out;
}

/** Asks one node a command; resolves with the decoded reply (bulk strings as Buffers). */
export type NodeCall = (addr: string, args: string[]) => Promise<unknown>;

/**
 * Every live proxy, read from every reachable node of ring A (each proxy is connected to all of
 * them; a node that is down hides nothing the others show). Throws only when no node answers.
 */
export async function readFleet(call: NodeCall, nodes: readonly string[]): Promise<ProxyRecord[]> {
  const byId = new Map<string, ProxyRecord>();
  let answered = 0;
  let lastError: unknown = null;
  await Promise.all(
    nodes.map(async (addr) => {
      try {
        const list = await call(addr, ['CLIENT', 'LIST', 'TYPE', 'normal']);
        for (const r of parseClientList(String(list))) byId.set(r.id, r);
        answered++;
      } catch (err) {
        lastError = err;
      }
    }),
  );
  if (answered === 0 && nodes.length > 0) throw new Error(`no node of ring A answered: ${lastError instanceof Error ? lastError.message : String(lastError)}`);
  return [...byId.values()].sort((a, b) => a.addr.localeCompare(b.addr) || a.id.localeCompare(b.id));
}

/** "id (addr) in phase" for messages. */
export function describeProxies(records: readonly ProxyRecord[]): string {
  return records.map((r) => `${r.id} (${r.addr}) in ${r.phase}`).join(', ');
}
