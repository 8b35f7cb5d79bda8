/**
 * `slotproxy migrate verify`: every key of ring A whose owner changes is compared with its copy
 * on its owner in ring B (type, value, TTL within a tolerance), and every such key found in B is
 * checked to exist in A (a key deleted in A but still in B was resurrected). Values are compared
 * by DUMP first, and by content when the encodings differ. It may run while clients write: a key
 * that differs is read again a few times (./recheck.ts), and only a lasting difference counts.
 * After `done` side A is closed and B alone is written: what is checked then is ./verify-closed.ts.
 */
import { Placement } from '../../../sharding/migration';
import { ownerOfKey } from '../../../sharding/key-space';
import { NodeClient, scanStep, showKey } from './node-client';
import { bookkeepingOf, isBookkeepingKey } from '../converge';
import { ownersOf } from '../copy-keys';
import { Progress } from './progress';
import { KeyState, SideOfKey, compareStates, readState } from './key-state';
import { DEFAULT_RECHECK, Observation, Verdict, recheck } from './recheck';
import { FenceCount, closedKeyProblem, countFence, sideAClosed } from './verify-closed';
import { WrittenAfter, closedKeyProblemAt, observeAt, recheckAt, writtenAfterClose } from './verify-offsets';

export interface VerifyOptions {
  ttlToleranceMs: number;
  batch: number;
  /** How many differences to describe. */
  show: number;
  progress: boolean;
  /** Reads of a differing key after the first (default 5); 0 reports every difference seen once. */
  recheck?: number;
  /** Pause before a key's first recheck, doubled before each next one (default 50 ms). */
  recheckDelayMs?: number;
}

export interface VerifyResult {
  compared: number;
  differing: number;
  /** Keys that differed at the first read and were read again. */
  rechecked: number;
  /** Rechecked keys that never matched but whose copies kept reaching B: being written, not different. */
  inFlight: number;
  examples: string[];
  /** After `done`: side A is closed; the moving keys of A were checked to have reached B, and B's fence counted. */
  closedSideA?: { fence: FenceCount };
}

/** Keys being rechecked at once; the scan waits for some to finish beyond this. */
const MAX_RECHECKING = 2000;

/** Both sides of a key read at once, each in one script; read again with content when only the encodings may differ. */
async function observe(nodes: NodeClient, a: SideOfKey, b: SideOfKey, key: Buffer, tolerance: number): Promise<Observation> {
  const names = { a: a.addr, b: b.addr };
  const read = (withContent: boolean): Promise<[KeyState, KeyState]> =>
    Promise.all([readState(nodes, a, key, withContent), readState(nodes, b, key, withContent)]);
  let [sa, sb] = await read(false);
  let diff = compareStates(sa, sb, names, tolerance);
  if (diff === 'by content') {
    [sa, sb] = await read(true);
    diff = compareStates(sa, sb, names, tolerance);
  }
  return { a: sa, b: sb, diff: diff === 'by content' ? 'values differ' : diff };
}

