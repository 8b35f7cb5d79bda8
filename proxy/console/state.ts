/**
 * The console's JSON (GET /console.json, docs/operations.md "Console"): the proxy's state in one
 * document, the page's only source. Built on request from the counters, the recorder's samples
 * and events, and the probes' last answers; it never holds a password, and never a key or value
 * (key names appear nowhere; the events name nodes and phases only).
 */
import { Config } from '../../config/schema';
import { ProxyContext } from '../context';
import { KeySpace, SlotOwners } from '../../sharding/key-space';
import { Ring } from '../../sharding/ring';
import { SLOT_COUNT } from '../cluster/slot-map';
import { ConsoleEvent, ConsoleRecorder, Sample } from './recorder';
import { CopyView, ProbeResults } from './probes';
import type { VerifyRecord } from '../migration/tools/verify-record';
import type { MigrationFeedCounts } from '../telemetry/metrics';

/** Bumped when a field changes meaning or goes away (new fields do not bump it). */
export const CONSOLE_STATE_VERSION = 1;

export interface NodeView {
  addr: string;
  /** `master`, `replica` (a cluster's), or `node` (a ring's). */
  role: 'master' | 'replica' | 'node';
  /** `A` (the back end served), `B` (a migration's target), both for a node of both rings. */
  side: 'A' | 'B' | 'A+B';
  /** A ring node's name, or the master a cluster replica follows. */
  name: string | null;
  health: 'up' | 'down' | 'unknown';
  pingMs: number | null;
  error: string | null;
  connections: number;
  requestsPerSecond: number;
  errorsPerSecond: number;
  /** Connections to it closed by the node, failed, or timed out, since the start. */
  errors: number;
}

export type PlacementView =
  | { kind: 'cluster'; masters: { addr: string; slots: number; ranges: [number, number][] }[]; unservedSlots: number }
  | { kind: 'ring'; hash: string; distribution: string; nodes: { name: string; addr: string; weight: number; share: number }[] };

export interface MigrationView {
  phase: string;
  fleet: { id: string; addr: string; phase: string; pid: number; version: string; feeds: string; copies: string; targetRefused: string }[] | null;
  fleetError: string | null;
  copy: CopyView | null;
  /** `slotproxy migrate verify`'s last result (saved on side A), null when none is known. */
  verify: VerifyRecord | null;
  /** INFO's feed counts, with each node's state and the uncovered nodes named. */
  /** `copier`: the id of the proxy that copies the node's changes (migration/copier-lease.ts), `?` while unknown. */
  feeds: (Omit<MigrationFeedCounts, 'feeds' | 'uncovered'> & { nodes: { addr: string; state: string; copier: string }[]; uncovered: string[] }) | null;
  /** What to run next (the console changes nothing itself). */
  next: string | null;
}

export interface ConsoleState {
  version: number;
  at: number;
  proxy: {
    version: string;
    mode: string;
    pid: number;
    /** Processes serving clients (`--workers`), whose counts this state sums (merge.ts); 1 without. */
    workers: number;
    uptimeSeconds: number;
    listen: string;
    address: string;
    tls: boolean;
    metricsListen: string | null;
    configFile: string | null;
    lastReload: number | null;
  };
  clients: { connected: number; totalConnections: number; byUser: Record<string, number>; requestsPerSecond: number; rejected: number };
  nodes: NodeView[];
  sentinel: { name: string; addr: string | null; lastFailover: number | null }[];
  placement: { a: PlacementView; b: PlacementView | null };
  migration: MigrationView | null;
  events: ConsoleEvent[];
  series: Sample[];
}

export interface StateSources {
  ctx: ProxyContext;
  config: Config;
  recorder: ConsoleRecorder;
  /** The proxy's version (server/version.ts; passed in, the server being above this folder). */
  version: string;
  address: () => { host: string; port: number };
  configFile: () => string | null;
}

