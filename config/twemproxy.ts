/**
 * A twemproxy (nutcracker) config -> one slotproxy ring config per pool, placing every key where
 * that pool does: same servers, names, weights, `hash`, `hash_tag` and `distribution` (a random
 * pool's requests go to a random live server in both). Only what keeps placement and behaviour is
 * carried over; settings slotproxy does without are named in `notes`.
 */
import * as v from 'valibot';
import { isScalar, parseDocument } from 'yaml';
import { DISTRIBUTIONS, HASH_NAMES, HashName, configSchema } from './schema';
import { TwemproxyConfigError } from './twemproxy-error';
import { checkListens, checkPoolFields } from './twemproxy-fields';

export interface ConvertedPool {
  pool: string;
  /** The slotproxy config, ready to be written as YAML or JSON. */
  config: Record<string, unknown>;
  /** Settings that were not carried over, and why. */
  notes: string[];
}

export { TwemproxyConfigError };

/** twemproxy's defaults (nc_conf.h). */
const DEFAULT_HASH: HashName = 'fnv1a_64';

/** `host:port:weight [name]`, as nutcracker reads it (the last two colons split port and weight). */
export function parseServerLine(line: string): { addr: string; weight: number; name?: string } {
  const trimmed = line.trim();
  const space = trimmed.indexOf(' ');
  const spec = space < 0 ? trimmed : trimmed.slice(0, space);
  const name = space < 0 ? undefined : trimmed.slice(space + 1).trim();
  if (spec.startsWith('/')) throw new TwemproxyConfigError(`server "${line}": unix socket servers are not supported`);
  const m = /^(.+):(\d+):(\d+)$/.exec(spec);
  if (m === null) throw new TwemproxyConfigError(`server "${line}": expected host:port:weight [name]`);
  const weight = Number(m[3]);
  if (weight < 1) throw new TwemproxyConfigError(`server "${line}": weight must be at least 1`);
  return { addr: `${m[1]}:${m[2]}`, weight, ...(name !== undefined && name !== '' ? { name } : {}) };
}

/**
 * A pool's `sentinels:` entry in twemproxy's Sentinel patch (twitter/twemproxy#324 and its forks):
 * `host:port:weight` like a server line (the weight means nothing there), or `host:port`.
 */
export function parseSentinelLine(line: string): string {
  const m = /^(.+?):(\d+)(?::\d+)?$/.exec(line.trim());
  if (m === null) throw new TwemproxyConfigError(`sentinel "${line}": expected host:port:weight or host:port`);
  return `${m[1]}:${m[2]}`;
}

/**
 * The servers of a pool: with `sentinels:` (the Sentinel patch) each server's name is its Sentinel
 * master name, and its address only where to look while no sentinel answers.
 */
function serversOf(where: string, servers: unknown[], sentinels: unknown): { nodes: Record<string, unknown>[]; sentinels?: string[] } {
  const nodes = servers.map((s) => {
    try {
      return parseServerLine(String(s));
    } catch (err) {
      throw err instanceof TwemproxyConfigError ? new TwemproxyConfigError(`${where}: ${err.message}`) : err;
    }
  });
  if (sentinels === undefined || sentinels === null) return { nodes };
  if (!Array.isArray(sentinels) || sentinels.length === 0) throw new TwemproxyConfigError(`${where}: sentinels must be a non-empty list`);
  return {
    nodes: nodes.map(({ name, addr, weight }) => {
      if (name === undefined) throw new TwemproxyConfigError(`${where}: server "${addr}": a pool with sentinels names each server by its Sentinel master name (host:port:weight NAME)`);
      return { master: name, addr, weight };
    }),
    sentinels: sentinels.map((s) => parseSentinelLine(String(s))),
  };
}

const IGNORED: Record<string, string> = {
  preconnect: 'slotproxy connects on first use',
  backlog: 'the OS default is used',
  client_connections: 'use limits.maxClients',
  tcpkeepalive: 'not configurable',
};

export function convertTwemproxy(text: string): ConvertedPool[] {
  const document = parseDocument(text);
  const doc: unknown = document.toJS();
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) {
    throw new TwemproxyConfigError('expected a mapping of pool names to pools');
  }
  const out: ConvertedPool[] = [];
  for (const [pool, value] of Object.entries(doc as Record<string, unknown>)) {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new TwemproxyConfigError(`pool ${pool}: expected a mapping`);
    // twemproxy reads redis_auth as text: `redis_auth: 12345` is the password "12345", not a number.
    const auth = document.getIn([pool, 'redis_auth'], true);
    const redisAuth = isScalar(auth) ? (auth.source ?? String(auth.value)) : undefined;
    out.push(convertPool(pool, checkPoolFields(pool, value as Record<string, unknown>), redisAuth));
  }
  if (out.length === 0) throw new TwemproxyConfigError('no pools found');
  checkListens(out.map(({ pool, config }) => ({ pool, listen: config.listen })));
  return out;
}

