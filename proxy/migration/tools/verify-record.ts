/**
 * `migrate verify`'s last result, left on side A beside the copy's progress (the copy state hash of
 * A's first node, or of slot 0's owner for a cluster) so that the proxies can show it (the console,
 * proxy/console/). Best effort: a verify whose result cannot be saved still reports it.
 */
import { Placement } from '../../../sharding/migration';
import type { Reply } from '../../resp/decode-reply';
import { ownersOf } from '../copy-keys';
import { CLUSTER_COPY_STATE_KEY, COPY_STATE_KEY } from './copy';
import { NodeClient } from './node-client';

export interface VerifyRecord {
  /** When the verify finished, ms since the epoch. */
  at: number;
  compared: number;
  differing: number;
  /** Keys that kept differing only because they were being written (B catching up). */
  inFlight: number;
}

const FIELDS = ['verify_at', 'verify_compared', 'verify_differing', 'verify_in_flight'];

/** The node and key that hold the record: side A's first node's copy state (a cluster's slot-0 record). */
export function verifyRecordPlace(placement: Placement): { addr: string; key: string } {
  const owners = ownersOf(placement.from);
  return owners === null ? { addr: placement.from.masters()[0] ?? '', key: COPY_STATE_KEY } : { addr: owners.ownerOf(0) ?? '', key: CLUSTER_COPY_STATE_KEY };
}

export function readVerifyRecord(key: string): string[] {
  return ['HMGET', key, ...FIELDS];
}

/** Null before any verify saved one. */
export function parseVerifyRecord(reply: Reply): VerifyRecord | null {
  const values = Array.isArray(reply) ? reply.map((v) => (Buffer.isBuffer(v) || typeof v === 'string' ? Number(v.toString()) : NaN)) : [];
  if (values.length !== FIELDS.length || values.some((v) => !Number.isFinite(v))) return null;
  const [at, compared, differing, inFlight] = values;
  return { at, compared, differing, inFlight };
}

export async function saveVerifyRecord(nodes: NodeClient, placement: Placement, r: VerifyRecord): Promise<void> {
  const { addr, key } = verifyRecordPlace(placement);
  const values = [r.at, r.compared, r.differing, r.inFlight].map(String);
  await nodes.callOn(ownersOf(placement.from), addr, ['HSET', key, ...FIELDS.flatMap((f, i) => [f, values[i]])]);
}
