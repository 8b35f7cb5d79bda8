/**
 * A nutcracker.yml pool's fields checked as nutcracker 0.5.0 checks them (`nutcracker -t`): only
 * its own field names, numbers and booleans as it reads them (its YAML scalars are text, so
 * `timeout: "400"` and `preconnect: "true"` are as good as unquoted), and no two pools on one
 * listen. A problem names the pool and the field.
 */
import { TwemproxyConfigError } from './twemproxy-error';

/** nutcracker 0.5.0's pool fields (nc_conf.c's conf_commands), and the Sentinel patch's. */
const FIELDS = [
  'listen',
  'hash',
  'hash_tag',
  'distribution',
  'timeout',
  'backlog',
  'client_connections',
  'redis',
  'tcpkeepalive',
  'redis_auth',
  'redis_db',
  'preconnect',
  'auto_eject_hosts',
  'server_connections',
  'server_retry_timeout',
  'server_failure_limit',
  'servers',
  // twemproxy's Sentinel patch (config/twemproxy.ts)
  'sentinels',
] as const;

const BOOLEANS = new Set(['redis', 'tcpkeepalive', 'preconnect', 'auto_eject_hosts']);
/** Whole numbers of at least 0; server_connections at least 1. */
const NUMBERS = new Set(['timeout', 'backlog', 'client_connections', 'redis_db', 'server_connections', 'server_retry_timeout', 'server_failure_limit']);

/** A boolean field's value (true/false, or their text), else a TwemproxyConfigError. */
function asBoolean(where: string, field: string, value: unknown): boolean {
  if (value === true || value === 'true') return true;
  if (value === false || value === 'false') return false;
  throw new TwemproxyConfigError(`${where}: ${field}: expected true or false, got ${JSON.stringify(value)}`);
}

/** A number field's value (a whole number, or its digits as text), else a TwemproxyConfigError. */
function asNumber(where: string, field: string, value: unknown): number {
  const n = typeof value === 'number' ? value : typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : NaN;
  const least = field === 'server_connections' ? 1 : 0;
  if (!Number.isSafeInteger(n) || n < least) throw new TwemproxyConfigError(`${where}: ${field}: expected a whole number of at least ${least}, got ${JSON.stringify(value)}`);
  return n;
}

/**
 * The pool's fields as nutcracker reads them: booleans and numbers as such, the rest as they are.
 * Throws on a field nutcracker does not have or a value it would refuse.
 */
export function checkPoolFields(pool: string, p: Record<string, unknown>): Record<string, unknown> {
  const where = `pool ${pool}`;
  const out: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(p)) {
    if (!(FIELDS as readonly string[]).includes(field)) throw new TwemproxyConfigError(`${where}: unknown field ${field} (nutcracker's are ${FIELDS.join(', ')})`);
    if (BOOLEANS.has(field)) out[field] = asBoolean(where, field, value);
    else if (NUMBERS.has(field)) out[field] = asNumber(where, field, value);
    else out[field] = value;
  }
  return out;
}

/** No two pools on one listen (nutcracker refuses the file). */
export function checkListens(pools: { pool: string; listen: unknown }[]): void {
  const seen = new Map<string, string>();
  for (const { pool, listen } of pools) {
    const key = String(listen);
    const other = seen.get(key);
    if (other !== undefined) throw new TwemproxyConfigError(`pool ${pool}: listen ${key} is pool ${other}'s too`);
    seen.set(key, pool);
  }
}
