/**
 * For every hash slot, a short hash tag whose key lands in that slot: `name:{tag}` is a key of
 * slot s when tag = slotTag(s). Bookkeeping that must sit beside a key on a cluster node (a Lua
 * script may only touch keys of one slot) is named with it. Built once, on first use, by trying
 * base-36 counters until every slot has one (about 200,000 tries, a few milliseconds).
 */
import { SLOT_COUNT, crc16 } from './slot';

let tags: string[] | null = null;

function build(): string[] {
  const out = new Array<string>(SLOT_COUNT);
  let missing = SLOT_COUNT;
  for (let n = 0; missing > 0; n++) {
    const tag = n.toString(36);
    const slot = crc16(Buffer.from(tag, 'latin1')) & (SLOT_COUNT - 1);
    if (out[slot] === undefined) {
      out[slot] = tag;
      missing--;
    }
  }
  return out;
}

export function slotTag(slot: number): string {
  tags ??= build();
  return tags[slot];
}
