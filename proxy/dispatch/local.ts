/**
 * Commands the proxy answers itself, because the honest answer needs no node: PING, ECHO, SELECT 0,
 * HELLO, AUTH, RESET, CLUSTER KEYSLOT, ACL WHOAMI (the proxy's user the client signed in as), the
 * other ACL subcommands over the proxy's users (acl-command.ts) ...
 * Texts and argument checks follow Redis 7.0 (CLIENT subcommands: client-command.ts).
 */
import { keySlot } from '../../sharding/slot';
import * as encode from '../resp/encode';
import * as errors from '../resp/errors';
import { parseInteger } from '../commands/keys';
import { AuthCounters, ClientAuth, DEFAULT_USER, authenticate } from '../security/auth';
import { ClientSession } from '../client/client-session';
import { setName } from './client-command';
import { AclServer, aclCommand } from './acl-command';
import { versionAtLeast } from '../resp/backend-version';

export interface LocalServer extends AclServer {
  /** redis_version of the back end: the texts Redis changed follow it. */
  readonly backendVersion: string;
  readonly backendServer: { readonly name: string; readonly version: string };
  readonly auth: ClientAuth;
  readonly stats: AuthCounters;
}

/** ROLE as one master with no replica answers it: replication offset 0, no replicas. */
const ROLE_MASTER = encode.arrayOfFrames([encode.bulk('master'), encode.integer(0), encode.EMPTY_ARRAY]);

/** `name` is the command's lower-case name, `container|sub` for subcommands. */
export function answerLocally(server: LocalServer, session: ClientSession, name: string, args: Buffer[]): Buffer {
  switch (name) {
    case 'ping':
      if (args.length > 2) return encode.error(errors.wrongArity('ping'));
      return args.length > 1 ? encode.bulk(args[1]) : encode.PONG;
    case 'echo':
      return encode.bulk(args[1]);
    case 'quit':
      session.closeAfterReply = true;
      return encode.OK;
    case 'select':
      return select(args[1]);
    case 'hello':
      return hello(server, session, args);
    case 'auth':
      return auth(server, session, args);
    case 'reset':
      session.name = null;
      session.protocol = 2;
      session.setReplyMode('on');
      session.user = DEFAULT_USER;
      // RESET signs the client out back to the default user, as on Redis.
      session.authenticated = !server.auth.requiresAuth;
      return encode.simple('RESET');
    case 'readonly':
    case 'readwrite':
    case 'asking':
      return encode.OK;
    case 'cluster|keyslot':
      return encode.integer(keySlot(args[2]));
    // Ring mode (commands/policy.ts): a cluster node's answer, whatever the arguments, as for SELECT.
    case 'move':
      return encode.error(errors.notAllowedInCluster('MOVE'));
    case 'swapdb':
      return encode.error(errors.notAllowedInCluster('SWAPDB'));
    case 'acl|whoami':
      return encode.bulk(session.user);
    case 'role':
      return ROLE_MASTER;
    default:
      if (name.startsWith('acl|')) return aclCommand(server, session, name, args);
      return encode.error(`ERR slotproxy: no local answer for '${name}'`);
  }
}

/** AUTH [username] password */
function auth(server: LocalServer, session: ClientSession, args: Buffer[]): Buffer {
  if (args.length > 3) return encode.error(errors.SYNTAX_ERROR);
  if (args.length === 2 && server.auth.defaultNopass) return encode.error(errors.AUTH_NOT_CONFIGURED);
  const user = args.length === 3 ? args[1] : null;
  const password = args[args.length - 1];
  if (authenticate(server.auth, server.stats, session, user, password)) return encode.OK;
  return authRefused(server, session, user);
}

/**
 * A failed AUTH or HELLO AUTH: Redis's WRONGPASS, and an ACL LOG entry naming the user tried.
 * Always answered: Redis 7.2 and later (Valkey too) write no reply at all while earlier replies to
 * the client are not yet written (addAuthErrReply returns early when clientHasPendingReplies, a
 * check meant for module auth that answered already), which leaves a client that pipelined the
 * AUTH waiting forever for its reply; the proxy does not copy that.
 */
function authRefused(server: LocalServer, session: ClientSession, user: Buffer | null): Buffer {
  const username = user === null ? DEFAULT_USER : user.toString();
  server.aclLog.add('auth', 'toplevel', 'AUTH', username, server.clients.get(session.id)?.describe() ?? '');
  return encode.error(errors.WRONGPASS);
}

function select(index: Buffer): Buffer {
  const db = parseInteger(index);
  if (db === null) return encode.error(errors.NOT_INTEGER);
  if (db > 0x7fffffff || db < -0x80000000) return encode.error('ERR value is out of range, value must between -2147483648 and 2147483647');
  if (db === 0) return encode.OK;
  return encode.error(errors.SELECT_NOT_ALLOWED);
}

/** HELLO [protover [AUTH username password] [SETNAME clientname]]: RESP2 or RESP3. */
function hello(server: LocalServer, session: ClientSession, args: Buffer[]): Buffer {
  let i = 1;
  let protocol = session.protocol;
  if (args.length > 1) {
    const ver = parseInteger(args[1]);
    if (ver === null) return encode.error('ERR Protocol version is not an integer or out of range');
    if (ver !== 2 && ver !== 3) return encode.error(errors.NOPROTO);
    protocol = ver;
    i = 2;
  }
  let credentials: [Buffer, Buffer] | null = null;
  let name: Buffer | null = null;
  for (; i < args.length; i++) {
    const opt = args[i].toString('latin1').toLowerCase();
    if (opt === 'auth' && i + 2 < args.length) {
      credentials = [args[i + 1], args[i + 2]];
      i += 2;
    } else if (opt === 'setname' && i + 1 < args.length) {
      name = args[++i];
    } else {
      return encode.error(`ERR Syntax error in HELLO option '${args[i].toString()}'`);
    }
  }
  // Redis's order: credentials, then "must be authenticated", then the name.
  if (credentials !== null && !authenticate(server.auth, server.stats, session, credentials[0], credentials[1])) {
    return authRefused(server, session, credentials[0]);
  }
  if (!session.authenticated) return encode.error(versionAtLeast(server.backendVersion, 7, 2) ? errors.NOAUTH_HELLO_72 : errors.NOAUTH_HELLO);
  if (name !== null) {
    const r = setName(session, name);
    if (r[0] === 45) return r;
  }
  // The new protocol applies from this reply on, as on Redis.
  session.protocol = protocol;
  const fields = [
    encode.bulk('server'), encode.bulk(server.backendServer.name),
    encode.bulk('version'), encode.bulk(server.backendServer.version),
    encode.bulk('proto'), encode.integer(protocol),
    encode.bulk('id'), encode.integer(session.id),
    encode.bulk('mode'), encode.bulk('standalone'),
    encode.bulk('role'), encode.bulk('master'),
    encode.bulk('modules'), encode.EMPTY_ARRAY,
  ];
  return protocol === 3 ? encode.mapOfFrames(fields) : encode.arrayOfFrames(fields);
}
