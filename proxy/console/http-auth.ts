/**
 * Who may read the HTTP listener's state: /metrics and /console.json (config `metrics.auth`).
 * HTTP Basic, checked as a new client connection would be: `users`, a user of `auth` (or the
 * default user's password) whose rules allow INFO; `{ password }`, that password under any name.
 * Without `metrics.auth`, /metrics is open and /console.json asks for a user only when the proxy
 * has `auth` (so a Prometheus that scrapes a proxy with users keeps working).
 */
import { timingSafeEqual, createHash } from 'node:crypto';
import { MetricsAuthConfig } from '../../config/schema';
import { ProxyContext } from '../context';
import * as errors from '../resp/errors';
import { DEFAULT_USER } from '../security/auth';

/** Why a request may not read what it asked for: the HTTP status and Redis's words. */
export interface Refusal {
  status: 401 | 403;
  error: string;
}

/** What is asked for: Prometheus's text, or the console's JSON. */
export type HttpScope = 'metrics' | 'console';

interface BasicCredentials {
  name: string;
  password: string;
}

function basicCredentials(authorization: string | undefined): BasicCredentials | null {
  const basic = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(authorization ?? '');
  if (basic === null) return null;
  const decoded = Buffer.from(basic[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return { name: colon <= 0 ? DEFAULT_USER : decoded.slice(0, colon), password: colon < 0 ? decoded : decoded.slice(colon + 1) };
}

/** Equal strings, in a time that does not tell how much of them matched. */
function samePassword(a: string, b: string): boolean {
  const digest = (s: string): Buffer => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(a), digest(b));
}

/** Null when the request may read `scope`; else the status and why not. */
export function httpRefusal(ctx: ProxyContext, auth: MetricsAuthConfig | undefined, scope: HttpScope, authorization: string | undefined): Refusal | null {
  if (auth === undefined && (scope === 'metrics' || !ctx.auth.requiresAuth)) return null;
  const credentials = basicCredentials(authorization);
  if (typeof auth === 'object') {
    if (credentials === null) return { status: 401, error: errors.NOAUTH };
    if (samePassword(credentials.password, auth.password)) return null;
    ctx.stats.authFailures++;
    return { status: 401, error: errors.WRONGPASS };
  }
  return userRefusal(ctx, credentials);
}

/** As a new client connection: the default user when it needs no password, else AUTH's check, then INFO's permission. */
function userRefusal(ctx: ProxyContext, credentials: BasicCredentials | null): Refusal | null {
  const auth = ctx.auth;
  if (!auth.requiresAuth) return null;
  if (credentials === null) return { status: 401, error: errors.NOAUTH };
  const { name, password } = credentials;
  if (!auth.check(Buffer.from(name), Buffer.from(password))) {
    ctx.stats.authFailures++;
    return { status: 401, error: errors.WRONGPASS };
  }
  const info = ctx.table.get('info');
  const permissions = auth.permissionsOf(name);
  if (info !== undefined && permissions !== null && permissions.check(info, [Buffer.from('INFO')]) !== null) {
    ctx.stats.aclDenied.command++;
    return { status: 403, error: errors.nopermCommand('info') };
  }
  return null;
}
