/**
 * The sentinels of a ring config (`ring.sentinels`), asked where every master of the ring (and of
 * a migration's ring B) is, before anything is placed: a proxy at start, the `migrate` tools.
 * Their connections: `ring.sentinel`'s AUTH, and TLS as the nodes have it unless
 * `ring.sentinel.tls` says otherwise (with backend.tls's CA and certificate).
 */
import { Config } from '../../config/schema';
import { ConnectionOptions } from '../backend/connection';
import { backendTls } from '../security/tls';
import * as encode from '../resp/encode';
import { MasterAddresses, masterNames } from '../../sharding/master-addresses';
import { SentinelMasters } from './masters';

/** Where nothing is Sentinel-managed: no master has an address to offer. */
export const NO_MASTERS: MasterAddresses = () => undefined;

function connectionOptions(config: Extract<Config, { mode: 'ring' }>): ConnectionOptions {
  const s = config.ring.sentinel;
  const handshake = s?.password === undefined ? [] : [encode.command(s.username === undefined ? ['AUTH', s.password] : ['AUTH', s.username, s.password])];
  const tls = s?.tls ?? config.backend.tls !== undefined;
  return {
    connectTimeoutMs: config.backend.connectTimeoutMs,
    commandTimeoutMs: config.backend.commandTimeoutMs,
    delayMs: 0,
    handshake,
    tls: tls ? backendTls(config.backend.tls ?? { rejectUnauthorized: true }) : null,
  };
}

/**
 * The masters of `config`, each asked of the sentinels once; null for a config without
 * `ring.sentinels`. Throws when a master has neither an answer nor a configured `addr`.
 */
export async function startSentinelMasters(config: Config): Promise<SentinelMasters | null> {
  if (config.mode !== 'ring' || config.ring.sentinels === undefined) return null;
  const target = config.migration !== undefined && 'nodes' in config.migration.to ? config.migration.to.nodes : [];
  const guesses = new Map<string, string>();
  for (const n of [...config.ring.nodes, ...target]) if (n.master !== undefined && n.addr !== undefined && !guesses.has(n.master)) guesses.set(n.master, n.addr);
  const masters = new SentinelMasters(masterNames(config.ring, config.migration), guesses, {
    sentinels: config.ring.sentinels,
    connection: connectionOptions(config),
    refreshIntervalMs: config.ring.sentinel?.refreshIntervalMs ?? 5_000,
    queryTimeoutMs: config.backend.connectTimeoutMs,
  });
  try {
    await masters.start();
  } catch (err) {
    masters.stop();
    throw err;
  }
  return masters;
}