export async function verifyMoved(nodes: NodeClient, placement: Placement, opts: VerifyOptions): Promise<VerifyResult> {
  const from = placement.from;
  const to = placement.to;
  if (to === null) throw new Error('the config has no migration: section');
  const policy = { times: opts.recheck ?? DEFAULT_RECHECK.times, firstDelayMs: opts.recheckDelayMs ?? DEFAULT_RECHECK.firstDelayMs };
  const result: VerifyResult = { compared: 0, differing: 0, rechecked: 0, inFlight: 0, examples: [] };
  const seen = new Set<string>();
  const fromOwners = ownersOf(from);
  const toOwners = ownersOf(to);
  const fromBook = bookkeepingOf(from.kind);
  const toBook = bookkeepingOf(to.kind);
  const sizes = await Promise.all([...from.masters(), ...to.masters()].map(async (addr) => Number(await nodes.call(addr, ['DBSIZE']))));
  const progress = opts.progress ? new Progress('verify', sizes.reduce((s, n) => s + n, 0)) : null;
  let scanned = 0;
  const record = (key: Buffer, v: Verdict): void => {
    if (v.kind === 'in-flight') result.inFlight++;
    if (v.kind !== 'differs') return;
    result.differing++;
    if (result.examples.length < opts.show) result.examples.push(`${showKey(key)}: ${v.why}`);
  };
  // Rechecks run beside the scan (each takes up to a second or two of pauses); a failed read fails the run.
  const rechecking = new Set<Promise<void>>();
  const failures: unknown[] = [];
  const inBackground = (task: Promise<void>): void => {
    const p: Promise<void> = task.catch((err: unknown) => void failures.push(err)).then(() => void rechecking.delete(p));
    rechecking.add(p);
  };
  const closed = await sideAClosed(nodes, placement.phase, to);
  // The replication carry keeps no versions: its keys are judged by A's and B's stream offsets (verify-offsets.ts).
  const byOffsets = (await nodes.carry(placement)) === 'replication';
  const written = byOffsets && closed ? await writtenAfterClose(nodes, placement) : new Map<string, WrittenAfter>();
  for (const w of written.values()) {
    if (!('unknown' in w)) continue;
    result.differing++;
    if (result.examples.length < opts.show) result.examples.push(w.unknown);
  }
  const check = async (key: Buffer): Promise<void> => {
    const id = key.toString('hex');
    if (seen.has(id)) return;
    seen.add(id);
    result.compared++;
    const a: SideOfKey = { addr: ownerOfKey(from, key) ?? '', owners: fromOwners, book: fromBook, source: true };
    const b: SideOfKey = { addr: ownerOfKey(to, key) ?? '', owners: toOwners, book: toBook, source: false };
    if (closed && byOffsets) {
      const why = closedKeyProblemAt(key, a.addr, written.get(a.addr));
      if (why !== null) record(key, { kind: 'differs', why });
      return;
    }
    if (byOffsets) {
      const sides = { key, a: { addr: a.addr, owners: fromOwners }, b: { addr: b.addr, owners: toOwners } };
      const again = (): ReturnType<typeof observeAt> => observeAt(nodes, sides, opts.ttlToleranceMs);
      const first = await again();
      if (first.diff === null) return;
      if (policy.times > 0) result.rechecked++;
      inBackground(recheckAt(again, first, policy).then((v) => record(key, v)));
      return;
    }
    if (closed) {
      // A no longer changes: one read of each side, no rechecks.
      const [sa, sb] = await Promise.all([readState(nodes, a, key, false), readState(nodes, b, key, false)]);
      const why = closedKeyProblem(sa, sb, { a: a.addr, b: b.addr });
      if (why !== null) record(key, { kind: 'differs', why });
      return;
    }
    const again = (): Promise<Observation> => observe(nodes, a, b, key, opts.ttlToleranceMs);
    const first = await again();
    if (first.diff === null) return;
    if (policy.times > 0) result.rechecked++;
    inBackground(recheck(again, first, policy).then((v) => record(key, v)));
  };
  // Keys of A that move, then keys of B that arrived: together they catch lost and resurrected keys.
  // After done, B's keys are the clients' (new keys, deletions): A's alone are checked.
  const both: { addrs: readonly string[]; owns: (k: Buffer, addr: string) => boolean }[] = [
    { addrs: from.masters(), owns: (k, addr) => ownerOfKey(from, k) === addr && ownerOfKey(to, k) !== addr },
    { addrs: to.masters(), owns: (k, addr) => ownerOfKey(to, k) === addr && ownerOfKey(from, k) !== addr },
  ];
  const passes = closed ? both.slice(0, 1) : both;
  for (const pass of passes) {
    for (const addr of pass.addrs) {
      let cursor = '0';
      do {
        const step = await scanStep(nodes, addr, cursor, opts.batch);
        const keys = step.keys.filter((k) => !isBookkeepingKey(k) && pass.owns(k, addr));
        await Promise.all(keys.map((k) => check(k)));
        while (rechecking.size > MAX_RECHECKING) await Promise.race(rechecking);
        if (failures.length > 0) throw failures[0];
        scanned += step.keys.length;
        progress?.update(scanned, `${result.differing} differ`);
        cursor = step.cursor;
      } while (cursor !== '0');
    }
  }
  await Promise.all(rechecking);
  if (failures.length > 0) throw failures[0];
  if (closed) {
    const fence = await countFence(nodes, to);
    result.closedSideA = { fence };
    // A node or slot of B without the fence would take a late copy from a proxy still double-writing.
    if (fence.fenced < fence.of) {
      result.differing++;
      if (result.examples.length < opts.show) result.examples.push(`side B's fence: on ${fence.fenced} of ${fence.of} ${fence.unit} only`);
    }
  }
  progress?.finish();
  return result;
}
