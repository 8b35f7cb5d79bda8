/**
 * Functions and scripts travel with the keys. Side B gets side A's Redis Functions libraries
 * (copy-functions.ts) and every script this proxy knows (copy-scripts.ts):
 * - at start with a `migration:` block, before the proxy listens;
 * - when a SIGHUP adds a migration, before the new placement is swapped in (ring-reload.ts);
 * - at every phase switch (SIGHUP or PROXY MIGRATION PHASE), `done` included, right as it happens,
 *   which also catches libraries loaded straight on A's nodes meanwhile. Until that copy is done,
 *   FCALL, EVALSHA and the FUNCTION/SCRIPT commands that change what B must hold wait for it
 *   (switchCarry(), used by the dispatcher), so none runs on a B still missing a library.
 * What reaches B on that account, these copies and the clients' FUNCTION/SCRIPT commands followed
 * to B (target-mirror.ts), runs one at a time in the order it was queued: a copy that read A's
 * libraries before a client's FUNCTION DELETE cannot put the library back on B after the delete.
 *
 * A copy that cannot finish (a node down) is logged and tried again when a back-end connection
 * comes up (at most every RETRY_GAP_MS, MAX_RETRIES times), and at the next phase switch; `migrate
 * verify` reports a library that still differs.
 */
import { ProxyContext } from '../context';
import { Placement } from '../../sharding/migration';
import { request } from '../backend/request';
import { decodeReply, errorText } from '../resp/decode-reply';
import { log } from '../telemetry/log';
import { LibraryCall } from './libraries';
import { copyFunctions } from './copy-functions';
import { copyScripts } from './copy-scripts';

const QUERY_TIMEOUT_MS = 5000;
const RETRY_GAP_MS = 2000;
/** Bounded: the proxy may be closed meanwhile, and retries would reopen its connections. */
const MAX_RETRIES = 30;

/** One per proxy, registered by carryToTarget (the server's start hook). */
const carriers = new WeakMap<ProxyContext, TargetCarrier>();

export class TargetCarrier {
  private chain: Promise<unknown> = Promise.resolve();
  /** The copy a phase switch started, until it is done. */
  switching: Promise<void> | null = null;
  private failed = false;
  private retries = 0;
  private lastRetry = 0;
  private readonly call: LibraryCall;

  constructor(private readonly ctx: ProxyContext) {
    this.call = async (addr, args) => {
      const frame = await request(ctx.pool.connection(addr, 0), args, QUERY_TIMEOUT_MS);
      const err = errorText(frame);
      if (err !== null) throw new Error(`${addr}: ${err}`);
      return decodeReply(frame, true);
    };
  }

  /** Runs `task` after everything queued before it has reached B (or failed). */
  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.chain.then(task);
    this.chain = result.catch(() => undefined);
    return result;
  }

  /** Copies libraries and scripts to `placement`'s side B; resolves either way (a failure is logged). */
  carry(placement: Placement, why: string): Promise<void> {
    return this.run(async () => {
      const to = placement.to;
      if (to === null) return;
      try {
        await copyFunctions(this.call, placement.from.masters(), to.masters());
        await copyScripts(this.call, this.ctx.scripts.all(), to.masters());
        this.failed = false;
        this.retries = 0;
      } catch (err) {
        this.failed = true;
        log.error({ why, err: (err as Error).message }, 'cannot copy function libraries and scripts to side B yet; tried again when a node connects and at the next phase switch');
      }
    });
  }

  /** A back-end connection came up: a failed copy may go through now. */
  retry(): void {
    const placement = this.ctx.ring?.placement;
    if (!this.failed || placement === undefined || placement.to === null || this.retries >= MAX_RETRIES || Date.now() - this.lastRetry < RETRY_GAP_MS) return;
    this.failed = false;
    this.retries++;
    this.lastRetry = Date.now();
    void this.carry(placement, 'retry');
  }
}

/**
 * The server's start hook: copies to side B now when the proxy starts migrating, and at every
 * phase switch from now on. Resolves once the first copy is done or has failed (logged).
 */
export async function carryToTarget(ctx: ProxyContext): Promise<void> {
  const ring = ctx.ring;
  if (ring === null) return; // no migration, and none can be added without a restart
  const carrier = new TargetCarrier(ctx);
  carriers.set(ctx, carrier);
  let last = ring.placement;
  ring.onSwap((next) => {
    const before = last;
    last = next;
    if (next.to === null || (next.phase === before.phase && next.to === before.to)) return;
    const copy = carrier.carry(next, `phase ${next.phase ?? 'none'}`);
    carrier.switching = copy;
    void copy.then(() => {
      if (carrier.switching === copy) carrier.switching = null;
    });
  });
  ctx.pool.onConnectionReady(() => carrier.retry());
  if (ring.placement.to !== null) await carrier.carry(ring.placement, 'start');
}

/** A SIGHUP adds a migration: side B gets what it must hold before `next` is swapped in. */
export function carryBeforeMigrating(ctx: ProxyContext, next: Placement): Promise<void> {
  return carriers.get(ctx)?.carry(next, 'migration added') ?? Promise.resolve();
}

/** Runs `task` in the carrier's order (target-mirror.ts), or at once for a context without one. */
export function inTargetOrder<T>(ctx: ProxyContext, task: () => Promise<T>): Promise<T> {
  return carriers.get(ctx)?.run(task) ?? task();
}

/** The copy the last phase switch started, while it runs; null otherwise. */
export function switchCarry(ctx: ProxyContext): Promise<void> | null {
  return carriers.get(ctx)?.switching ?? null;
}

/** Commands that need what the copy puts on B: held while a phase switch's copy runs. */
export const WAIT_FOR_SWITCH_CARRY: ReadonlySet<string> = new Set(['fcall', 'fcall_ro', 'evalsha', 'evalsha_ro']);
