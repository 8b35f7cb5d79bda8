/**
 * Client authentication (SPEC section 7): `auth.password` is the default user's password, as
 * Redis's `requirepass`; `auth.users` are ACL-style users for `AUTH name password` and
 * `HELLO 2 AUTH name password`.
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
import { UserPermissions, compilePermissions } from './permissions';

/** `AUTH password` authenticates the user Redis calls `default`. */
export const DEFAULT_USER = 'default';

function digest(secret: Buffer | string): Buffer {
  return crypto.createHash('sha256').update(secret).digest();
}

export class ClientAuth {
  /** User name -> digest of its password. Keys are the names as configured (case-sensitive, as in Redis). */
  private readonly users = new Map<string, Buffer>();
  /** Compared against for unknown users, so that they take as long as known ones. */
  private readonly decoy = digest(crypto.randomBytes(32));
  /** Users with `commands`, `keys` or `channels` rules; the others may do everything. */
  private readonly permissions = new Map<string, UserPermissions>();
  private readonly removedUser = UserPermissions.none();

  /**
   * Throws a ConfigError when a user's rules name a command `backend.table` does not have (the
   * proxy always passes its command table and mode; tests of passwords alone may leave it out).
   */
  constructor(config: AuthConfig, backend?: { table: CommandTable; mode: 'cluster' | 'ring' }) {
    if (config.password !== undefined) this.users.set(DEFAULT_USER, digest(config.password));
    (config.users ?? []).forEach((u, i) => {
      this.users.set(u.name, digest(u.password));
      const permissions = compilePermissions(u, i, backend?.table, backend?.mode === 'cluster');
      if (permissions !== null) this.permissions.set(u.name, permissions);
    });
  }

  /** Null when the config has no `auth` section: clients are authenticated from the start. */
  static fromConfig(config: AuthConfig | undefined, table: CommandTable, mode: 'cluster' | 'ring'): ClientAuth | null {
    return config === undefined ? null : new ClientAuth(config, { table, mode });
  }

  /**
   * What a session signed in as `user` may do: null for everything (no rules, as Redis's default
   * user). A user this config does not have (a reload removed it) may run nothing but AUTH, HELLO,
   * QUIT and RESET, so its clients sign in again.
   */
  permissionsOf(user: string): UserPermissions | null {
    if (!this.hasUser(user)) return this.removedUser;
    return this.permissions.get(user) ?? null;
  }

  /** CLIENT KILL USER: the default user always exists, as in Redis. */
  hasUser(name: string): boolean {
    return name === DEFAULT_USER || this.users.has(name);
  }

  /** True when `password` is `user`'s (user null: the default user). */
  check(user: Buffer | null, password: Buffer): boolean {
    const name = user === null ? DEFAULT_USER : user.toString('utf8');
    const expected = this.users.get(name);
    const ok = crypto.timingSafeEqual(digest(password), expected ?? this.decoy);
    return ok && expected !== undefined;
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
 * Checks `AUTH`'s or `HELLO ... AUTH`'s credentials and marks the session. With no `auth` section,
 * behaves as a Redis whose default user has no password: the default user accepts anything,
 * no other user exists. A failed attempt leaves an authenticated session authenticated, as Redis does.
 */
export function authenticate(
  auth: ClientAuth | null,
  counters: AuthCounters,
  session: AuthSession,
  user: Buffer | null,
  password: Buffer,
): boolean {
  const ok = auth === null ? user === null || user.toString('utf8') === DEFAULT_USER : auth.check(user, password);
  if (ok) {
    session.authenticated = true;
    session.user = user === null ? DEFAULT_USER : user.toString('utf8');
  }
  else counters.authFailures++;
  return ok;
}