export function buildState(src: StateSources, probes: ProbeResults): ConsoleState {
  const { ctx, config, recorder } = src;
  const a = src.address();
  const placement = ctx.ring?.placement ?? null;
  const sideA: KeySpace | SlotOwners | null = placement?.from ?? ctx.topology;
  const latest = recorder.latest();
  const byUser: Record<string, number> = {};
  for (const c of ctx.clients) byUser[c.user] = (byUser[c.user] ?? 0) + 1;
  return {
    version: CONSOLE_STATE_VERSION,
    at: Date.now(),
    proxy: {
      version: src.version,
      mode: ctx.mode,
      pid: process.pid,
      workers: 1,
      uptimeSeconds: Math.floor((Date.now() - ctx.stats.startedAt) / 1000),
      listen: config.listen,
      address: `${a.host}:${a.port}`,
      tls: config.tls !== undefined,
      metricsListen: config.metrics?.listen ?? null,
      configFile: src.configFile(),
      lastReload: recorder.lastReload,
    },
    clients: {
      connected: ctx.stats.connectedClients,
      totalConnections: ctx.stats.totalConnections,
      byUser,
      requestsPerSecond: latest?.requests ?? 0,
      rejected: ctx.stats.rejectedConnections,
    },
    nodes: nodesOf(src, probes),
    sentinel: sentinelOf(src),
    placement: { a: sideA === null ? { kind: 'cluster', masters: [], unservedSlots: SLOT_COUNT } : placementOf(sideA), b: placement?.to ? placementOf(placement.to) : null },
    migration: placement?.migrating ? migrationOf(src, probes) : null,
    events: recorder.events(),
    series: recorder.series(),
  };
}

function nodesOf(src: StateSources, probes: ProbeResults): NodeView[] {
  const { ctx, recorder } = src;
  const out = new Map<string, NodeView>();
  const add = (addr: string, role: NodeView['role'], side: 'A' | 'B', name: string | null): void => {
    const seen = out.get(addr);
    if (seen !== undefined) {
      if (seen.side !== side) seen.side = 'A+B';
      return;
    }
    const h = probes.health.get(addr);
    const stats = ctx.pool.nodeStats(addr);
    const c = stats.counters;
    const rates = recorder.ratesOf(addr);
    out.set(addr, {
      addr,
      role,
      side,
      name,
      health: h === undefined ? (recorder.lostConnection(addr) ? 'down' : 'unknown') : h.up ? 'up' : 'down',
      pingMs: h?.pingMs ?? null,
      error: h?.error ?? null,
      connections: stats.connections,
      requestsPerSecond: rates?.requests ?? 0,
      errorsPerSecond: rates?.errors ?? 0,
      errors: c.eof + c.err + c.timedOut,
    });
  };
  const addSide = (space: KeySpace | null, side: 'A' | 'B'): void => {
    if (space === null) return;
    if (space instanceof Ring) for (const n of space.nodes) add(n.addr, 'node', side, n.name);
    else for (const m of space.masters()) add(m, 'master', side, null);
  };
  const placement = ctx.ring?.placement;
  if (placement !== undefined) {
    addSide(placement.from, 'A');
    addSide(placement.to, 'B');
  }
  for (const m of ctx.topology?.current.masters ?? []) {
    add(m.address, 'master', 'A', null);
    for (const r of m.replicas) add(r, 'replica', 'A', m.address);
  }
  return [...out.values()];
}

function sentinelOf(src: StateSources): ConsoleState['sentinel'] {
  const { config, ctx } = src;
  if (config.mode !== 'ring' || ctx.sentinel === null) return [];
  const names = [...config.ring.nodes, ...(config.migration?.to && 'nodes' in config.migration.to ? config.migration.to.nodes : [])]
    .map((n) => n.master)
    .filter((n): n is string => n !== undefined);
  return [...new Set(names)].map((name) => ({ name, addr: ctx.sentinel?.addressOf(name) ?? null, lastFailover: src.recorder.lastFailover(name) }));
}

