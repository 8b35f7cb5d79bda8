/**
 * Requests that reach a node on another back-end connection than the client's requests before
 * them: a WATCH (a connection of its own), a blocking command, WAIT and WAITAOF, and a HELLO that
 * changes the protocol (the client's shared connections are then the other protocol's). Sent at
 * once, such a request can reach the node before earlier ones still on their way there (a SET then
 * a WATCH of its key, an RPUSH then a BLPOP of it, writes then GET after HELLO 3): the node reads
 * two connections in no set order. The session sends it once every earlier request is answered
 * (server/session.ts), as one Redis, reading one connection, runs them in order.
 */
import { CommandInfo, CommandTable } from '../commands/table';
import { BLOCKS_ONLY_WITH_BLOCK_ARG } from '../commands/policy';
import { parseInteger } from '../commands/keys';
import { TransactionClient } from './transaction-state';

export function switchesConnection(table: CommandTable, session: TransactionClient, args: Buffer[]): boolean {
  const info = table.lookup(args[0]);
  if (info === undefined) return false;
  const txn = session.transaction;
  // Queued inside MULTI: nothing is sent until EXEC.
  if (txn !== null && txn.inMulti) return false;
  switch (info.name) {
    case 'hello': {
      const version = args.length > 1 ? parseInteger(args[1]) : null;
      return (version === 2 || version === 3) && version !== session.protocol;
    }
    case 'watch':
      return txn === null || txn.watch === null;
    case 'wait':
    case 'waitaof':
      return true;
    default:
      return info.flags.has('blocking') && blocks(info, args);
  }
}

/** XREAD and XREADGROUP carry the `blocking` flag but only block with a BLOCK argument. */
export function blocks(info: CommandInfo, args: Buffer[]): boolean {
  if (!BLOCKS_ONLY_WITH_BLOCK_ARG.has(info.name)) return true;
  return args.some((a) => a.length === 5 && a.toString('latin1').toLowerCase() === 'block');
}
