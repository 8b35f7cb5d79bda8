/**
 * Which credentials a `migrate` tool sends to the proxies' listeners, from their config file's
 * `auth` section: `--user NAME` picks one of `auth.users`; without it, `auth.password` (the
 * default user), else the only user there is. A config with several users and no password makes
 * the operator name one: the tool never guesses which user may run `PROXY MIGRATION`.
 */
import { Config } from '../../../config/schema';

export interface ProxyCredentials {
  user?: string;
  password?: string;
}

export function proxyCredentials(auth: Config['auth'], userFlag: string | undefined): ProxyCredentials {
  const users = auth?.users ?? [];
  if (userFlag !== undefined) {
    const user = users.find((u) => u.name === userFlag);
    if (user === undefined) throw new Error(`--user ${userFlag}: not a user of the config's auth.users (${users.length === 0 ? 'it has none' : users.map((u) => u.name).join(', ')})`);
    return { user: user.name, password: user.password };
  }
  if (auth?.password !== undefined) return { password: auth.password };
  if (users.length === 1) return { user: users[0].name, password: users[0].password };
  if (users.length > 1) throw new Error(`the config has auth.users but no auth.password: name the user to AUTH as with --user NAME (one of ${users.map((u) => u.name).join(', ')}), a user allowed PROXY`);
  return {};
}
