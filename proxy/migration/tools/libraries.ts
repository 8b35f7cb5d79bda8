/**
 * `migrate status` and `migrate verify`: Redis Functions libraries that are not the same on every
 * master of both sides (missing on one, or other code), read straight from the nodes. The proxies
 * copy A's libraries to B (proxy/migration/carry.ts); a library changed on one side's nodes
 * directly, or a copy that failed, shows here, and makes `verify` exit 1.
 */
import { Placement } from '../../../sharding/migration';
import { LibraryCall, LibraryDifference, libraryDifferences, libraryNames, readLibraries } from '../libraries';
import { NodeClient } from './node-client';

export interface LibraryCheck {
  /** Libraries found on any master of either side. */
  compared: number;
  differences: LibraryDifference[];
}

export async function compareLibraries(nodes: NodeClient, placement: Placement): Promise<LibraryCheck> {
  const to = placement.to;
  if (to === null) throw new Error('the config has no migration: section');
  const call: LibraryCall = (addr, args) => nodes.call(addr, args);
  const [a, b] = await Promise.all([readLibraries(call, 'A', placement.from.masters()), readLibraries(call, 'B', to.masters())]);
  const all = [...a, ...b];
  return { compared: libraryNames(all).size, differences: libraryDifferences(all) };
}

/** `migrate status`'s lines about libraries; a node that cannot be read is said, not thrown. */
export async function libraryStatusLines(nodes: NodeClient, placement: Placement): Promise<string[]> {
  let check: LibraryCheck;
  try {
    check = await compareLibraries(nodes, placement);
  } catch (err) {
    return [`function libraries: unknown (${err instanceof Error ? err.message : String(err)})`];
  }
  const n = check.differences.length;
  if (n === 0) return [`function libraries: ${check.compared}, the same on every master of both sides`];
  return [`function libraries: ${check.compared}, ${n} differ:`, ...check.differences.map((d) => `  ${d.library}: ${d.detail}`)];
}

/** `migrate verify`: writes its lines about libraries; returns how many differ. */
export async function verifyLibraries(nodes: NodeClient, placement: Placement, write: (line: string) => void): Promise<number> {
  const check = await compareLibraries(nodes, placement);
  for (const d of check.differences) write(`  library differs: ${d.library}: ${d.detail}\n`);
  write(`verify: ${check.compared} function libraries compared, ${check.differences.length} differ\n`);
  return check.differences.length;
}
