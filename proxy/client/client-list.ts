/**
 * The proxy's own clients, as CLIENT LIST, CLIENT INFO, CLIENT KILL and CLIENT UNBLOCK see them: a
 * client of slotproxy is one of these, never a connection the proxy holds to a node. The server
 * adds a session when it accepts it and removes it when it closes.
 */
import { ClientSession } from './client-session';

/** Redis's client types (CLIENT LIST TYPE, CLIENT KILL TYPE); through the proxy only normal and pubsub occur. */
export type ClientType = 'normal' | 'pubsub' | 'master' | 'replica';

export interface ListedClient extends ClientSession {
  readonly type: ClientType;
  /** The client's address, `ip:port`, as CLIENT LIST's `addr`. */
  readonly addr: string;
  /** The proxy's address the client connected to, as `laddr`. */
  readonly laddr: string;
  /** Redis's CLIENT LIST line for this client, without the newline. */
  describe(): string;
  /** Seconds since it connected (CLIENT LIST's `age`, CLIENT KILL MAXAGE). */
  readonly ageSeconds: number;
  /** CLIENT KILL: closes the connection now. */
  kill(): void;
  /** ACL SETUSER changed its user: the user's rules as they are now apply to its next command. */
  refreshPermissions(): void;
  /** Its channels and patterns when subscribed, else null. */
  subscribedNames(): { channels: Buffer[]; patterns: Buffer[] } | null;
}

export class ClientList<C extends ListedClient = ListedClient> {
  private readonly byId = new Map<number, C>();

  add(client: C): void {
    this.byId.set(client.id, client);
  }

  delete(client: C): void {
    this.byId.delete(client.id);
  }

  get(id: number): C | undefined {
    return this.byId.get(id);
  }

  get size(): number {
    return this.byId.size;
  }

  [Symbol.iterator](): IterableIterator<C> {
    return this.byId.values();
  }
}

/**
 * Which CLIENT LIST line the back end writes: Redis 7.0's; 7.2's (`watch`, `lib-name`, `lib-ver`
 * added); Valkey 8's (7.2's and `tot-net-in`, `tot-net-out`, `tot-cmds`).
 */
export type ClientInfoFormat = 'redis70' | 'redis72' | 'valkey8';

/** What a CLIENT LIST line says, in Redis's order. */
export interface ClientInfoFields {
  id: number;
  addr: string;
  laddr: string;
  fd: number;
  name: string;
  ageSeconds: number;
  idleSeconds: number;
  flags: string;
  sub: number;
  psub: number;
  ssub: number;
  multi: number;
  /** Keys WATCHed (7.2's `watch`). */
  watch: number;
  /** Reply bytes not yet taken by the client. */
  omem: number;
  /** Replies owed, not yet written. */
  oll: number;
  cmd: string;
  user: string;
  resp: number;
  /** CLIENT SETINFO's values (7.2's `lib-name`, `lib-ver`). */
  libName: string;
  libVer: string;
  /** Valkey 8's counters: bytes read from the client, bytes written to it, commands run before this one. */
  netIn: number;
  netOut: number;
  commands: number;
}

/** One line of the back end's CLIENT LIST. Buffers the proxy does not have (query buffer, argv) read 0. */
export function clientInfoLine(f: ClientInfoFields, format: ClientInfoFormat): string {
  const since72 = format !== 'redis70';
  let line =
    `id=${f.id} addr=${f.addr} laddr=${f.laddr} fd=${f.fd} name=${f.name} age=${f.ageSeconds} idle=${f.idleSeconds} ` +
    `flags=${f.flags} db=0 sub=${f.sub} psub=${f.psub} ssub=${f.ssub} multi=${f.multi} ${since72 ? `watch=${f.watch} ` : ''}qbuf=0 qbuf-free=0 argv-mem=0 ` +
    `multi-mem=0 rbs=0 rbp=0 obl=0 oll=${f.oll} omem=${f.omem} tot-mem=${f.omem} events=${f.omem > 0 ? 'rw' : 'r'} ` +
    `cmd=${f.cmd} user=${f.user} redir=-1 resp=${f.resp}`;
  if (since72) line += ` lib-name=${f.libName} lib-ver=${f.libVer}`;
  if (format === 'valkey8') line += ` tot-net-in=${f.netIn} tot-net-out=${f.netOut} tot-cmds=${f.commands}`;
  return line;
}

/** The format of a back end: `server` as HELLO names it, and its redis_version. */
export function clientInfoFormat(server: { name: string; version: string }, redisVersion: string): ClientInfoFormat {
  if (server.name === 'valkey' && Number(server.version.split('.')[0]) >= 8) return 'valkey8';
  const [major, minor] = redisVersion.split('.').map(Number);
  return major > 7 || (major === 7 && minor >= 2) ? 'redis72' : 'redis70';
}
