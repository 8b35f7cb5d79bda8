/**
 * FUNCTION LOAD/DELETE/FLUSH/RESTORE and SCRIPT LOAD/FLUSH sent by a client while writes land on
 * side A and are copied to B (double-write, read-new): once A's masters took it (their merged
 * reply is the client's, as without a migration), B's masters get it too, before the client has
 * that reply, in the carrier's order (carry.ts). A command A refused is not sent to B. Under the
 * replication carry a FUNCTION write reaches B by A's streams alone (follow-router.ts), and its
 * reply waits until they have carried it.
 *
 * B follows A. Where B's refusal only says B was already where A now is, it is no error, and a
 * library B held that A did not is replaced by the client's:
 * - FUNCTION DELETE answered "Library not found": B lacked it, as A now does;
 * - FUNCTION LOAD without REPLACE, FUNCTION RESTORE with APPEND, answered "already exists": sent
 *   again with REPLACE, so B gets the code A got.
 * Anything else B refuses, or a B master out of reach, fails the request with an error naming it.
 * Masters of both sides (a ring grown by one node) already took it as part of A.
 */
import { ProxyContext } from '../context';
import { Placement } from '../../sharding/migration';
import { request } from '../backend/request';
import { errorText } from '../resp/decode-reply';
import { inTargetOrder } from './carry';

export const FOLLOWS_TO_TARGET: ReadonlySet<string> = new Set([
  'function|load',
  'function|delete',
  'function|flush',
  'function|restore',
  'script|load',
  'script|flush',
]);

const TIMEOUT_MS = 10_000;

/** Sends the command to B's masters; null when each took it, else the client's error text. */
export function followOnTarget(ctx: ProxyContext, placement: Placement, name: string, args: readonly Buffer[]): Promise<string | null> {
  const to = placement.to;
  if (to === null) return Promise.resolve(null);
  // Under the replication carry A's streams carry a FUNCTION write to every master of B: sent here as
  // well it would race them (a lagging stream's LOAD landing after this DELETE), so the reply waits
  // until every change A's masters made before it is on B instead. SCRIPT LOAD and FLUSH are not in
  // the streams: those are still sent.
  if (ctx.ring?.carry.replication === true && name.startsWith('function|') && ctx.changes !== null) return afterStreams(ctx, placement, name);
  return inTargetOrder(ctx, async () => {
    const onA = new Set(placement.from.masters());
    const masters = to.masters().filter((m) => !onA.has(m));
    const problems = (await Promise.all(masters.map((addr) => followOn(ctx, addr, name, args)))).filter((p): p is string => p !== null);
    if (problems.length === 0) return null;
    const command = name.replace('|', ' ').toUpperCase();
    return `ERR slotproxy: ${command} ran on side A but not on side B (${problems.join('; ')}); the next phase switch copies the libraries and scripts again`;
  });
}

/** Null once every change each master of A made before now is on B (their streams), else the client's error text. */
async function afterStreams(ctx: ProxyContext, placement: Placement, name: string): Promise<string | null> {
  const problems = await Promise.all(placement.from.masters().map(async (a) => {
    const problem = await (ctx.changes?.after(a) ?? null);
    return problem === null ? null : `${a}: ${problem}`;
  }));
  const seen = problems.filter((p): p is string => p !== null);
  if (seen.length === 0) return null;
  return `ERR slotproxy: ${name.replace('|', ' ').toUpperCase()} ran on side A, but its stream did not reach side B (${seen.join('; ')})`;
}

async function followOn(ctx: ProxyContext, addr: string, name: string, args: readonly Buffer[]): Promise<string | null> {
  const send = async (a: readonly (Buffer | string)[]): Promise<string | null> => errorText(await request(ctx.pool.connection(addr, 0), a, TIMEOUT_MS));
  try {
    const err = await send(args);
    if (err === null) return null;
    if (name === 'function|delete' && /library not found/i.test(err)) return null;
    const replacing = withReplace(name, args);
    if (replacing !== null && /already exists/i.test(err)) {
      const again = await send(replacing);
      if (again === null) return null;
      return `${addr}: ${again}`;
    }
    return `${addr}: ${err}`;
  } catch (err) {
    return `${addr}: ${(err as Error).message}`;
  }
}

/** The command with policy REPLACE, for those that have one; null for the others. */
function withReplace(name: string, args: readonly Buffer[]): (Buffer | string)[] | null {
  // FUNCTION LOAD [REPLACE] code: REPLACE goes before the code.
  if (name === 'function|load') return [args[0], args[1], 'REPLACE', args[args.length - 1]];
  // FUNCTION RESTORE payload [FLUSH | APPEND | REPLACE]
  if (name === 'function|restore') return [args[0], args[1], args[2], 'REPLACE'];
  return null;
}
