/**
 * A batch of side A's stream applied on a master of side B counts as applied only once a replica of
 * that master holds it too. Until then it is not acknowledged to A (`REPLCONF ACK`), no client's
 * reply waits on it as done, and the offset does not move: so when B's master fails and its replica
 * takes over, nothing the follow called applied is missing there. A batch the old master answered
 * and no replica confirmed goes back to follow.ts, which carries its keys' states from A to the new
 * owner (Redis Cluster's and Sentinel's failovers promote the replica with the most data; `WAIT 1`
 * is what either needs).
 *
 * The check is `HSET <record> <source> <value>` then `WAIT 1 <ms>`, pipelined: WAIT counts from the
 * client's last write, and the HSET (the value the batch's script wrote already) lands after the
 * batch in the node's stream on whatever connection, so a reconnect between the two cannot make
 * WAIT count from nothing. A master without replicas (ROLE, read again each second and after every
 * WAIT that timed out; followers, which announce port 0, left out) confirms at once; a replica that
 * stops acknowledging holds the follow of that node until it acknowledges, or its master drops it
 * (`repl-timeout`) and ROLE lists none.
 * A node that refuses ROLE or WAIT (a back-end user without them, a renamed command) cannot be
 * checked: said once in the log, and its batches count as applied when it answers them, as before.
 */
import { ProxyContext } from '../context';
import { sideRequest } from './side-request';
import { decodeReply } from '../resp/decode-reply';
import { log } from '../telemetry/log';

const LANE = 0;
/** How long one WAIT holds before the master's replicas are read again. */
const WAIT_MS = 1000;
const ROLE_MAX_AGE_MS = 1000;
const RETRY_MS = 100;
const RETRY_CAP_MS = 2000;
/** The node will not run the check at all (not a transient state). */
const REFUSED = /^(NOPERM|ERR unknown command)/;
/** The record's slot left the node (a reshard of B): the record key is worked out again. */
const NOT_SERVED = /^(MOVED|ASK) /;

export type Confirmation = 'confirmed' | 'replaced' | 'ended';

export class ReplicaConfirm {
  private replicas = -1;
  private readAt = 0;
  /** Why the last check did not confirm (null: it did), for one log line per episode. */
  private waiting: string | null = null;
  /** The node refused the check itself (NOPERM, an unknown command): not checked again. */
  private unchecked = false;

  constructor(
    private readonly ctx: ProxyContext,
    private readonly address: string,
  ) {}

  /**
   * Resolves 'confirmed' once a replica holds the node's writes so far (at once without replicas),
   * 'replaced' once `stillMaster()` says the node no longer serves as a master of B, 'ended' when
   * `live()` turns false. The record `key()`/`field`/`value` is the batch's own; `moved()` says the
   * node no longer serves the record's key (a reshard of B), so `key()` is worked out again.
   */
  async confirm(key: () => string, field: string, value: string, live: () => boolean, stillMaster: () => boolean, moved: () => void): Promise<Confirmation> {
    for (let attempt = 0; ; attempt++) {
      if (!live()) return 'ended';
      if (this.unchecked) return 'confirmed';
      let why: string;
      try {
        if ((await this.replicaCount()) === 0) return this.settled();
        const [set, wait] = await Promise.all([
          sideRequest(this.ctx.pool, null, this.address, ['HSET', key(), field, value], { lane: LANE }),
          sideRequest(this.ctx.pool, null, this.address, ['WAIT', '1', String(WAIT_MS)], { lane: LANE }),
        ]);
        const acked = decodeReply(wait);
        if (set[0] !== 45 && typeof acked === 'number' && acked >= 1) return this.settled();
        why = set[0] === 45 ? set.toString('utf8', 1, set.length - 2) : acked instanceof Error ? acked.message : `no replica acknowledged within ${WAIT_MS} ms`;
        if (NOT_SERVED.test(why)) moved();
        this.readAt = 0; // its replicas are read again: one may be gone
      } catch (err) {
        why = err instanceof Error ? err.message : String(err);
      }
      if (REFUSED.test(why)) return this.refused(why);
      if (this.waiting === null) log.warn({ node: this.address, reason: why }, 'migration: the follow waits for a replica of a node of side B to hold what it applied there');
      this.waiting = why;
      if (!stillMaster()) return 'replaced';
      if (why.startsWith('no replica')) continue; // WAIT itself waited
      await new Promise((resolve) => setTimeout(resolve, Math.min(RETRY_CAP_MS, RETRY_MS * 2 ** attempt)).unref());
    }
  }

  private refused(why: string): 'confirmed' {
    log.warn({ node: this.address, reason: why }, 'migration: a node of side B refuses ROLE or WAIT: the follow cannot check that its replicas hold what it applied there (a failover of that node may lose it); grant +role +wait to the back-end user');
    this.unchecked = true;
    return 'confirmed';
  }

  private settled(): 'confirmed' {
    if (this.waiting !== null) log.info({ node: this.address }, 'migration: a replica of a node of side B holds what the follow applied there again');
    this.waiting = null;
    return 'confirmed';
  }

  /** The replicas ROLE lists on the node, followers left out (read at most once a second). */
  private async replicaCount(): Promise<number> {
    if (this.replicas >= 0 && Date.now() - this.readAt < ROLE_MAX_AGE_MS) return this.replicas;
    const role = decodeReply(await sideRequest(this.ctx.pool, null, this.address, ['ROLE'], { lane: LANE }));
    if (role instanceof Error) throw role;
    if (!Array.isArray(role) || String(role[0]) !== 'master') throw new Error(`ROLE answered ${String(Array.isArray(role) ? role[0] : role)}, not master`);
    // A follower of the node (this proxy's own where it is on both sides, a ring grow) announces port 0:
    // it acknowledges what it applied, so waiting on it would wait on itself; it is no replica to promote.
    this.replicas = Array.isArray(role[2]) ? role[2].filter((r) => Array.isArray(r) && String(r[1]) !== '0').length : 0;
    this.readAt = Date.now();
    return this.replicas;
  }
}
