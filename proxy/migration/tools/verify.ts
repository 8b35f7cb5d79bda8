/**
 * `slotproxy migrate verify`: every key of ring A whose owner changes is compared with its copy
 * on its owner in ring B (type, value, TTL within a tolerance), and every such key found in B is
 * checked to exist in A (a key deleted in A but still in B was resurrected). Values are compared
 * by DUMP first, and by content when the encodings differ.
 */
import { Placement } from '../../../sharding/migration';
import { SlotOwners, ownerOfKey } from '../../../sharding/key-space';
import { NodeClient, scanStep, showKey } from './node-client';
import { isBookkeepingKey } from '../converge';
import { ownersOf } from '../copy-keys';
import { Reply } from '../../resp/decode-reply';
import { Progress } from './progress';

export interface VerifyOptions {
  ttlToleranceMs: number;
  batch: number;
  /** How many differences to describe. */
  show: number;
  progress: boolean;
}

export interface VerifyResult {
  compared: number;
  differing: number;
  examples: string[];
}

interface KeyState {
  type: string;
  pttl: number;
  dump: Buffer | null;
}

/** One side's node of a key: its address, and the side's slot map when it is a cluster. */
interface At {
  addr: string;
  owners: SlotOwners | null;
}

async function stateOf(nodes: NodeClient, at: At, key: Buffer): Promise<KeyState> {
  const [type, pttl, dump] = await Promise.all([
    nodes.callOn(at.owners, at.addr, ['TYPE', key]),
    nodes.callOn(at.owners, at.addr, ['PTTL', key]),
    nodes.callOn(at.owners, at.addr, ['DUMP', key]),
  ]);
  return { type: String(type), pttl: Number(pttl), dump: Buffer.isBuffer(dump) ? dump : null };
}

/** A canonical form of a value, independent of its encoding. */
async function content(nodes: NodeClient, at: At, key: Buffer, type: string): Promise<string> {
  const call = (args: (Buffer | string)[]): Promise<Reply> => nodes.callOn(at.owners, at.addr, args);
  const norm = (r: Reply): string => JSON.stringify(r, (_k, v: unknown) => (Buffer.isBuffer(v) ? v.toString('base64') : v));
  const sortedPairs = (r: Reply): string => {
    const a = Array.isArray(r) ? r : [];
    const pairs: string[] = [];
    for (let i = 0; i + 1 < a.length; i += 2) pairs.push(norm([a[i], a[i + 1]]));
    return pairs.sort().join(',');
  };
  switch (type) {
    case 'string':
      return norm(await call(['GET', key]));
    case 'list':
      return norm(await call(['LRANGE', key, '0', '-1']));
    case 'set':
      return ((await call(['SMEMBERS', key])) as Reply[]).map(norm).sort().join(',');
    case 'hash':
      return sortedPairs(await call(['HGETALL', key]));
    case 'zset':
      return norm(await call(['ZRANGE', key, '0', '-1', 'WITHSCORES']));
    case 'stream':
      return norm(await call(['XRANGE', key, '-', '+']));
    default:
      return `unknown type ${type}`;
  }
}

async function difference(nodes: NodeClient, atA: At, atB: At, key: Buffer, tolerance: number): Promise<string | null> {
  const a = atA.addr;
  const b = atB.addr;
  const [sa, sb] = await Promise.all([stateOf(nodes, atA, key), stateOf(nodes, atB, key)]);
  if (sa.type === 'none' && sb.type === 'none') return null;
  if (sa.type === 'none') return `in ${b} but not in ${a} (resurrected or never deleted)`;
  if (sb.type === 'none') return `missing in ${b}`;
  if (sa.type !== sb.type) return `type ${sa.type} in ${a}, ${sb.type} in ${b}`;
  if (sa.dump === null || sb.dump === null || !sa.dump.equals(sb.dump)) {
    if ((await content(nodes, atA, key, sa.type)) !== (await content(nodes, atB, key, sb.type))) return `${sa.type} values differ`;
  }
  if ((sa.pttl < 0) !== (sb.pttl < 0)) return `TTL ${sa.pttl} ms in ${a}, ${sb.pttl} ms in ${b}`;
  if (sa.pttl >= 0 && Math.abs(sa.pttl - sb.pttl) > tolerance) return `TTL ${sa.pttl} ms in ${a}, ${sb.pttl} ms in ${b}`;
  return null;
}

export async function verifyMoved(nodes: NodeClient, placement: Placement, opts: VerifyOptions): Promise<VerifyResult> {
  const from = placement.from;
  const to = placement.to;
  if (to === null) throw new Error('the config has no migration: section');
  const result: VerifyResult = { compared: 0, differing: 0, examples: [] };
  const seen = new Set<string>();
  const toOwners = ownersOf(to);
  const sizes = await Promise.all([...from.masters(), ...to.masters()].map(async (addr) => Number(await nodes.call(addr, ['DBSIZE']))));
  const progress = opts.progress ? new Progress('verify', sizes.reduce((s, n) => s + n, 0)) : null;
  let scanned = 0;
  const check = async (key: Buffer): Promise<void> => {
    const id = key.toString('hex');
    if (seen.has(id)) return;
    seen.add(id);
    result.compared++;
    const a = { addr: ownerOfKey(from, key) ?? '', owners: null };
    const b = { addr: ownerOfKey(to, key) ?? '', owners: toOwners };
    const diff = await difference(nodes, a, b, key, opts.ttlToleranceMs);
    if (diff === null) return;
    result.differing++;
    if (result.examples.length < opts.show) result.examples.push(`${showKey(key)}: ${diff}`);
  };
  // Keys of A that move, then keys of B that arrived: together they catch lost and resurrected keys.
  const passes: { addrs: readonly string[]; owns: (k: Buffer, addr: string) => boolean }[] = [
    { addrs: from.masters(), owns: (k, addr) => ownerOfKey(from, k) === addr && ownerOfKey(to, k) !== addr },
    { addrs: to.masters(), owns: (k, addr) => ownerOfKey(to, k) === addr && ownerOfKey(from, k) !== addr },
  ];
  for (const pass of passes) {
    for (const addr of pass.addrs) {
      let cursor = '0';
      do {
        const step = await scanStep(nodes, addr, cursor, opts.batch);
        const keys = step.keys.filter((k) => !isBookkeepingKey(k) && pass.owns(k, addr));
        await Promise.all(keys.map((k) => check(k)));
        scanned += step.keys.length;
        progress?.update(scanned, `${result.differing} differ`);
        cursor = step.cursor;
      } while (cursor !== '0');
    }
  }
  progress?.finish();
  return result;
}
