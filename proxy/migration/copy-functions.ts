/**
 * Side A's Redis Functions libraries put on every master of side B, so that FCALL finds them there
 * in read-new, in done and behind a proxy restarted in front of B. FUNCTION DUMP on A, FUNCTION
 * RESTORE ... REPLACE on each B master that lacks a library or holds other code for it; a B master
 * that already has them all is left alone. Libraries only B has are kept (`migrate verify`
 * reports them).
 *
 * A's masters should agree (a client's FUNCTION LOAD reaches them all); when they do not, B gets
 * their union, the first master's code winning for a library they hold differently, and it is
 * logged. The dumps are restored last master first, so the first master's is restored last.
 */
import { log } from '../telemetry/log';
import { LibraryCall, libraryDifferences, libraryNames, readLibraries } from './libraries';

export interface FunctionCopy {
  /** Libraries side A holds (their union over its masters). */
  libraries: number;
  /** B masters that were given them. */
  restoredOn: string[];
}

export async function copyFunctions(call: LibraryCall, from: readonly string[], to: readonly string[]): Promise<FunctionCopy> {
  const sideA = await readLibraries(call, 'A', from);
  const names = libraryNames(sideA);
  const result: FunctionCopy = { libraries: names.size, restoredOn: [] };
  if (names.size === 0) return result;
  const disagreements = libraryDifferences(sideA);
  if (disagreements.length > 0) {
    log.warn({ libraries: disagreements.map((d) => `${d.library}: ${d.detail}`) }, "side A's masters disagree on these function libraries; side B gets their union");
  }
  // The code each library should have on B: the first A master's that holds it.
  const wanted = new Map<string, string>();
  for (const node of sideA) for (const [name, code] of node.libraries) if (!wanted.has(name)) wanted.set(name, code);
  const sideB = await readLibraries(call, 'B', to);
  const lacking = sideB.filter((b) => [...wanted].some(([name, code]) => b.libraries.get(name) !== code));
  if (lacking.length === 0) return result;
  const dumps = await distinctDumps(call, sideA.filter((a) => a.libraries.size > 0).map((a) => a.addr));
  for (const b of lacking) {
    for (const dump of [...dumps].reverse()) await call(b.addr, ['FUNCTION', 'RESTORE', dump, 'REPLACE']);
    result.restoredOn.push(b.addr);
  }
  log.info({ libraries: names.size, nodes: result.restoredOn }, 'function libraries copied to side B');
  return result;
}

/** FUNCTION DUMP of each node, in order, the same payload once. */
async function distinctDumps(call: LibraryCall, nodes: readonly string[]): Promise<Buffer[]> {
  const out: Buffer[] = [];
  for (const addr of nodes) {
    const dump = await call(addr, ['FUNCTION', 'DUMP']);
    if (!Buffer.isBuffer(dump)) throw new Error(`${addr}: unexpected FUNCTION DUMP reply`);
    if (!out.some((d) => d.equals(dump))) out.push(dump);
  }
  return out;
}