function convertPool(pool: string, p: Record<string, unknown>, redisAuth: string | undefined): ConvertedPool {
  const notes: string[] = [];
  const where = `pool ${pool}`;
  if (p.redis !== true) throw new TwemproxyConfigError(`${where}: only redis pools (redis: true) can be served by slotproxy`);
  const distribution = String(p.distribution ?? 'ketama');
  if (!(DISTRIBUTIONS as readonly string[]).includes(distribution)) throw new TwemproxyConfigError(`${where}: unknown distribution ${distribution} (twemproxy has ${DISTRIBUTIONS.join(', ')})`);
  const hash = (p.hash ?? DEFAULT_HASH) as string;
  if (!(HASH_NAMES as readonly string[]).includes(hash)) throw new TwemproxyConfigError(`${where}: unknown hash ${hash}`);
  if (p.redis_db !== undefined && p.redis_db !== 0) throw new TwemproxyConfigError(`${where}: redis_db ${String(p.redis_db)}: slotproxy serves database 0 only`);
  if (typeof p.listen !== 'string' || p.listen.startsWith('/')) throw new TwemproxyConfigError(`${where}: listen must be host:port`);
  if (!Array.isArray(p.servers) || p.servers.length === 0) throw new TwemproxyConfigError(`${where}: servers must be a non-empty list`);
  const hashTag = p.hash_tag === undefined ? '' : String(p.hash_tag);
  const { nodes, sentinels } = serversOf(where, p.servers, p.sentinels);

  const config: Record<string, unknown> = {
    listen: p.listen,
    mode: 'ring',
    // nutcracker splits MGET, MSET, DEL, UNLINK, EXISTS and TOUCH over the servers of their keys.
    crossSlot: 'split',
    ring: {
      hash,
      hashTag,
      ...(distribution === 'ketama' ? {} : { distribution }),
      nodes,
      ...(sentinels === undefined ? {} : { sentinels }),
      ...(p.auto_eject_hosts === true ? { autoEjectHosts: true } : {}),
      ...(typeof p.server_failure_limit === 'number' ? { serverFailureLimit: p.server_failure_limit } : {}),
      ...(typeof p.server_retry_timeout === 'number' ? { serverRetryTimeoutMs: p.server_retry_timeout } : {}),
    },
  };
  // nutcracker 0.5.0 refuses an empty value ("syntax is invalid"); so does the import.
  if (redisAuth === '') throw new TwemproxyConfigError(`${where}: redis_auth is empty (twemproxy refuses it too); remove it for no AUTH`);
  const backend: Record<string, unknown> = {};
  if (redisAuth !== undefined) backend.password = redisAuth;
  // nutcracker's timeout cuts off a request behind a busy script too, whatever its value.
  if (typeof p.timeout === 'number' && p.timeout > 0) Object.assign(backend, { commandTimeoutMs: p.timeout, timeoutBehindScripts: true });
  if (typeof p.server_connections === 'number' && p.server_connections > 0) backend.connectionsPerNode = Math.min(64, p.server_connections);
  if (Object.keys(backend).length > 0) config.backend = backend;
  if (redisAuth !== undefined) {
    config.auth = { password: redisAuth };
    notes.push('redis_auth: used for clients (auth.password) and for the nodes (backend.password), as twemproxy does');
  }
  if (sentinels !== undefined) notes.push('sentinels: each server follows its Sentinel master (named by the server\'s name) through failovers; its address is used only while no sentinel answers');
  if (distribution === 'random') notes.push('distribution random: every request goes to a live server picked at random, as in twemproxy, so a key read back may be missed');
  for (const [field, why] of Object.entries(IGNORED)) if (p[field] !== undefined) notes.push(`${field}: not carried over (${why})`);

  // The result must be a config slotproxy accepts; a failure here is a bug in this converter.
  const checked = v.safeParse(configSchema, config);
  if (!checked.success) throw new TwemproxyConfigError(`${where}: converted config is invalid: ${checked.issues.map((i) => `${(i.path ?? []).map((p) => p.key).join('.')}: ${i.message}`).join('; ')}`);
  return { pool, config, notes };
}
