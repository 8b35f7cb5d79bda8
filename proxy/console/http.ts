/**
 * The console's routes on the /metrics listener (telemetry/metrics.ts hands it what it does not
 * serve itself): GET / and /console/* (the page's files, read once from ./page), and GET
 * /console.json (the state, state.ts). Read-only: anything but GET is not routed here.
 *
 * The JSON asks for what http-auth.ts says (HTTP Basic; the page has its own sign-in form, so the
 * 401 carries no WWW-Authenticate that would pop the browser's dialog); the page's files hold no
 * state and are served to anyone who can reach the listener.
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { MetricsAuthConfig } from '../../config/schema';
import { Refusal, httpRefusal } from './http-auth';
import { ConsoleProbes } from './probes';
import { ConsoleState, StateSources, buildState } from './state';

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

/** Where the JSON comes from: this process's state, or (under --workers) every worker's merged (cmd/worker-console.ts). */
export interface ConsoleSource {
  refusal(authorization: string | undefined): Promise<Refusal | null>;
  state(): Promise<ConsoleState>;
}

/** This process's console: its recorder's samples and its probes' answers, `auth` checked by http-auth.ts. */
export function localConsole(src: StateSources, auth: () => MetricsAuthConfig | undefined): ConsoleSource {
  const probes = new ConsoleProbes(src.ctx);
  return {
    refusal: (authorization) => Promise.resolve(httpRefusal(src.ctx, auth(), 'console', authorization)),
    state: () => probes.read().then((results) => buildState(src, results)),
  };
}

export function consoleRoute(source: ConsoleSource): Route {
  const files = loadPage();
  return (req, res, route) => {
    if (req.method !== 'GET') return false;
    const file = files.get(route);
    if (file !== undefined) {
      res.writeHead(200, { 'content-type': file.type, ...SECURITY_HEADERS }).end(file.body);
      return true;
    }
    if (route !== '/console.json') return false;
    const json = (status: number, body: unknown): void => void res.writeHead(status, { 'content-type': 'application/json', ...SECURITY_HEADERS }).end(JSON.stringify(body));
    source
      .refusal(req.headers.authorization)
      .then(async (refused) => (refused === null ? json(200, await source.state()) : json(refused.status, { error: refused.error })))
      .catch((err: Error) => json(500, { error: err.message }));
    return true;
  };
}
