/**
 * What `migrate copy` and `migrate status` say of the replication carry, read from the nodes
 * themselves (the proxies need not be reachable): per node of side A, its last full sync (the
 * history copy, follow-progress.ts), its followers as A lists
 * them in INFO replication (state, offset acknowledged), its own offset, the offset each node of
 * B recorded as applied, and how large A's repl-backlog-size must be for a lost link of
 * BACKLOG_FOR_S seconds at the write rate measured over one second.
 */
import { NodeClient } from './node-client';
import { Placement } from '../../../sharding/migration';
import { ownersOf } from '../copy-keys';
import { recordKeyOf } from '../follow-node-keys';
import { FullSyncRecord, describeSync } from '../follow-progress';
import { readSyncRecords } from './follow-copy';

export const BACKLOG_FOR_S = 60;
const RATE_SAMPLE_MS = 1000;

export interface NodeFollowState {
  node: string;
  /** master_repl_offset now. */
  offset: number;
  /** The followers A lists: `state` (wait_bgsave, send_bulk, online) and acknowledged offset. */
  replicas: { state: string; ack: number }[];
  /** The lowest offset B's nodes recorded as applied for this node, null while no full sync finished. */
  applied: number | null;
  /** Bytes per second written to the node's stream. */
  rate: number;
  backlog: number;
  /** Its last full sync, as the follower saved it on the node (follow-progress.ts). */
  sync: FullSyncRecord | null;
}

function field(info: string, name: string): string | null {
  return new RegExp(`^${name}:(.*)\\r?$`, 'm').exec(info)?.[1]?.trim() ?? null;
}

export async function followStates(nodes: NodeClient, placement: Placement): Promise<NodeFollowState[]> {
  const to = placement.to;
  if (to === null) return [];
  const owners = ownersOf(to);
  const out: NodeFollowState[] = [];
  const first = new Map<string, number>();
  for (const a of placement.from.masters()) first.set(a, Number(field(String(await nodes.call(a, ['INFO', 'replication'])), 'master_repl_offset') ?? 0));
  await new Promise((resolve) => setTimeout(resolve, RATE_SAMPLE_MS));
  const syncs = await readSyncRecords(nodes, placement);
  for (const [i, a] of placement.from.masters().entries()) {
    const info = String(await nodes.call(a, ['INFO', 'replication']));
    const offset = Number(field(info, 'master_repl_offset') ?? 0);
    const replicas = [...info.matchAll(/^slave\d+:(.*)$/gm)].map((m) => {
      const kv = new Map(m[1].trim().split(',').map((p) => p.split('=') as [string, string]));
      return { state: kv.get('state') ?? '?', ack: Number(kv.get('offset') ?? 0) };
    });
    let applied: number | null = null;
    for (const b of to.masters()) {
      const rec = await nodes.call(b, ['HGET', recordKeyOf(b, owners), a]).catch(() => null);
      const text = typeof rec === 'string' ? rec : Buffer.isBuffer(rec) ? rec.toString('latin1') : null;
      const off = text === null ? null : Number(text.split(' ')[1]);
      if (off === null) {
        applied = null;
        break;
      }
      applied = applied === null ? off : Math.min(applied, off);
    }
    out.push({ node: a, offset, replicas, applied, rate: Math.max(0, offset - (first.get(a) ?? offset)) / (RATE_SAMPLE_MS / 1000), backlog: await backlogOf(nodes, a), sync: syncs[i] });
  }
  return out;
}

async function backlogOf(nodes: NodeClient, a: string): Promise<number> {
  const r = await nodes.call(a, ['CONFIG', 'GET', 'repl-backlog-size']).catch(() => null);
  return Array.isArray(r) ? Number(r[1]) : 0;
}

/** One line per node, and a warning where A's backlog is too small for a lost link of BACKLOG_FOR_S. */
export function followLines(states: readonly NodeFollowState[]): string[] {
  const lines: string[] = [];
  for (const s of states) {
    const followers = s.replicas.length === 0 ? 'no follower connected' : s.replicas.map((r) => `${r.state}, acknowledged ${r.ack}`).join('; ');
    const applied = s.applied === null ? 'full sync not finished' : `applied on B through ${s.applied} (${Math.max(0, s.offset - s.applied)} bytes behind)`;
    lines.push(`  ${s.node}: ${describeSync(s.sync)}; offset ${s.offset}, ${followers}; ${applied}; writes ${Math.round(s.rate)} bytes/s`);
    const need = Math.ceil(s.rate * BACKLOG_FOR_S);
    if (s.backlog > 0 && need > s.backlog) lines.push(`    warning: repl-backlog-size ${s.backlog} holds ${(s.backlog / Math.max(s.rate, 1)).toFixed(0)} s of writes; a lost link of ${BACKLOG_FOR_S} s needs ${need} (CONFIG SET repl-backlog-size ${need}), or it costs a new full sync`);
  }
  return lines;
}
