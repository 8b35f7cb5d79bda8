/**
 * How each command that is not simply "route by its keys" is handled. This is the one place where
 * the proxy's command knowledge lives; tests iterate over it.
 *
 * - local:      answered by the proxy itself (the honest answer needs no node)
 * - fanout:     sent to every master, replies merged (dispatch/fanout.ts)
 * - any-master: keyless and node-independent, so any master gives the right answer
 *   (commands whose key specs find no key in a request, e.g. EVAL with numkeys 0, also go to any master)
 * - client:     a CLIENT subcommand about the client's own connection, answered by the proxy
 *   (dispatch/client-command.ts)
 * - every-node: sent to every node, masters and replicas (every ring node in ring mode), all or
 *   nothing where Redis allows it (dispatch/every-node.ts): CONFIG SET, RESETSTAT, REWRITE
 * - every-master: sent to every master, OK when every one did it, else an error naming the nodes
 *   that refused (dispatch/every-node.ts): SAVE, BGSAVE, BGREWRITEAOF
 * - slot:       sent to the master serving the hash slot its third argument names (CLUSTER
 *   COUNTKEYSINSLOT/GETKEYSINSLOT); to any master when that is not a slot, for Redis's own error
 * - refuse:     cannot be given a correct meaning through a proxy (yet); answered with a clear error
 * - transaction, pubsub, wait: need a back-end connection of the client's own (transaction.ts,
 *   pubsub.ts, blocking.ts); blocking commands go there too, found by their `blocking` flag
 * - monitor:    MONITOR: the client sees every command the proxy's clients send (dispatch/monitor.ts)
 *
 * POLICY is cluster mode's; RING_POLICY, ring mode's, differs where standalone nodes would answer
 * otherwise than one Redis Cluster node (databases, no slots).
 *
 * Names are lower case; a subcommand is `container|sub`. A container listed by itself covers every
 * subcommand not listed that has no key: a subcommand whose entry in the back end's COMMAND has key
 * specs (MEMORY USAGE, OBJECT ENCODING, XINFO STREAM ...) is routed by its key (strategyFor).
 */
export type Strategy =
  | { readonly kind: 'local' }
  | { readonly kind: 'client' }
  | { readonly kind: 'fanout' }
  | { readonly kind: 'any-master' }
  | { readonly kind: 'every-node' }
  | { readonly kind: 'every-master' }
  | { readonly kind: 'slot' }
  | { readonly kind: 'refuse'; readonly why: string }
  | { readonly kind: 'transaction' }
  | { readonly kind: 'pubsub' }
  | { readonly kind: 'wait' }
  | { readonly kind: 'monitor' };

const local: Strategy = { kind: 'local' };
const client: Strategy = { kind: 'client' };
const fanout: Strategy = { kind: 'fanout' };
const anyMaster: Strategy = { kind: 'any-master' };
const everyNode: Strategy = { kind: 'every-node' };
const everyMaster: Strategy = { kind: 'every-master' };
const slot: Strategy = { kind: 'slot' };
const refuse = (why: string): Strategy => ({ kind: 'refuse', why });
/** MULTI/EXEC/DISCARD/WATCH/UNWATCH: transaction.ts. */
const transaction: Strategy = { kind: 'transaction' };
/** (P|S)(UN)SUBSCRIBE and SPUBLISH: pubsub.ts. */
const pubsub: Strategy = { kind: 'pubsub' };

const NODE_ADMIN = 'it administers one node; run it on the node itself';

