/**
 * Pub/Sub through the proxy. A client that subscribes gets connections of its own (PubSubLink):
 *
 * - a home link for SUBSCRIBE/PSUBSCRIBE, to the Pub/Sub home: one node every slotproxy picks alike
 *   from the topology (the master serving slot 0; in ring mode the first node of the ring). PUBLISH
 *   goes there too, so its reply counts every subscriber of every slotproxy once, as one Redis would
 *   (a node counts only its own subscribers; the cluster bus carries the message, not the count);
 * - event links, one to every other master, for the subscriptions that may receive keyspace
 *   notifications (keyspace-channels.ts): a node publishes those to its own subscribers only. An
 *   event link passes on keyspace notifications only; the rest (PUBLISHed messages, which the bus
 *   brings to every node) comes from the home link alone, so each arrives once. Until every master
 *   has confirmed such a subscription, the client's replies wait (a barrier in its reply order), so
 *   that a confirmed subscription hears every node, as on one server;
 * - one link per node for SSUBSCRIBE, to the node serving the channel's slot (SPUBLISH only reaches
 *   that shard), channels of one SSUBSCRIBE in one slot or CROSSSLOT, as Redis Cluster answers.
 *
 * Messages are forwarded as the node's raw bytes. Confirmations ((p|s)(un)subscribe) are the ones a
 * single server would send, made when the client asks: the count of what it has in request order
 * (`wanted`), in its protocol of that moment. Each link keeps a FIFO of the frames still owed, per
 * command, so frames are paired with what asked for them, and the proxy's own (re-)subscriptions
 * are answered silently. PING and the errors of subscribed mode are answered by the proxy, in their
 * place in the client's order.
 *
 * A subscriber follows the topology (PlacementWatch): when the home moves (failover, reshard of slot
 * 0, a ring phase switch) its home link moves and its subscriptions are sent again; a new master gets
 * an event link, a node that is no longer a master loses it. A lost link is reopened the same way,
 * after a topology refresh. A node that gives a shard channel's slot away (failover, reshard)
 * unsubscribes its clients from it; the proxy subscribes again at the new owner instead of passing
 * that on.
 *
 * Subscribed mode ends, as on Redis, when the client has no subscription left in request order (its
 * last UNSUBSCRIBE, or RESET): the session leaves it at once, so the commands it sent next run as on
 * Redis, and the links stay until they have answered what was asked before (then close). The client
 * is told of no message after that point.
 */
import { ProxyContext } from '../context';
import { CommandInfo } from '../commands/table';
import { ForwardedCommand } from './forward';
import { FanoutCommand } from './fanout';
import * as encode from '../resp/encode';
import { SubscriberClient, Subscription } from '../pubsub/subscription';
import { answerLocally } from './local';
import { HOME_SLOT, pubsubHome } from '../pubsub/pubsub-placement';

/** What the home alone knows (every classic subscriber of every slotproxy is there), as PUBLISH's count. */
const HOME_QUERIES: ReadonlySet<string> = new Set(['pubsub|channels', 'pubsub|numsub', 'pubsub|numpat']);

const onlyReply = (frames: Buffer[]): Buffer => frames[0];

/** A command other than the Pub/Sub ones, or the arguments to start subscribing with. */
export function pubsubCommand(ctx: ProxyContext, session: SubscriberClient, info: CommandInfo, args: Buffer[], raw: Buffer | null): void {
  if (info.name === 'publish' || HOME_QUERIES.has(info.name)) {
    const payload = raw ?? encode.command(args);
    // The home holds every subscriber that came through a slotproxy, so its count is the one a
    // single Redis would give. In a cluster, routing by slot 0 follows a failover of the home
    // (retried like any command); a ring has no bus, and its home is the only node subscribed.
    if (ctx.topology !== null) session.track(new ForwardedCommand(ctx, session, payload, HOME_SLOT, false)).start();
    else {
      const home = pubsubHome(ctx);
      session.track(new FanoutCommand(session, home === null ? [] : [home], onlyReply)).start(ctx, payload);
    }
    return;
  }
  if (info.name === 'spublish') {
    // The channel's slot decides the node (its key spec marks it "not a key", so route it here).
    const shard = ctx.router.shardOf(args[1]);
    session.track(new ForwardedCommand(ctx, session, raw ?? encode.command(args), shard, false)).start();
    return;
  }
  const sub = session.subscription ?? new Subscription(ctx, session, (name, args) => answerLocally(ctx, session, name, args));
  session.subscription = sub;
  sub.command(info, args);
}
