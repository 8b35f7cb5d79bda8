/**
 * Where classic Pub/Sub lives: the home node every slotproxy picks alike from the topology, and the
 * watch that tells each subscription when the home or the set of masters changes, so it follows
 * (dispatch/pubsub.ts says why one home makes PUBLISH counts right).
 */
import { ProxyContext } from '../context';

/** How often subscribers look at the topology besides its change events (ring phase switches have none). */
const PLACEMENT_CHECK_MS = 1000;
/** The slot whose master is the Pub/Sub home in cluster mode. */
export const HOME_SLOT = 0;

/**
 * The node every slotproxy puts SUBSCRIBE/PSUBSCRIBE and PUBLISH on, the same for all of them as
 * long as they see the same topology: the master serving slot 0, or the first node of the ring.
 */
export function pubsubHome(ctx: ProxyContext): string | null {
  return ctx.topology !== null ? ctx.router.nodeOf(HOME_SLOT) : (ctx.router.masters()[0] ?? null);
}

/** What follows the placement: a client's Subscription. */
export interface PlacementFollower {
  follow(): void;
}

/**
 * Every subscription of one proxy, told when the Pub/Sub home or the set of masters changes: on the
 * cluster topology's change events, and by a timer for what has none (ring placement switches).
 */
export class PlacementWatch {
  private readonly subscriptions = new Set<PlacementFollower>();
  private timer: NodeJS.Timeout | null = null;
  private seen = '';

  constructor(private readonly ctx: ProxyContext) {
    ctx.topology?.onChange(() => this.check());
  }

  add(sub: PlacementFollower): void {
    this.subscriptions.add(sub);
    if (this.timer === null) {
      this.seen = this.view();
      this.timer = setInterval(() => this.check(), PLACEMENT_CHECK_MS);
      this.timer.unref();
    }
  }

  delete(sub: PlacementFollower): void {
    this.subscriptions.delete(sub);
    if (this.subscriptions.size === 0 && this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  private view(): string {
    return `${pubsubHome(this.ctx) ?? ''} ${this.ctx.router.masters().join(',')}`;
  }

  private check(): void {
    const now = this.view();
    if (now === this.seen) return;
    this.seen = now;
    for (const sub of [...this.subscriptions]) sub.follow();
  }
}

const watches = new WeakMap<ProxyContext, PlacementWatch>();

export function placementWatch(ctx: ProxyContext): PlacementWatch {
  let watch = watches.get(ctx);
  if (watch === undefined) {
    watch = new PlacementWatch(ctx);
    watches.set(ctx, watch);
  }
  return watch;
}
