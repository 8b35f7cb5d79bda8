/**
 * The console's routes on the /metrics listener (telemetry/metrics.ts hands it what it does not
 * serve itself): GET / and /console/* (the page's files, read once from ./page), and GET
 * /console.json (the state, state.ts). Read-only: anything but GET is not routed here.
 *
 * With `auth` users the JSON asks for one (HTTP Basic; the page has its own sign-in form, so the
 * 401 carries no WWW-Authenticate that would pop the browser's dialog) allowed to run INFO; the
 * page's files hold no state and are served to anyone who can reach the listener.
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { ProxyContext } from '../context';
import * as errors from '../resp/errors';
import { DEFAULT_USER } from '../security/auth';
import { ConsoleProbes } from './probes';
import { StateSources, buildState } from './state';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
};

/** The page runs only its own files: no inline script, nothing from elsewhere. */
const SECURITY_HEADERS = {
  'content-security-policy': "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'cache-control': 'no-store',
};

/** The page's files by URL path, read once (a few KiB). */
function loadPage(): Map<string, { type: string; body: Buffer }> {
  const dir = path.join(__dirname, 'page');
  const files = new Map<string, { type: string; body: Buffer }>();
  for (const name of fs.readdirSync(dir)) {
    const type = TYPES[path.extname(name)];
    if (type === undefined) continue;
    files.set(`/console/${name}`, { type, body: fs.readFileSync(path.join(dir, name)) });
  }
  const index = files.get('/console/index.html');
  if (index !== undefined) files.set('/', index);
  return files;
}

export type Route = (req: http.IncomingMessage, res: http.ServerResponse, route: string) => boolean;

export function consoleRoute(src: StateSources): Route {
  const files = loadPage();
  const probes = new ConsoleProbes(src.ctx);
  return (req, res, route) => {
    if (req.method !== 'GET') return false;
    const file = files.get(route);
    if (file !== undefined) {
      res.writeHead(200, { 'content-type': file.type, ...SECURITY_HEADERS }).end(file.body);
      return true;
    }
    if (route !== '/console.json') return false;
    const json = (status: number, body: unknown): void => void res.writeHead(status, { 'content-type': 'application/json', ...SECURITY_HEADERS }).end(JSON.stringify(body));
    const refused = refusal(src.ctx, req.headers.authorization);
    if (refused !== null) return json(refused.status, { error: refused.error }), true;
    probes.read().then(
      (results) => json(200, buildState(src, results)),
      (err: Error) => json(500, { error: err.message }),
    );
    return true;
  };
}

/** Null when the request may read the state; else the status and Redis's words for why not. */
export function refusal(ctx: ProxyContext, authorization: string | undefined): { status: number; error: string } | null {
  const auth = ctx.auth;
  // As a new client connection: signed in as the default user when it needs no password.
  if (!auth.requiresAuth) return null;
  const basic = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(authorization ?? '');
  if (basic === null) return { status: 401, error: errors.NOAUTH };
  const decoded = Buffer.from(basic[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  const name = colon <= 0 ? DEFAULT_USER : decoded.slice(0, colon);
  const password = colon < 0 ? decoded : decoded.slice(colon + 1);
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
