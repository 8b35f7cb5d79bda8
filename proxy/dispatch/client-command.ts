/**
 * CLIENT subcommands the proxy answers itself, because they are about the client's connection to
 * the proxy: a client of slotproxy has no connection of its own on any node. Texts and argument
 * checks follow Redis 7.0 (networking.c, clientCommand). CLIENT PAUSE/UNPAUSE fan out to every
 * master and CLIENT HELP goes to any master (commands/policy.ts).
 *
 * CLIENT TRACKING, CACHING, GETREDIR and TRACKINGINFO are about the client's tracking state, which
 * the proxy keeps and serves itself (proxy/tracking/).
 */
import { ClientList, ClientType, ListedClient } from '../client/client-list';
import { ClientSession } from '../client/client-session';
import { ClientAuth } from '../security/auth';
import { parseInteger } from '../commands/keys';
import * as encode from '../resp/encode';
import * as errors from '../resp/errors';
import { CachingClient, ClientCaching } from '../tracking/client-caching';
import { parseTracking, setCaching } from '../tracking/tracking-state';
import { BackendIdentity, backendSince } from '../resp/backend-version';

export interface ClientCommandServer extends BackendIdentity {
  readonly clients: ClientList;
  readonly auth: ClientAuth;
  readonly caching: ClientCaching;
}

type Client = ClientSession & CachingClient;

const CLIENT_TYPES: ReadonlyMap<string, ClientType> = new Map([
  ['normal', 'normal'],
  ['pubsub', 'pubsub'],
  ['master', 'master'],
  ['replica', 'replica'],
  ['slave', 'replica'],
]);

const lower = (b: Buffer): string => b.toString('latin1').toLowerCase();

/** `name` is `client|<sub>`; arity was checked against the command table. */
export function clientCommand(server: ClientCommandServer, session: Client, name: string, args: Buffer[]): Buffer | Promise<Buffer> {
  switch (name) {
    case 'client|id':
      return encode.integer(session.id);
    case 'client|getname':
      return encode.bulk(session.name);
    case 'client|setname':
      return setName(session, args[2]);
    case 'client|setinfo':
      return setInfo(session, args);
    case 'client|info':
      return encode.verbatim(`${describe(server, session)}\n`, session.protocol);
    case 'client|list':
      return list(server, session, args);
    case 'client|kill':
      return kill(server, session, args);
    case 'client|reply':
      return reply(session, args[2]);
    case 'client|capa':
      // Valkey 8's capabilities (`redirect`): the proxy never redirects, so any is taken, as Valkey takes unknown ones.
      return encode.OK;
    case 'client|no-evict': {
      const mode = lower(args[2]);
      return mode === 'on' || mode === 'off' ? encode.OK : encode.error(errors.SYNTAX_ERROR);
    }
    case 'client|tracking':
      return tracking(server, session, args);
    case 'client|caching': {
      const refused = setCaching(session.tracking, args[2]);
      return refused === null ? encode.OK : encode.error(refused);
    }
    case 'client|getredir':
      return encode.integer(session.tracking?.redirect ?? -1);
    case 'client|trackinginfo':
      return trackingInfo(session);
    case 'client|unblock':
      return unblock(server, args);
    default:
      return encode.error(`ERR slotproxy: no local answer for '${name}'`);
  }
}

/** Redis refuses spaces, newlines and other special characters in connection names. */
export function setName(session: ClientSession, name: Buffer): Buffer {
  if (!printable(name)) return encode.error('ERR Client names cannot contain spaces, newlines or special characters.');
  session.name = name.length === 0 ? null : name;
  return encode.OK;
}

function printable(value: Buffer): boolean {
  for (const c of value) if (c < 33 || c > 126) return false;
  return true;
}

/**
 * CLIENT SETINFO LIB-NAME|LIB-VER value: Redis 7.2's, answered even in front of 7.0 because client
 * libraries send it on connect to any server. The values show in CLIENT LIST in front of 7.2 and later.
 */
function setInfo(session: ClientSession, args: Buffer[]): Buffer {
  const attr = lower(args[2]);
  if (attr !== 'lib-name' && attr !== 'lib-ver') return encode.error(`ERR Unrecognized option '${args[2].toString()}'`);
  if (!printable(args[3])) return encode.error(`ERR ${attr} cannot contain spaces, newlines or special characters.`);
  const lib = (session.lib ??= { name: '', ver: '' });
  if (attr === 'lib-name') lib.name = args[3].toString();
  else lib.ver = args[3].toString();
  return encode.OK;
}

function describe(server: ClientCommandServer, session: ClientSession): string {
  return server.clients.get(session.id)?.describe() ?? '';
}

/** CLIENT LIST [TYPE type | ID id [id ...]] */
function list(server: ClientCommandServer, session: ClientSession, args: Buffer[]): Buffer {
  let lines: string[];
  if (args.length === 4 && lower(args[2]) === 'type') {
    const type = CLIENT_TYPES.get(lower(args[3]));
    if (type === undefined) return encode.error(`ERR Unknown client type '${args[3].toString()}'`);
    lines = [...server.clients].filter((c) => c.type === type).map((c) => c.describe());
  } else if (args.length > 3 && lower(args[2]) === 'id') {
    lines = [];
    for (let i = 3; i < args.length; i++) {
      const id = parseInteger(args[i]);
      if (id === null) return encode.error('ERR Invalid client ID');
      const found = server.clients.get(id);
      if (found !== undefined) lines.push(found.describe());
    }
  } else if (args.length !== 2) {
    return encode.error(errors.SYNTAX_ERROR);
  } else {
    lines = [...server.clients].map((c) => c.describe());
  }
  return encode.verbatim(lines.map((l) => `${l}\n`).join(''), session.protocol);
}

