/**
 * Commands of side A's stream that a node of side B refused, kept on that node until their keys'
 * states are carried (follow.ts). The apply script (follow-applier.ts) records the node's offset
 * past a refused command in the same run that refuses it, so a follower that dies before the
 * keys' states are on B would resume past the command and never carry them. So the script also
 * writes the refused command into the node's REFUSED_KEY (follow-node-keys.ts), in that same run:
 *
 *   field  "<source> <record value> <index in the batch>"
 *   value  each argument as "<byte length>:<bytes>", one after another
 *
 * The follower that refused it removes the field once the command's ticket closes (its keys'
 * states are on B); a follower that resumes reads every node's fields for its source (and for
 * the address the records are under after a failover of A) and carries those keys' states first,
 * read on A now. Carrying a state twice writes the same state, so a field left behind by a crash
 * after the carry costs one more read and nothing else. A new full sync replaces them all.
 */
import { ProxyContext } from '../context';
import { KeySpace } from '../../sharding/key-space';
import { REFUSED_KEY, refusedKeyOf } from './follow-node-keys';
import { request } from '../backend/request';
import { decodeReply } from '../resp/decode-reply';
import { ownersOf } from './copy-keys';
import { CommandTable } from '../commands/table';
import { keyPositions } from '../commands/keys';

const LANE = 0;

/** A refused command as a node of B holds it. */
export interface Refusal {
  node: string;
  field: string;
  args: Buffer[];
}

/** The field the apply script writes for the batch's `index`th command (keep in step with its Lua). */
export function refusalField(source: string, recordValue: string, index: number): string {
  return `${source} ${recordValue} ${index}`;
}

/** The arguments of a value the apply script wrote; null if it is not one. */
export function parseRefusedArgs(value: Buffer): Buffer[] | null {
  const args: Buffer[] = [];
  let at = 0;
  while (at < value.length) {
    const colon = value.indexOf(0x3a, at);
    if (colon < 0) return null;
    const length = Number(value.toString('latin1', at, colon));
    if (!Number.isInteger(length) || length < 0 || colon + 1 + length > value.length) return null;
    args.push(value.subarray(colon + 1, colon + 1 + length));
    at = colon + 1 + length;
  }
  return args.length > 0 ? args : null;
}

/** Every refusal recorded on B's masters under one of `sources`. */
export async function readRefusals(ctx: ProxyContext, to: KeySpace, sources: readonly string[]): Promise<Refusal[]> {
  const owners = ownersOf(to);
  const out: Refusal[] = [];
  for (const node of to.masters()) {
    const reply = decodeReply(await request(ctx.pool.connection(node, LANE), ['HGETALL', refusedKeyOf(node, owners)], ctx.forward.retryWindowMs), true);
    if (reply instanceof Error) throw new Error(`${node} answered ${reply.message} to HGETALL of ${REFUSED_KEY}`);
    if (!Array.isArray(reply)) continue;
    for (let i = 0; i + 1 < reply.length; i += 2) {
      const field = (reply[i] as Buffer).toString('latin1');
      if (!sources.some((s) => field.startsWith(`${s} `))) continue;
      const args = parseRefusedArgs(reply[i + 1] as Buffer);
      if (args !== null) out.push({ node, field, args });
    }
  }
  return out;
}

/** Removes `refusals` from their nodes (their keys' states are on B, or a full sync replaced them). */
export async function forgetRefusals(ctx: ProxyContext, to: KeySpace, refusals: readonly Refusal[]): Promise<void> {
  const owners = ownersOf(to);
  const byNode = new Map<string, string[]>();
  for (const r of refusals) byNode.set(r.node, [...(byNode.get(r.node) ?? []), r.field]);
  for (const [node, fields] of byNode) await request(ctx.pool.connection(node, LANE), ['HDEL', refusedKeyOf(node, owners), ...fields], ctx.forward.retryWindowMs);
}

/** The keys of refused commands, as `table` finds them (a command it cannot place keys for gives none). */
export function refusedKeys(table: CommandTable, refusals: readonly Refusal[]): Buffer[] {
  const keys = new Map<string, Buffer>();
  for (const { args } of refusals) {
    const info = table.lookup(args[0]);
    const positions = info === undefined ? null : keyPositions(info, args);
    for (const p of positions ?? []) keys.set(args[p].toString('latin1'), args[p]);
  }
  return [...keys.values()];
}
