/**
 * Every error text slotproxy sends to a client, in one place. Where Redis has the same error, the
 * text is Redis's to the letter (client libraries match on it); the proxy's own errors still start
 * with a Redis error code, so clients classify them correctly.
 */

export const CROSSSLOT = "CROSSSLOT Keys in request don't hash to the same slot";
export const NOPROTO = 'NOPROTO unsupported protocol version';
export const SELECT_NOT_ALLOWED = notAllowedInCluster('SELECT');
export const NOT_INTEGER = 'ERR value is not an integer or out of range';
export const INVALID_DB = 'ERR DB index is out of range';
export const SLOT_NOT_SERVED = 'CLUSTERDOWN Hash slot not served';
export const AUTH_NOT_CONFIGURED =
  'ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?';
export const INVALID_CURSOR = 'ERR invalid cursor';
export const SYNTAX_ERROR = 'ERR syntax error';
export const NOAUTH = 'NOAUTH Authentication required.';
export const NOAUTH_HELLO =
  'NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time';
/** NOAUTH_HELLO as Redis 7.2 and later (and Valkey) word it. */
export const NOAUTH_HELLO_72 =
  'NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time';
export const WRONGPASS = 'WRONGPASS invalid username-password pair or user is disabled.';
export const PROXY_NOT_READY = 'CLUSTERDOWN slotproxy has not loaded the cluster topology yet';
export const NUMKEYS_TOO_MANY = "ERR Number of keys can't be greater than number of args";
export const NUMKEYS_NEGATIVE = "ERR Number of keys can't be negative";
export const MULTI_NESTED = 'ERR MULTI calls can not be nested';
export const EXEC_WITHOUT_MULTI = 'ERR EXEC without MULTI';
export const DISCARD_WITHOUT_MULTI = 'ERR DISCARD without MULTI';
export const WATCH_INSIDE_MULTI = 'ERR WATCH inside MULTI is not allowed';
export const EXECABORT = 'EXECABORT Transaction discarded because of previous errors.';
/** A user's `keys` or `channels` rules refuse an argument (proxy/security/permissions.ts). */
export const NOPERM_KEY = 'NOPERM this user has no permissions to access one of the keys used as arguments';
export const NOPERM_CHANNEL = 'NOPERM this user has no permissions to access one of the channels used as arguments';

/**
 * NOPERM as Redis 7.2 and later (and Valkey) word it: the user named for a command, a plain
 * sentence for a key or a channel. `object` is the command's full name for a command.
 */
export function noperm72(reason: 'command' | 'key' | 'channel', object: string, user: string): string {
  if (reason === 'key') return 'NOPERM No permissions to access a key';
  if (reason === 'channel') return 'NOPERM No permissions to access a channel';
  return `NOPERM User ${user} has no permissions to run the '${object}' command`;
}

/** A user's `commands` rules refuse the command (its full name, `config|set` for a subcommand). */
export function nopermCommand(fullName: string): string {
  return `NOPERM this user has no permissions to run the '${fullName}' command`;
}

/** SORT's BY pattern or GET for a user without read access to every key. */
export function sortOptionDenied(option: 'BY' | 'GET'): string {
  return `ERR ${option} option of SORT denied due to insufficient ACL permissions.`;
}

/** A Redis Cluster node's answer to SELECT (a database other than 0), MOVE and SWAPDB. */
export function notAllowedInCluster(name: 'SELECT' | 'MOVE' | 'SWAPDB'): string {
  return `ERR ${name} is not allowed in cluster mode`;
}

/** A command other than (P|S)(UN)SUBSCRIBE, PING, QUIT, RESET from a client in subscribed mode. */
export function notAllowedWhileSubscribed(fullName: string): string {
  return `ERR Can't execute '${fullName}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context`;
}

/** EXEC refused before it runs (wrong arity): Redis aborts the transaction and names the error, without its code. */
export function execAbort(error: string): string {
  return `EXECABORT Transaction discarded because of: ${error.replace(/^ERR /, '')}`;
}

/** Redis's CONFIG SET refusal of a parameter's value or of the request (`why`: Redis's reason). */
export function configSetFailed(param: string, why: string): string {
  return `ERR CONFIG SET failed (possibly related to argument '${param}') - ${why}`;
}

/** A CONFIG SET parameter that would cut the proxy off its nodes (dispatch/config-set.ts). */
export function configSetRefused(param: string, why: string): string {
  return `ERR slotproxy does not support CONFIG SET '${param}': ${why}; nothing was changed`;
}

export function wrongArity(fullName: string): string {
  return `ERR wrong number of arguments for '${fullName}' command`;
}

/**
 * Redis's text, arguments quoted and cut as Redis does ("%.128s", "%.*s": at most so many bytes, and
 * a NUL ends them). Latin1, one char a byte, for encode.errorBytes: junk is echoed byte for byte.
 */
