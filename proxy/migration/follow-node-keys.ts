/**
 * Where the replication carry keeps its bookkeeping on a node of side B: the applied record
 * (follow-applier.ts), the refused commands (follow-refusals.ts) and the node's copy of B's fence
 * (fence.ts sets it in every slot). A cluster node's script may only touch keys of slots it serves,
 * so on a cluster B each key is tagged for the lowest slot the node serves; a ring's node has one
 * name for each. Every reader and writer places them from its slot map now, so a node that gains a
 * lower slot (a reshard of B) has them placed anew by all.
 */
import { SlotOwners } from '../../sharding/key-space';
import { slotTag } from '../../sharding/slot-tags';
import { SLOT_COUNT } from '../../sharding/slot';
import { BOOKKEEPING_PREFIX, FENCE_KEY, inSlot } from './converge';

/** The hash, per node of B, holding each followed node of A's last applied offset. */
export const APPLIED_KEY = `${BOOKKEEPING_PREFIX}applied`;
/** The hash, per node of B, holding the stream commands it refused until their keys are carried. */
export const REFUSED_KEY = `${BOOKKEEPING_PREFIX}refused`;

export interface NodeKeys {
  record: string;
  fence: string;
  refused: string;
}

/** The three keys on node `address` of B, for one look at the slot map. */
export function nodeKeysOf(address: string, owners: SlotOwners | null): NodeKeys {
  const slot = firstSlotOf(address, owners);
  if (slot === null) return { record: APPLIED_KEY, fence: FENCE_KEY, refused: REFUSED_KEY };
  const tag = slotTag(slot);
  return { record: `${APPLIED_KEY}:{${tag}}`, fence: inSlot(FENCE_KEY, slot), refused: `${REFUSED_KEY}:{${tag}}` };
}

/** The applied record's key on node `address` of B. */
export function recordKeyOf(address: string, owners: SlotOwners | null): string {
  return nodeKeysOf(address, owners).record;
}

/** The refused commands' key on node `address` of B. */
export function refusedKeyOf(address: string, owners: SlotOwners | null): string {
  return nodeKeysOf(address, owners).refused;
}

function firstSlotOf(address: string, owners: SlotOwners | null): number | null {
  if (owners === null) return null;
  for (let slot = 0; slot < SLOT_COUNT; slot++) if (owners.ownerOf(slot) === address) return slot;
  return null;
}
