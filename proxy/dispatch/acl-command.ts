/**
 * ACL through the proxy, answered over the proxy's own users (security/auth.ts), as one Redis of
 * the back end's version answers over its users: SETUSER, GETUSER, DELUSER, LIST, USERS, DRYRUN and LOG here, WHOAMI in
 * local.ts; CAT, GENPASS and HELP are the same on every node and go to one (commands/policy.ts).
 * Texts and reply shapes are Redis's (acl.c, aclCommand).
 */
import { ClientList } from '../client/client-list';
import { ClientSession } from '../client/client-session';
import { CommandTable } from '../commands/table';
import { arityMismatch, parseInteger, resolveSubcommand } from '../commands/keys';
import { ClientAuth, DEFAULT_USER } from '../security/auth';
import { AclLog } from '../security/acl-log';
import { UserPermissions } from '../security/permissions';
import { userFields, userLine } from '../security/acl-describe';
import * as encode from '../resp/encode';
import * as errors from '../resp/errors';
import { versionAtLeast } from '../resp/backend-version';

export interface AclServer {
  /** redis_version of the back end: Redis 7.2 changed how users are described and DRYRUN's and LOG's replies. */
  readonly backendVersion: string;
  readonly auth: ClientAuth;
  readonly aclLog: AclLog;
  readonly table: CommandTable;
  readonly clients: ClientList;
}

/** `name` is `acl|<sub>`; arity was checked against the command table. */
export function aclCommand(server: AclServer, session: ClientSession, name: string, args: Buffer[]): Buffer {
  switch (name) {
    case 'acl|setuser':
      return setUser(server, session, args);
    case 'acl|getuser':
      return getUser(server, session, args[2].toString());
    case 'acl|deluser':
      return delUser(server, session, args.slice(2).map((a) => a.toString()));
    case 'acl|list':
      return encode.arrayOfBulks(server.auth.all().map((u) => userLine(u, server.table, since72(server))));
    case 'acl|users':
      return encode.arrayOfBulks(server.auth.all().map((u) => u.name));
    case 'acl|dryrun':
      return dryRun(server, args);
    case 'acl|log':
      return log(server, session, args);
    default:
      return encode.error(`ERR slotproxy: no local answer for '${name}'`);
  }
}

function setUser(server: AclServer, session: ClientSession, args: Buffer[]): Buffer {
  const name = args[2].toString();
  if (/[ \0]/.test(name)) return encode.error("ERR Usernames can't contain spaces or null characters");
  const refused = server.auth.setUser(name, args.slice(3), server.table);
  if (refused !== null) return encode.error(refused);
  // As on Redis, where a client points at its user: the new rules apply to its next command, and a
  // client subscribed to a channel the user may no longer use is closed (after its reply, if it is this one).
  const permissions = server.auth.permissionsOf(name);
  for (const c of server.clients) {
    if (c.user !== name) continue;
    c.refreshPermissions();
    const subscribed = permissions === null ? null : c.subscribedNames();
    if (subscribed === null || (permissions as UserPermissions).allowsSubscriptions(subscribed.channels, subscribed.patterns)) continue;
    if (c.id === session.id) session.closeAfterReply = true;
    else c.kill();
  }
  return encode.OK;
}

function getUser(server: AclServer, session: ClientSession, name: string): Buffer {
  const user = server.auth.user(name);
  if (user === undefined) return session.protocol === 3 ? encode.RESP3_NULL : encode.NULL_BULK;
  const f = userFields(user, server.table, since72(server));
  const fields = [
    encode.bulk('flags'), session.protocol === 3 ? encode.setOfBulks(f.flags) : encode.arrayOfBulks(f.flags),
    encode.bulk('passwords'), encode.arrayOfBulks(f.passwords),
    encode.bulk('commands'), encode.bulk(f.commands),
    encode.bulk('keys'), encode.bulk(f.keys),
    encode.bulk('channels'), encode.bulk(f.channels),
    encode.bulk('selectors'), encode.EMPTY_ARRAY,
  ];
  return session.protocol === 3 ? encode.mapOfFrames(fields) : encode.arrayOfFrames(fields);
}

/** DELUSER: the default user first refuses the whole request; each user deleted has its clients closed, as on Redis. */
function delUser(server: AclServer, session: ClientSession, names: string[]): Buffer {
  if (names.includes(DEFAULT_USER)) return encode.error("ERR The 'default' user cannot be removed");
  let deleted = 0;
  for (const name of names) {
    if (!server.auth.delUser(name)) continue;
    deleted++;
    for (const c of server.clients) {
      if (c.user !== name) continue;
      // The client deleting its own user gets its reply first, as on Redis.
      if (c.id === session.id) session.closeAfterReply = true;
      else c.kill();
    }
  }
  return encode.integer(deleted);
}

/** DRYRUN user command [arg ...]: whether the user's rules would let the command run (nothing is run). */
function dryRun(server: AclServer, args: Buffer[]): Buffer {
  const username = args[2].toString();
  const user = server.auth.user(username);
  if (user === undefined) return encode.error(`ERR User '${username}' not found`);
  const command = args.slice(3);
  const top = server.table.lookup(command[0]);
  const info = top === undefined ? undefined : command.length === 1 ? top : resolveSubcommand(top, command);
  if (info === undefined || info === null || Buffer.isBuffer(info)) return encode.error(`ERR Command '${command[0].toString()}' not found`);
  if (arityMismatch(info, command.length)) return encode.error(errors.wrongArity(info.name));
  const denial = user.permissions?.check(info, command) ?? null;
  if (denial === null || denial.object === undefined) return encode.OK;
  const what = denial.reason === 'command' ? `run the '${denial.object}' command` : `access the '${denial.object}' ${denial.reason}`;
  // Redis 7.2 names the user.
  return encode.bulk(`${since72(server) ? `User ${username}` : 'This user'} has no permissions to ${what}`);
}

/** LOG [count | RESET] */
function log(server: AclServer, session: ClientSession, args: Buffer[]): Buffer {
  // Redis names the subcommand as the client wrote it.
  if (args.length > 3) return encode.error(`ERR unknown subcommand or wrong number of arguments for '${args[1].toString()}'. Try ACL HELP.`);
  if (args.length === 3 && args[2].toString('latin1').toLowerCase() === 'reset') {
    server.aclLog.reset();
    return encode.OK;
  }
  const count = args.length === 3 ? parseInteger(args[2]) : null;
  if (args.length === 3 && count === null) return encode.error(errors.NOT_INTEGER);
  return server.aclLog.reply(count === null ? null : Math.max(0, count), session.protocol, since72(server));
}

function since72(server: AclServer): boolean {
  return versionAtLeast(server.backendVersion, 7, 2);
}
