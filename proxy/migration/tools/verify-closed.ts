/**
 * `migrate verify` after `done`: side A is closed. The proxies write to B alone, so B's keys move
 * on from A's by design, and comparing the two would report every key written since as a
 * difference (their versions equal on both sides: B applied A's last snapshot, then clients wrote
 * B). What is checked instead, on B:
 * - each moving key of A reached B in its last state: B applied A's last snapshot (B's version at
 *   least A's), and A did not change after that snapshot (a write that never reached B: a key
 *   written straight on A's node after the close, or a lost copy). A key gone from A (expired, or
 *   deleted straight on A after the close) only needs B's version;
 * - B is fenced (fence.ts): every node of a ring B, every slot of a cluster B, refuses late copies.
 */
import { KeySpace } from '../../../sharding/key-space';
import { SLOT_COUNT } from '../../../sharding/slot';
import { FENCE_KEY, inSlot } from '../converge';
import { ownersOf } from '../copy-keys';
import { KeyState } from './key-state';
import { NodeClient } from './node-client';

/** Why a moving key of A did not reach B in its last state; null when it did. */
export function closedKeyProblem(a: KeyState, b: KeyState, names: { a: string; b: string }): string | null {
  if (b.version < a.version) return `${names.b} never applied A's last snapshot (A at version ${a.version}, B at ${b.version})`;
  if (a.type !== 'none' && a.changedSinceSnapshot) {
    return a.version === 0 ? `never copied: ${names.a} holds it with no snapshot` : `changed in ${names.a} after its last snapshot (version ${a.version}): a write B never got`;
  }
  return null;
}

/** B's fence: how many of its nodes (a ring) or slots (a cluster) hold it, of how many. */
export interface FenceCount {
  fenced: number;
  of: number;
  unit: 'nodes' | 'slots';
}

/**
 * Whether side A is closed: the config says `done`, or B holds the fence (the proxies switched to
 * `done` over RESP or `migrate phase done` while this config file still names an earlier phase).
 * One node (a ring), one slot (a cluster) tells.
 */
export async function sideAClosed(nodes: NodeClient, phase: string | null, to: KeySpace): Promise<boolean> {
  if (phase === 'done') return true;
  const owners = ownersOf(to);
  const [first] = to.masters();
  if (first === undefined) return false;
  const reply = owners === null ? await nodes.call(first, ['EXISTS', FENCE_KEY]) : await nodes.callOn(owners, owners.ownerOf(0) ?? first, ['EXISTS', inSlot(FENCE_KEY, 0)]);
  return Number(reply) > 0;
}

export async function countFence(nodes: NodeClient, to: KeySpace): Promise<FenceCount> {
  const owners = ownersOf(to);
  if (owners === null) {
    const masters = to.masters();
    const held = await Promise.all(masters.map(async (addr) => Number(await nodes.call(addr, ['EXISTS', FENCE_KEY]))));
    return { fenced: held.filter((n) => n > 0).length, of: masters.length, unit: 'nodes' };
  }
  const slots = Array.from({ length: SLOT_COUNT }, (_, s) => s);
  const held = await Promise.all(slots.map(async (slot) => Number(await nodes.callOn(owners, owners.ownerOf(slot) ?? '', ['EXISTS', inSlot(FENCE_KEY, slot)]))));
  return { fenced: held.filter((n) => n > 0).length, of: SLOT_COUNT, unit: 'slots' };
}