export const POLICY: ReadonlyMap<string, Strategy> = new Map<string, Strategy>([
  ['ping', local],
  ['echo', local],
  ['quit', local],
  ['select', local],
  ['hello', local],
  ['auth', local],
  ['reset', local],
  ['readonly', local],
  ['readwrite', local],
  ['asking', local],
  ['client|setname', client],
  ['client|getname', client],
  ['client|id', client],
  ['client|setinfo', client],
  ['client|info', client],
  ['client|list', client],
  ['client|kill', client],
  ['client|reply', client],
  ['client|no-evict', client],
  ['client|tracking', client],
  ['client|caching', client],
  ['client|getredir', client],
  ['client|trackinginfo', client],
  ['client|unblock', client],
  ['client|capa', client],
  ['client|pause', fanout],
  ['client|unpause', fanout],
  ['client|help', anyMaster],
  ['client', refuse("slotproxy answers CLIENT about the client's connection to the proxy; this subcommand is not one of those")],
  ['cluster|keyslot', local],
  ['cluster|countkeysinslot', slot],
  ['cluster|getkeysinslot', slot],
  ['cluster', refuse('slotproxy presents the cluster as one server; only CLUSTER KEYSLOT, COUNTKEYSINSLOT and GETKEYSINSLOT are answered')],

  ['dbsize', fanout],
  ['keys', fanout],
  ['scan', fanout],
  ['flushall', fanout],
  ['flushdb', fanout],
  ['info', fanout],
  ['randomkey', fanout],
  ['script|load', fanout],
  ['script|exists', fanout],
  ['script|flush', fanout],
  ['script|kill', fanout],
  ['function|load', fanout],
  ['function|delete', fanout],
  ['function|flush', fanout],
  ['function|restore', fanout],
  ['function|kill', fanout],
  ['function|list', anyMaster],
  ['function|dump', anyMaster],
  ['function|stats', fanout],
  ['function|help', anyMaster],
  ['config|get', anyMaster],
  ['config|help', anyMaster],
  ['config|set', everyNode],
  ['config|resetstat', everyNode],
  ['config|rewrite', everyNode],
  ['memory|purge', fanout],
  ['memory|help', anyMaster],
  ['object|help', anyMaster],
  ['xinfo|help', anyMaster],
  ['xgroup|help', anyMaster],
  ['script|help', anyMaster],
  // Valkey 8's SCRIPT SHOW sha1: a script loaded through the proxy is on every master.
  ['script|show', anyMaster],
  ['pfselftest', anyMaster],
  ['script', refuse('only SCRIPT LOAD, EXISTS, FLUSH, KILL and SHOW are supported')],

  ['command', anyMaster],
  ['time', anyMaster],
  ['lolwut', anyMaster],
  ['publish', pubsub],
  ['pubsub|channels', pubsub],
  ['pubsub|numsub', pubsub],
  ['pubsub|numpat', pubsub],
  ['pubsub', anyMaster],

  ['multi', transaction],
  ['exec', transaction],
  ['discard', transaction],
  ['watch', transaction],
  ['unwatch', transaction],
  ['subscribe', pubsub],
  ['psubscribe', pubsub],
  ['ssubscribe', pubsub],
  ['unsubscribe', pubsub],
  ['punsubscribe', pubsub],
  ['sunsubscribe', pubsub],
  ['spublish', pubsub],
  ['monitor', { kind: 'monitor' }],
  ['sync', refuse(NODE_ADMIN)],
  ['psync', refuse(NODE_ADMIN)],
  ['replicaof', refuse(NODE_ADMIN)],
  ['slaveof', refuse(NODE_ADMIN)],
  ['shutdown', refuse(NODE_ADMIN)],
  ['failover', refuse(NODE_ADMIN)],
  ['debug', refuse(NODE_ADMIN)],
  ['config', refuse('only CONFIG GET, SET, RESETSTAT, REWRITE and HELP are supported')],
  ['acl|whoami', local],
  // The proxy's own users (dispatch/acl-command.ts).
  ['acl|setuser', local],
  ['acl|getuser', local],
  ['acl|deluser', local],
  ['acl|list', local],
  ['acl|users', local],
  ['acl|dryrun', local],
  ['acl|log', local],
  ['acl|cat', anyMaster],
  ['acl|help', anyMaster],
  ['acl|genpass', anyMaster],
  ['acl', refuse("the proxy's users come from its config file (auth.users), which a SIGHUP reloads; ACL SETUSER and DELUSER change them until then")],
  // A cluster node answers `ERR SWAPDB is not allowed in cluster mode` itself; MOVE, which has a
  // key, is routed by it and answered the same way (inside MULTI too).
  ['swapdb', anyMaster],
  ['function', refuse('only FUNCTION LOAD, DELETE, FLUSH, RESTORE, KILL, LIST, DUMP and STATS are supported')],
  ['wait', { kind: 'wait' }],
  ['waitaof', { kind: 'wait' }],

  // The server's reports about itself, merged from every master's (dispatch/server-merges.ts).
  ['slowlog|get', fanout],
  ['slowlog|len', fanout],
  ['slowlog|reset', fanout],
  ['slowlog|help', anyMaster],
  ['latency|latest', fanout],
  ['latency|history', fanout],
  ['latency|reset', fanout],
  ['latency|doctor', fanout],
  ['latency|help', anyMaster],
  ['latency', refuse("LATENCY GRAPH and HISTOGRAM draw one node's samples; run them on the node itself")],
  ['memory|stats', fanout],
  ['memory|doctor', fanout],
  ['memory', refuse("MEMORY MALLOC-STATS is one process's allocator report; run it on the node itself")],
  ['lastsave', fanout],
  ['save', everyMaster],
  ['bgsave', everyMaster],
  ['bgrewriteaof', everyMaster],
  // One server: a master with no replica the client could reach.
  ['role', local],
  ['module|list', fanout],
  ['module|help', anyMaster],
  ['module', refuse('modules are loaded into each node process; load or unload them on every node')],
]);