export function unknownCommand(name: Buffer, args: Buffer[]): string {
  let rest = '';
  for (const a of args) {
    if (rest.length >= 128) break;
    rest += `'${cString(a, 128 - rest.length)}' `;
  }
  return `ERR unknown command '${cString(name, 128)}', with args beginning with: ${rest}`;
}

/** Like unknownCommand: latin1, for encode.errorBytes. */
export function unknownSubcommand(container: string, sub: Buffer): string {
  return `ERR unknown subcommand '${cString(sub, 128)}'. Try ${container.toUpperCase()} HELP.`;
}

/** At most `max` bytes of `b` as C's "%.*s" prints them (up to a NUL), latin1. */
function cString(b: Buffer, max: number): string {
  const head = b.subarray(0, Math.min(b.length, max));
  const nul = head.indexOf(0);
  return head.toString('latin1', 0, nul < 0 ? head.length : nul);
}

export function unsupported(name: string, why: string): string {
  return `ERR slotproxy does not support '${name.toUpperCase()}': ${why}`;
}

/** `cause`: the OS's words (proxy/backend/socket-error.ts), as twemproxy's `-ERR Connection refused`. */
export function nodeUnreachable(addr: string, cause: string): string {
  return `ERR slotproxy: node ${addr} unreachable (${cause})`;
}

/** Whether `message` is nodeUnreachable's: the connection failed at the socket (refused, reset, timed out). */
export function isNodeUnreachable(message: string): boolean {
  return message.startsWith('ERR slotproxy: node ') && message.endsWith(')') && message.includes(' unreachable (');
}

/** A Sentinel master's server could not be reached and Sentinel named no new master within the wait (ring.sentinel.failoverWaitMs). */
export function failoverNotDone(master: string, addr: string, cause: string, waitedMs: number): string {
  return `ERR slotproxy: ring server ${master} at ${addr} failed (${cause.replace(/^ERR slotproxy: /, '')}) and Sentinel named no new master within ${waitedMs} ms`;
}

export function connectionLost(addr: string): string {
  return `ERR slotproxy: connection to ${addr} lost before the reply; the command may or may not have run`;
}

/** `timed out`, the words of nutcracker's `-ERR Connection timed out` (what a twemproxy user's alerts look for). */
export function commandTimeout(addr: string, ms: number): string {
  return `ERR slotproxy: node ${addr} timed out (no reply within ${ms} ms)`;
}

export function tooManyRedirects(n: number): string {
  return `ERR slotproxy: gave up after ${n} cluster redirections`;
}

export function migrationCopyFailed(addr: string, cause: string): string {
  return `ERR slotproxy: the write ran on ${addr} but its copy to the new ring failed (${cause}); run slotproxy migrate copy`;
}

/** A write that shared a converging burst with one refused at queue time, when sending it again would let the client's later request overtake it. */
export function migrationBurstRefused(addr: string): string {
  return `ERR slotproxy: not run: another write sent with it to ${addr} in one MULTI was refused, and a later request of this client was already on its way; send it again`;
}

export function migrationSwitchedMidWrite(addr: string): string {
  return `ERR slotproxy: the ring migration switched to done during this write; it may have reached ${addr} only in part`;
}

/** A command with Redis's `no_multi` flag (SAVE, SHUTDOWN, SYNC, PSYNC) sent inside MULTI. */
export const NOT_ALLOWED_IN_MULTI = 'ERR Command not allowed inside a transaction';

export const PROXY_COMMAND_USAGE = 'ERR syntax: PROXY MIGRATION PHASE <double-write|read-new|done> | PROXY MIGRATION STATUS';
export const MIGRATION_NEEDS_RING = 'ERR slotproxy: migrations need ring mode';
export const NO_MIGRATION = 'ERR slotproxy: no migration is configured (add a migration: section and reload)';

export function migrationPhaseRefused(why: string): string {
  return `ERR slotproxy: ${why}`;
}

/**
 * A node's error to a command the proxy sends to every node (CONFIG SET, RESETSTAT, REWRITE): the
 * node's own text, so the code stays first, then the node and what became of the others.
 */
export function onNodes(text: string, failed: readonly string[], outcome: string): string {
  const who = failed.length > 1 ? `${failed[0]} and ${failed.length - 1} more` : failed[0];
  return `${text} (node ${who}; ${outcome})`;
}

export const NO_NODE_CHANGED = 'no node was changed';
export const NODES_SET_BACK = 'the nodes that took it were set back';

export function notSetBack(addrs: readonly string[]): string {
  return `could not set back ${addrs.join(', ')}`;
}

export function doneOnNodes(done: number, total: number): string {
  return `done on ${done} of ${total} nodes`;
}
