/**
 * The CONFIG SET parameters that are the proxy's business, not the nodes': `requirepass` is the
 * proxy's own password (the default user's, security/auth.ts) and never reaches a node, and the
 * parameters that would cut the proxy off its nodes, or change where and how it reaches them, are
 * refused whole, nothing changed anywhere. Everything else goes to every node (every-node.ts).
 */
import * as errors from '../resp/errors';

const REQUIREPASS = 'requirepass';

const REACH = 'it changes where or how the proxy reaches the nodes (its `backend` settings and the cluster map name their addresses, ports and TLS); change it on the nodes themselves, and the proxy\'s config with it';
const ANNOUNCED = 'it changes the addresses the nodes announce for each other, which the proxy connects to; change it on the nodes themselves';

/** Why each parameter is refused (names as Redis 7.0 has them, aliases included). */
const REFUSED: ReadonlyMap<string, string> = new Map([
  ['masterauth', "it is how the nodes' replicas sign in to their masters; set it on the nodes themselves"],
  ['masteruser', "it is how the nodes' replicas sign in to their masters; set it on the nodes themselves"],
  ['port', REACH],
  ['bind', REACH],
  ['bind-source-addr', REACH],
  ['unixsocket', REACH],
  ['unixsocketperm', REACH],
  ['protected-mode', 'the nodes would refuse the proxy\'s connections from another host; set it on the nodes themselves'],
  ['aclfile', "the nodes' users, the proxy's back-end user among them, come from it; change it on the nodes themselves"],
  ['maxclients', "the nodes would refuse the proxy's new connections past it; the proxy's own limit is limits.maxClients in its config"],
  ['cluster-announce-ip', ANNOUNCED],
  ['cluster-announce-port', ANNOUNCED],
  ['cluster-announce-tls-port', ANNOUNCED],
  ['cluster-announce-bus-port', ANNOUNCED],
  ['cluster-announce-hostname', ANNOUNCED],
  ['cluster-preferred-endpoint-type', ANNOUNCED],
  ['replica-announce-ip', ANNOUNCED],
  ['replica-announce-port', ANNOUNCED],
  ['slave-announce-ip', ANNOUNCED],
  ['slave-announce-port', ANNOUNCED],
]);

/** What the proxy makes of a CONFIG SET before any node sees it. */
export type ConfigSetPlan =
  /** Refused whole: nothing is changed anywhere. */
  | { readonly kind: 'refuse'; readonly message: string }
  /**
   * `requirepass` is the proxy's (null: not named); `forward` is the request for the nodes without
   * it (null: nothing left for them). The password applies once the nodes took the rest.
   */
  | { readonly kind: 'plan'; readonly requirepass: string | null; readonly forward: Buffer[] | null };

/** `args` is the whole request (CONFIG SET p v ...). An odd count is the nodes' own syntax error. */
export function planConfigSet(args: readonly Buffer[]): ConfigSetPlan {
  if (args.length % 2 !== 0) return { kind: 'plan', requirepass: null, forward: [...args] };
  let requirepass: string | null = null;
  const forward: Buffer[] = [args[0], args[1]];
  for (let i = 2; i + 1 < args.length; i += 2) {
    const name = args[i].toString('latin1').toLowerCase();
    const why = REFUSED.get(name) ?? (name.startsWith('tls-') ? REACH : undefined);
    if (why !== undefined) return { kind: 'refuse', message: errors.configSetRefused(name, why) };
    if (name !== REQUIREPASS) {
      forward.push(args[i], args[i + 1]);
    } else if (requirepass !== null) {
      // Redis's own check, which the nodes can no longer make: they never see it.
      return { kind: 'refuse', message: errors.configSetFailed(args[i].toString(), 'duplicate parameter') };
    } else {
      requirepass = args[i + 1].toString('utf8');
    }
  }
  return { kind: 'plan', requirepass, forward: forward.length > 2 ? forward : null };
}

/**
 * Inside MULTI (queued, then sent to every node at EXEC): why CONFIG SET is refused when queued, or
 * null. requirepass is the proxy's, which EXEC's nodes cannot apply all or nothing with the rest.
 */
export function configSetInMultiRefusal(args: readonly Buffer[]): string | null {
  const plan = planConfigSet(args);
  if (plan.kind === 'refuse') return plan.message;
  return plan.requirepass === null ? null : errors.configSetRefused(REQUIREPASS, "inside a transaction: it is the proxy's own password, set it outside MULTI");
}

/** CONFIG GET answers the proxy's `requirepass` in place of a node's. */
export const REQUIREPASS_PARAM = REQUIREPASS;