/**
 * CLIENT KILL addr, or CLIENT KILL [ID id] [TYPE type] [ADDR addr] [LADDR addr] [USER user]
 * [SKIPME yes|no] [MAXAGE seconds] ...; MAXAGE came with Redis 7.4 and Valkey 8.
 */
function kill(server: ClientCommandServer, session: ClientSession, args: Buffer[]): Buffer {
  const match: { id?: number; type?: ClientType; addr?: string; laddr?: string; user?: string; maxAge?: number } = {};
  let skipMe = true;
  if (args.length === 3) {
    match.addr = args[2].toString();
    skipMe = false; // with the old form a client may kill itself
  } else if (args.length > 3) {
    for (let i = 2; i < args.length; i += 2) {
      const option = lower(args[i]);
      const value = args[i + 1];
      if (value === undefined) return encode.error(errors.SYNTAX_ERROR);
      if (option === 'id') {
        const id = parseInteger(value);
        if (id === null || id < 1) return encode.error('ERR client-id should be greater than 0');
        match.id = id;
      } else if (option === 'type') {
        const type = CLIENT_TYPES.get(lower(value));
        if (type === undefined) return encode.error(`ERR Unknown client type '${value.toString()}'`);
        match.type = type;
      } else if (option === 'addr') {
        match.addr = value.toString();
      } else if (option === 'laddr') {
        match.laddr = value.toString();
      } else if (option === 'user') {
        const user = value.toString();
        if (!server.auth.hasUser(user)) return encode.error(`ERR No such user '${user}'`);
        match.user = user;
      } else if (option === 'skipme') {
        const yesNo = lower(value);
        if (yesNo !== 'yes' && yesNo !== 'no') return encode.error(errors.SYNTAX_ERROR);
        skipMe = yesNo === 'yes';
      } else if (option === 'maxage' && backendSince(server, [7, 4], [8, 0])) {
        const age = parseInteger(value);
        if (age === null) return encode.error('ERR maxage is not an integer or out of range');
        if (age <= 0) return encode.error('ERR maxage should be greater than 0');
        match.maxAge = age;
      } else {
        return encode.error(errors.SYNTAX_ERROR);
      }
    }
  } else {
    return encode.error(errors.SYNTAX_ERROR);
  }
  const victims: ListedClient[] = [];
  let killsSelf = false;
  for (const c of server.clients) {
    if (match.addr !== undefined && c.addr !== match.addr) continue;
    if (match.laddr !== undefined && c.laddr !== match.laddr) continue;
    if (match.type !== undefined && c.type !== match.type) continue;
    if (match.id !== undefined && c.id !== match.id) continue;
    if (match.user !== undefined && c.user !== match.user) continue;
    if (match.maxAge !== undefined && c.ageSeconds <= match.maxAge) continue;
    if (c.id === session.id) {
      if (skipMe) continue;
      killsSelf = true;
    } else {
      victims.push(c);
    }
  }
  for (const v of victims) v.kill();
  // The client killing itself gets its reply first, as on Redis.
  if (killsSelf) session.closeAfterReply = true;
  const killed = victims.length + (killsSelf ? 1 : 0);
  if (args.length === 3) return killed === 0 ? encode.error('ERR No such client') : encode.OK;
  return encode.integer(killed);
}

/** CLIENT REPLY ON|OFF|SKIP */
function reply(session: ClientSession, mode: Buffer): Buffer {
  const m = lower(mode);
  if (m !== 'on' && m !== 'off' && m !== 'skip') return encode.error(errors.SYNTAX_ERROR);
  session.setReplyMode(m);
  return encode.OK;
}

/** CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN] [OPTOUT] [NOLOOP] */
function tracking(server: ClientCommandServer, session: Client, args: Buffer[]): Buffer | Promise<Buffer> {
  const request = parseTracking(args, (id) => server.clients.get(id) !== undefined, session.tracking);
  if (typeof request === 'string') return encode.error(request);
  if (!request.on) {
    server.caching.disable(session);
    return encode.OK;
  }
  const ready = server.caching.enable(session, request);
  return ready === null ? encode.OK : ready.then(() => encode.OK);
}

/** CLIENT TRACKINGINFO: a map in RESP3 (flags a set), flat in RESP2, as Redis writes it. */
function trackingInfo(session: Client): Buffer {
  const t = session.tracking;
  const flags = t === null ? ['off'] : t.flags();
  const fields = [
    encode.bulk('flags'),
    session.protocol === 3 ? encode.setOfBulks(flags) : encode.arrayOfBulks(flags),
    encode.bulk('redirect'),
    encode.integer(t === null ? -1 : t.redirect),
    encode.bulk('prefixes'),
    encode.arrayOfBulks(t?.prefixes ?? []),
  ];
  return session.protocol === 3 ? encode.mapOfFrames(fields) : encode.arrayOfFrames(fields);
}

/** CLIENT UNBLOCK id [TIMEOUT|ERROR]: ends a proxy client's blocking command early. */
async function unblock(server: ClientCommandServer, args: Buffer[]): Promise<Buffer> {
  if (args.length > 4) return encode.error("ERR unknown subcommand or wrong number of arguments for 'UNBLOCK'. Try CLIENT HELP.");
  let reason: 'timeout' | 'error' = 'timeout';
  if (args.length === 4) {
    const r = lower(args[3]);
    if (r !== 'timeout' && r !== 'error') return encode.error('ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR');
    reason = r;
  }
  const id = parseInteger(args[2]);
  if (id === null) return encode.error(errors.NOT_INTEGER);
  const blocked = server.clients.get(id)?.blocked ?? null;
  return blocked !== null && (await blocked.unblock(reason)) ? encode.integer(1) : encode.integer(0);
}