const noSlots = refuse('in ring mode keys are placed on a hash ring, not in hash slots; no node keeps them by slot');

/**
 * Ring mode: standalone nodes have databases and no hash slots. MOVE and SWAPDB get a Redis Cluster
 * node's answer from the proxy (as SELECT does), never a node's; keys are not kept by slot.
 */
export const RING_POLICY: ReadonlyMap<string, Strategy> = new Map<string, Strategy>([
  ...POLICY,
  ['move', local],
  ['swapdb', local],
  ['cluster|countkeysinslot', noSlots],
  ['cluster|getkeysinslot', noSlots],
]);

/**
 * Administrative commands: they change every node's settings, pause every node, or drop data,
 * scripts or functions everywhere. Users' permissions (security/permissions.ts) count them in
 * `@admin` and `@dangerous` on top of their Redis categories (Redis 7.0 files FLUSHALL under
 * `@dangerous` only, SCRIPT FLUSH and FUNCTION FLUSH/DELETE/RESTORE under neither). The proxy's
 * PROXY command is one too (PROXY_COMMAND there).
 */
export const ADMIN_COMMANDS: ReadonlySet<string> = new Set([
  'config|get',
  'config|set',
  'config|resetstat',
  'config|rewrite',
  'flushall',
  'flushdb',
  'script|flush',
  'function|flush',
  'function|delete',
  'function|restore',
  'client|pause',
  'client|unpause',
]);

/**
 * POLICY entries for commands newer back ends have and the fallback (Redis 7.0) table lacks:
 * Redis 7.2's WAITAOF, Valkey 8's CLIENT CAPA and SCRIPT SHOW. They apply once the back end's own
 * COMMAND table is loaded.
 */
export const NEWER_THAN_FALLBACK: ReadonlySet<string> = new Set(['waitaof', 'client|capa', 'script|show']);

/**
 * Local subcommands that an older back end may not list in its COMMAND table, with their arity:
 * CLIENT SETINFO came with Redis 7.2, and client libraries send it on connect to any server.
 */
export const LOCAL_SUBCOMMAND_ARITY: ReadonlyMap<string, number> = new Map([['client|setinfo', 4]]);

/** Commands with the `blocking` flag that only block with a BLOCK argument. */
export const BLOCKS_ONLY_WITH_BLOCK_ARG: ReadonlySet<string> = new Set(['xread', 'xreadgroup']);

/**
 * The entry of `name`, else its container's, unless the subcommand names keys (`hasKeys`: its
 * COMMAND entry has key specs): then undefined, and it is routed by its key like any keyed command.
 */
export function strategyFor(name: string, container: string | null, hasKeys = false, policy = POLICY): Strategy | undefined {
  return policy.get(name) ?? (container === null || hasKeys ? undefined : policy.get(container));
}
