// CLUSTER SLOTS replies: parsing them into sorted slot ranges and checking that the
// ranges cover all 16384 slots exactly once.

import { RespReply } from './resp-client';

export const CLUSTER_SLOTS = 16384;

export interface SlotNodeRef {
  host: string;
  port: number;
  id: string;
}

export interface SlotRange {
  start: number;
  end: number;
  master: SlotNodeRef;
  replicas: SlotNodeRef[];
}

function asNodeRef(value: RespReply): SlotNodeRef {
  if (!Array.isArray(value) || typeof value[0] !== 'string' || typeof value[1] !== 'number') {
    throw new Error(`malformed CLUSTER SLOTS node entry: ${JSON.stringify(value)}`);
  }
  return { host: value[0], port: value[1], id: typeof value[2] === 'string' ? value[2] : '' };
}

/** Parses a CLUSTER SLOTS reply into ranges sorted by start slot. */
export function parseClusterSlots(reply: RespReply): SlotRange[] {
  if (!Array.isArray(reply)) throw new Error('CLUSTER SLOTS: expected an array reply');
  const ranges = reply.map((entry): SlotRange => {
    if (!Array.isArray(entry) || typeof entry[0] !== 'number' || typeof entry[1] !== 'number' || entry.length < 3) {
      throw new Error(`malformed CLUSTER SLOTS entry: ${JSON.stringify(entry)}`);
    }
    return {
      start: entry[0],
      end: entry[1],
      master: asNodeRef(entry[2]),
      replicas: entry.slice(3).map(asNodeRef),
    };
  });
  return ranges.sort((a, b) => a.start - b.start);
}

/** Null if the ranges cover slots 0..16383 exactly once, else why not. */
export function slotCoverageProblem(ranges: readonly SlotRange[]): string | null {
  let next = 0;
  for (const r of ranges) {
    if (r.start !== next) {
      return r.start > next ? `slots ${next}-${r.start - 1} unassigned` : `slot ${r.start} assigned twice`;
    }
    next = r.end + 1;
  }
  return next === CLUSTER_SLOTS ? null : `slots ${next}-${CLUSTER_SLOTS - 1} unassigned`;
}
