/**
 * Redis Functions libraries as the migration sees them: what each master holds (FUNCTION LIST
 * WITHCODE, name -> code), and which libraries are not the same everywhere. Used by the proxy to
 * copy libraries to side B (copy-functions.ts) and by `migrate status|verify` to report them
 * (tools/libraries.ts). A library is the same when its code is byte for byte the same: the code
 * names the library and declares its functions and their flags.
 */
import { Reply, replyFields } from '../resp/decode-reply';

/** A node's decoded reply; throws on an error reply or when no reply came. */
export type LibraryCall = (addr: string, args: readonly (Buffer | string)[]) => Promise<Reply>;

/** One master and the libraries it holds, name -> code. */
export interface NodeLibraries {
  readonly side: 'A' | 'B';
  readonly addr: string;
  readonly libraries: ReadonlyMap<string, string>;
}

export interface LibraryDifference {
  readonly library: string;
  /** For people: where it is missing, or where its code is not the reference's. */
  readonly detail: string;
}

/**
 * The libraries on `addr`. A node without Redis Functions (before 7.0) holds none: it answers
 * FUNCTION with "unknown command", which is not a failure here.
 */
export async function listLibraries(call: LibraryCall, addr: string): Promise<Map<string, string>> {
  let reply: Reply;
  try {
    reply = await call(addr, ['FUNCTION', 'LIST', 'WITHCODE']);
  } catch (err) {
    if (err instanceof Error && /unknown command/i.test(err.message)) return new Map();
    throw err;
  }
  const out = new Map<string, string>();
  if (!Array.isArray(reply)) throw new Error(`${addr}: unexpected FUNCTION LIST reply`);
  for (const entry of reply) {
    if (!Array.isArray(entry)) continue;
    const fields = replyFields(entry);
    const name = fields.get('library_name');
    const code = fields.get('library_code');
    if (name !== undefined && code !== undefined && code !== null) out.set(String(name), String(code));
  }
  return out;
}

/** Every master's libraries, read in parallel. */
export function readLibraries(call: LibraryCall, side: 'A' | 'B', masters: readonly string[]): Promise<NodeLibraries[]> {
  return Promise.all(masters.map(async (addr) => ({ side, addr, libraries: await listLibraries(call, addr) })));
}

/**
 * The libraries not identical on every node given, by name. The reference code is the first A
 * node's that has the library (side A is the source), else the first B node's.
 */
export function libraryDifferences(nodes: readonly NodeLibraries[]): LibraryDifference[] {
  const ordered = [...nodes.filter((n) => n.side === 'A'), ...nodes.filter((n) => n.side === 'B')];
  const where = (list: NodeLibraries[]): string => list.map((n) => `${n.side} ${n.addr}`).join(', ');
  const out: LibraryDifference[] = [];
  for (const library of [...libraryNames(nodes)].sort()) {
    const reference = ordered.find((n) => n.libraries.has(library)) as NodeLibraries;
    const code = reference.libraries.get(library);
    const onlyB = reference.side === 'B';
    const missing = ordered.filter((n) => !n.libraries.has(library) && !(onlyB && n.side === 'A'));
    const other = ordered.filter((n) => n.libraries.has(library) && n.libraries.get(library) !== code);
    if (!onlyB && missing.length === 0 && other.length === 0) continue;
    const parts: string[] = [];
    if (onlyB) parts.push('not on side A');
    if (missing.length > 0) parts.push(`missing on ${where(missing)}`);
    if (other.length > 0) parts.push(`code differs from ${reference.side} ${reference.addr}'s on ${where(other)}`);
    out.push({ library, detail: parts.join('; ') });
  }
  return out;
}

/** Libraries named on any node given. */
export function libraryNames(nodes: readonly NodeLibraries[]): Set<string> {
  const names = new Set<string>();
  for (const n of nodes) for (const name of n.libraries.keys()) names.add(name);
  return names;
}
