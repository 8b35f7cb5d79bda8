/**
 * Client authentication (SPEC section 7): `auth.password` is the default user's password, as
 * Redis's `requirepass` (CONFIG SET requirepass through the proxy changes it: dispatch/config-set.ts);
 * `auth.users` are ACL-style users for `AUTH name password` and `HELLO 2 AUTH name password`.
 *
 * Passwords are kept only as SHA-256 digests and compared with crypto.timingSafeEqual over the
 * digests, so the comparison takes the same time whatever the password's length or how much of it
 * matches. An unknown user is checked against a random digest, so the answer's timing does not say
 * whether the user exists either.
 *
 * The hot path only reads a session's `authenticated` boolean; this file runs for AUTH and HELLO.
 */
import crypto from 'node:crypto';
import { AuthConfig } from '../../config/schema';
import { CommandTable } from '../commands/table';
import { UserPermissions, userRuleLists } from './permissions';
import { ProxyUser, configUser, digest, newUser, setUser } from './acl-user';



/** `AUTH password` authenticates the user Redis calls `default`. */
export const DEFAULT_USER = 'default';

export class ClientAuth {
  /**
   * User name -> user, the default user always among them. Keys are the names as configured
   * (case-sensitive, as in Redis). CONFIG SET requirepass changes the default user in place.
   */
  private readonly users = new Map<string, ProxyUser>();
  /** Compared against for unknown users, so that they take as long as known ones. */
  private readonly decoy = digest(crypto.randomBytes(32));
  private readonly removedUser = UserPermissions.none();
  private readonly clusterMode: boolean;
  /** CONFIG GET requirepass: the file's `auth.password`, then CONFIG SET's. */
  requirepass: string;

  /**
   * `config` undefined (no `auth` section): the default user takes any password, as a Redis without
   * `requirepass`. Throws a ConfigError when a user's rules name a command `backend.table` does not
   * have (the proxy always passes its command table and mode; tests of passwords alone may leave it out).
   */
  constructor(config: AuthConfig | undefined, backend?: { table: CommandTable; mode: 'cluster' | 'ring' }) {
    this.requirepass = config?.password ?? '';
    this.clusterMode = backend?.mode === 'cluster';
    // With an `auth` section and no password, the default user has none: no AUTH signs it in.
    this.users.set(DEFAULT_USER, configUser(DEFAULT_USER, config?.password, config === undefined, null, this.clusterMode));
    (config?.users ?? []).forEach((u, i) => {
      this.users.set(u.name, configUser(u.name, u.password, false, userRuleLists(u, i, backend?.table), this.clusterMode));
    });
  }

  /** The user named so (names are case-sensitive, as in Redis), or undefined. */
  user(name: string): ProxyUser | undefined {
    return this.users.get(name);
  }

  /** Every user, by name in byte order (Redis keeps them in a radix tree). */
  all(): ProxyUser[] {
    return [...this.users.values()].sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)));
  }

  /**
   * ACL SETUSER: the user with `rules` applied (created `off` with no rule when new), or Redis's
   * error text, the user unchanged. The caller gives signed-in clients their new permissions.
   */
  setUser(name: string, rules: readonly Buffer[], table: CommandTable): string | null {
    const next = setUser(this.users.get(name) ?? newUser(name), rules, table, this.clusterMode);
    if (typeof next === 'string') return next;
    this.users.set(name, next);
    return null;
  }

  /** ACL DELUSER of one name: true when it was a user (never the default user). */
  delUser(name: string): boolean {
    return name !== DEFAULT_USER && this.users.delete(name);
  }

  static fromConfig(config: AuthConfig | undefined, table: CommandTable, mode: 'cluster' | 'ring'): ClientAuth {
    return new ClientAuth(config, { table, mode });
  }

  /** Whether a new connection starts signed out: Redis's authRequired (the default user is not `on nopass`). */
  get requiresAuth(): boolean {
    const d = this.users.get(DEFAULT_USER) as ProxyUser;
    return !d.nopass || !d.enabled;
  }

  /** AUTH with a password only is refused when the default user is `nopass`, as in Redis. */
  get defaultNopass(): boolean {
    return (this.users.get(DEFAULT_USER) as ProxyUser).nopass;
  }

  /**
   * CONFIG SET requirepass: the default user's passwords become this one, or `nopass` when it is
   * empty (Redis's ACLUpdateDefaultUserPassword). Signed-in clients stay signed in.
   */
  setRequirepass(password: string): void {
    const d = this.users.get(DEFAULT_USER) as ProxyUser;
    d.passwords = password === '' ? [] : [digest(password)];
    d.nopass = password === '';
    this.requirepass = password;
  }

  /**
   * What a session signed in as `user` may do: null for everything (no rules, as Redis's default
   * user). A user this config does not have (a reload removed it) may run nothing but AUTH, HELLO,
   * QUIT and RESET, so its clients sign in again.
   */
  permissionsOf(user: string): UserPermissions | null {
    const u = this.users.get(user);
    return u === undefined ? this.removedUser : u.permissions;
  }

  /** CLIENT KILL USER: the default user always exists, as in Redis. */
  hasUser(name: string): boolean {
    return this.users.has(name);
  }

  /**
   * True when `password` is `user`'s (user null: the default user), as Redis's
   * ACLCheckUserCredentials: an unknown or disabled user never, a `nopass` one with any password.
   */
  check(user: Buffer | null, password: Buffer): boolean {
    const u = this.users.get(user === null ? DEFAULT_USER : user.toString('utf8'));
    const given = digest(password);
    let ok = false;
    // Every password is compared, each in constant time, so timing says nothing of which matched.
    for (const expected of u === undefined || u.passwords.length === 0 ? [this.decoy] : u.passwords) {
      if (crypto.timingSafeEqual(given, expected)) ok = true;
    }
    if (u === undefined || !u.enabled) return false;
    return u.nopass || (ok && u.passwords.length > 0);
  }
}

/** What AUTH reads and changes of a client session. */
export interface AuthSession {
  /** False until a good AUTH when the proxy requires one; the only thing the hot path reads. */
  authenticated: boolean;
  /** The user signed in as (CLIENT LIST's `user`). */
  user: string;
}

/** Counts failed attempts (for INFO and /metrics). */
export interface AuthCounters {
  authFailures: number;
}

/**
 * Checks `AUTH`'s or `HELLO ... AUTH`'s credentials and marks the session. A failed attempt leaves an authenticated session authenticated, as Redis does.
 */
export function authenticate(
  auth: ClientAuth,
  counters: AuthCounters,
  session: AuthSession,
  user: Buffer | null,
  password: Buffer,
): boolean {
  const ok = auth.check(user, password);
  if (ok) {
    session.authenticated = true;
    session.user = user === null ? DEFAULT_USER : user.toString('utf8');
  }
  else counters.authFailures++;
  return ok;
}