/** Slot ranges per master, or a ring's share of keys per node. */
export function placementOf(space: KeySpace | SlotOwners): PlacementView {
  if (space instanceof Ring) {
    const total = space.nodes.reduce((sum, n) => sum + n.points, 0) || 1;
    return {
      kind: 'ring',
      hash: space.hash,
      distribution: space.distribution,
      nodes: space.nodes.map((n) => ({ name: n.name, addr: n.addr, weight: n.weight, share: n.points / total })),
    };
  }
  const owners: SlotOwners = 'owners' in space ? (space.owners as SlotOwners) : (space as SlotOwners);
  const byMaster = new Map<string, { addr: string; slots: number; ranges: [number, number][] }>();
  let unserved = 0;
  let prev: string | null = null;
  for (let slot = 0; slot < SLOT_COUNT; slot++) {
    const addr = owners.ownerOf(slot);
    if (addr === null) {
      unserved++;
      prev = null;
      continue;
    }
    let m = byMaster.get(addr);
    if (m === undefined) byMaster.set(addr, (m = { addr, slots: 0, ranges: [] }));
    m.slots++;
    if (prev === addr) m.ranges[m.ranges.length - 1][1] = slot;
    else m.ranges.push([slot, slot]);
    prev = addr;
  }
  return { kind: 'cluster', masters: [...byMaster.values()], unservedSlots: unserved };
}

function migrationOf(src: StateSources, probes: ProbeResults): MigrationView {
  const { ctx } = src;
  const phase = ctx.ring?.placement.phase ?? 'none';
  const fleet = probes.fleet;
  const counts = ctx.changes?.counts() ?? null;
  const file = src.configFile() ?? 'FILE';
  return {
    phase,
    fleet: Array.isArray(fleet) ? fleet.map((r) => ({ id: r.id, addr: r.addr, phase: r.phase, pid: r.pid, version: r.version, feeds: r.feeds, copies: r.copies, targetRefused: r.targetRefused })) : null,
    fleetError: fleet !== null && !Array.isArray(fleet) ? fleet.error : null,
    copy: probes.copy,
    verify: probes.verify,
    feeds:
      counts === null
        ? null
        : {
            nodes: (ctx.changes?.states() ?? []).map((s, i) => {
              const at = s.lastIndexOf('=');
              const copier = ctx.changes?.copiers()[i] ?? '';
              return { addr: s.slice(0, at), state: s.slice(at + 1), copier: copier.slice(copier.indexOf('=') + 1) || '?' };
            }),
            uncovered: ctx.changes?.uncovered() ?? [],
            copied: counts.copied,
            unchanged: counts.unchanged,
            copyFailures: counts.copyFailures,
            gaps: counts.gaps,
            rewalks: counts.rewalks,
            missedAfterFence: counts.missedAfterFence,
          },
    next: nextStep(phase, probes.copy, file),
  };
}

/** The command an operator would run next, shown on the page (which runs nothing). */
function nextStep(phase: string, copy: CopyView | null, file: string): string | null {
  if (phase === 'double-write') {
    if (copy?.carry === 'replication' && copy.nodesDone < copy.nodes) return `wait for the full syncs of side A (slotproxy migrate copy -c ${file} shows them)`;
    if (copy === null || (copy.scanned === 0 && copy.nodesDone === 0)) return `slotproxy migrate copy -c ${file}`;
    if (copy.nodesDone < copy.nodes) return `wait for slotproxy migrate copy -c ${file} to finish (run it again if it stopped: it resumes)`;
    return `slotproxy migrate verify -c ${file}, then slotproxy migrate phase read-new -c ${file}`;
  }
  if (phase === 'read-new') return `slotproxy migrate phase done -c ${file}`;
  if (phase === 'done') return `slotproxy migrate cleanup -c ${file}, then remove the migration: section`;
  return null;
}
