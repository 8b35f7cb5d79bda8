/**
 * EXEC of a transaction that writes keys moving in a ring migration (double-write, read-new). The
 * transaction runs on ring A's node of its keys, as every write does, and the keys it writes are
 * snapshotted inside the same MULTI, after its own commands:
 *
 *   on A, one burst:   MULTI, <queued commands>, SNAPSHOT key..., EXEC
 *   then on B:         APPLY key snapshot (each key's owner in ring B)
 *   then the client gets EXEC's reply without the snapshots' elements.
 *
 * Inside MULTI the snapshots hold the state right after the transaction, so this converges as a
 * single write does (proxy/migration/converge.ts), WATCH included: a nil EXEC ran nothing, and
 * nothing is copied. When ring B was fenced (`done`) before any of it arrived, ring A no longer
 * counts: an unwatched transaction runs once on B, now the only ring, and that EXEC reply is the
 * client's; a WATCHed one answers nil, as when a watched key was touched (its WATCH guarded A,
 * while B may have taken other writes since: running it there could overwrite them), so the
 * client retries it on B. When only part of it arrived, the client is told so.
 */
import { BackendConnection } from '../backend/connection';
import { ProxyContext } from '../context';
import { parseSnapshot, snapshotCommand, Snapshot, ApplyOutcome } from './converge';
import { CopyTarget, applySnapshots, copyTargets, missedByFence, snapshotThenApply } from './copy-keys';
import { arrayElements } from '../resp/reply-framer';
import { requestRaw } from '../backend/request';
import * as encode from '../resp/encode';
import * as errors from '../resp/errors';

const EXEC = encode.command(['EXEC']);

export interface ExecBurst {
  /** The connection of the transaction (its WATCH connection, or the client's lane) on ring A. */
  conn: BackendConnection;
  address: string;
  /** Sends the transaction's SCRIPT LOADs, MULTI and queued commands on a connection, EXEC excluded. */
  sendQueued: (conn: BackendConnection) => void;
  queuedCount: number;
  /** The transaction ran under WATCH (its guard held on ring A only). */
  watched: boolean;
  /** Sees the queue-time reply of each snapshot too (a cluster A's redirection aborts the whole burst). */
  onQueued?: (frame: Buffer) => void;
  /** A script is queued: it may write keys it does not declare. */
  undeclared?: boolean;
}

/** The moving keys among those a transaction writes; empty outside a converging migration. */
export function execTargets(ctx: ProxyContext, written: readonly Buffer[]): CopyTarget[] {
  // Under the replication carry A's stream carries the transaction's effects: nothing is copied with it.
  if (ctx.ring?.carry.replication === true) return [];
  return copyTargets(ctx.ring?.placement, written);
}

export function convergeExec(
  ctx: ProxyContext,
  client: { id: number; protocol: 2 | 3 },
  burst: ExecBurst,
  targets: readonly CopyTarget[],
  finish: (frame: Buffer) => void,
): void {
  burst.sendQueued(burst.conn);
  const onQueued = burst.onQueued ?? ((): void => undefined);
  for (const t of targets) burst.conn.send({ payload: encode.command(snapshotCommand(t.key, false, t.fromBook)), onReply: onQueued, onFailure: () => undefined });
  burst.conn.send({
    payload: EXEC,
    onReply: (frame) => void settleExec(ctx, client, burst, targets, frame).then(finish),
    onFailure: (message, written) => {
      if (!written) return finish(encode.error(message));
      // It may have run on A: bring B up to date all the same, then pass the failure on.
      void snapshotThenApply(ctx, client.id, targets)
        .catch(() => undefined)
        .then(() => finish(encode.error(message)));
    },
  });
}

async function settleExec(ctx: ProxyContext, client: { id: number; protocol: 2 | 3 }, burst: ExecBurst, targets: readonly CopyTarget[], frame: Buffer): Promise<Buffer> {
  const n = burst.queuedCount;
  const elements = arrayElements(frame);
  // nil (a WATCHed key was touched) or EXECABORT: nothing ran, nothing to copy.
  if (elements === null || elements.length !== n + targets.length) return frame;
  const reply = Buffer.concat([Buffer.from(`*${n}\r\n`), ...elements.slice(0, n)]);
  let snapshots: Snapshot[];
  let outcomes: ApplyOutcome[];
  try {
    snapshots = elements.slice(n).map(parseSnapshot);
    // A script inside: its undeclared keys reach B first (as in converging-write.ts).
    if (burst.undeclared === true) {
      const problem = await (ctx.changes?.after(burst.address) ?? null);
      if (problem !== null) throw new Error(problem);
    }
    outcomes = await applySnapshots(ctx, client.id, targets, snapshots);
  } catch (err) {
    ctx.stats.backendErrors++;
    return encode.error(errors.migrationCopyFailed(burst.address, err instanceof Error ? err.message : String(err)));
  }
  const missed = missedByFence(outcomes, snapshots);
  if (missed === 'none') return reply;
  if (missed === 'some') return encode.error(errors.migrationSwitchedMidWrite(targets[0].to));
  if (burst.watched) return client.protocol === 3 ? encode.RESP3_NULL : encode.NULL_ARRAY;
  try {
    const b = ctx.pool.connection(targets[0].to, client.id, client.protocol);
    burst.sendQueued(b);
    return await requestRaw(b, EXEC);
  } catch (err) {
    return encode.error(err instanceof Error ? err.message : String(err));
  }
}
