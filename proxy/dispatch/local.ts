/**
 * Commands the proxy answers itself, because the honest answer needs no node: PING, ECHO, SELECT 0,
 * HELLO, CLIENT SETNAME/GETNAME/ID/SETINFO, CLUSTER KEYSLOT ... Texts follow Redis 7.
 */
import { keySlot } from '../../sharding/slot';
import * as encode from '../resp/encode';
import * as errors from '../resp/errors';
import { parseInteger } from '../commands/keys';
import { AuthCounters, ClientAuth, authenticate } from '../security/auth';

/** What a local answer may read or change of its session. */
export interface LocalSession {
  readonly id: number;
  name: Buffer | null;
  /** Close the client after this reply has been written (QUIT). */
  closeAfterReply: boolean;
  /** False until AUTH when the proxy requires it (security/auth.ts). */
  authenticated: boolean;
  /** RESP version chosen with HELLO; 2 until then. */
  protocol: 2 | 3;
}

export interface LocalServer {
  readonly backendVersion: string;
  /** Null: no `auth` section, clients need no AUTH. */
  readonly auth: ClientAuth | null;
  readonly stats: AuthCounters;
}

/** `name` is the command's lower-case name, `container|sub` for subcommands. */
export function answerLocally(server: LocalServer, session: LocalSession, name: string, args: Buffer[]): Buffer {
  switch (name) {
    case 'ping':
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
      // RESET signs the client out back to the default user, as on Redis.
      session.authenticated = server.auth === null;
      return encode.simple('RESET');
    case 'readonly':
    case 'readwrite':
    case 'asking':
      return encode.OK;
    case 'client|setname':
      return setName(session, args[2]);
    case 'client|getname':
      return encode.bulk(session.name);
    case 'client|id':
      return encode.integer(session.id);
    case 'client|setinfo':
      return encode.OK;
    case 'cluster|keyslot':
      return encode.integer(keySlot(args[2]));
    default:
      return encode.error(`ERR slotproxy: no local answer for '${name}'`);
  }
}

/** AUTH [username] password */
function auth(server: LocalServer, session: LocalSession, args: Buffer[]): Buffer {
  if (args.length > 3) return encode.error(errors.SYNTAX_ERROR);
  if (args.length === 2 && server.auth === null) return encode.error(errors.AUTH_NOT_CONFIGURED);
  const user = args.length === 3 ? args[1] : null;
  const password = args[args.length - 1];
  return authenticate(server.auth, server.stats, session, user, password) ? encode.OK : encode.error(errors.WRONGPASS);
}

function select(index: Buffer): Buffer {
  const db = parseInteger(index);
  if (db === null || db > 0x7fffffff || db < -0x80000000) return encode.error(errors.NOT_INTEGER);
  if (db === 0) return encode.OK;
  return encode.error(errors.SELECT_NOT_ALLOWED);
}

function setName(session: LocalSession, name: Buffer): Buffer {
  // Redis refuses spaces, newlines and other special characters in connection names.
  for (const c of name) {
    if (c < 33 || c > 126) return encode.error('ERR Client names cannot contain spaces, newlines or special characters.');
  }
  session.name = name.length === 0 ? null : name;
  return encode.OK;
}

/** HELLO [protover [AUTH username password] [SETNAME clientname]]: RESP2 or RESP3. */
function hello(server: LocalServer, session: LocalSession, args: Buffer[]): Buffer {
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
    return encode.error(errors.WRONGPASS);
  }
  if (!session.authenticated) return encode.error(errors.NOAUTH_HELLO);
  if (name !== null) {
    const r = setName(session, name);
    if (r[0] === 45) return r;
  }
  // The new protocol applies from this reply on, as on Redis.
  session.protocol = protocol;
  const fields = [
    encode.bulk('server'), encode.bulk('redis'),
    encode.bulk('version'), encode.bulk(server.backendVersion),
    encode.bulk('proto'), encode.integer(protocol),
    encode.bulk('id'), encode.integer(session.id),
    encode.bulk('mode'), encode.bulk('standalone'),
    encode.bulk('role'), encode.bulk('master'),
    encode.bulk('modules'), encode.EMPTY_ARRAY,
  ];
  return protocol === 3 ? encode.mapOfFrames(fields) : encode.arrayOfFrames(fields);
}
