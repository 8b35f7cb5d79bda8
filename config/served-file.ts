/**
 * The file `slotproxy start -c FILE` serves: a slotproxy config (one proxy), or a twemproxy
 * nutcracker.yml as it is (one proxy per pool, each config from config/twemproxy.ts). A
 * nutcracker.yml is recognised by its shape: a mapping of pool names whose every value is a mapping
 * with `listen:` or `servers:` (a slotproxy config has a string `listen` and no pools).
 */
import { ConfigError, ConfigOverrides, applyOverrides, configFromSource, parseConfig, readConfigSource } from './load';
import { Config } from './schema';
import { configWarnings } from './warnings';
import { ConvertedPool, TwemproxyConfigError, convertTwemproxy } from './twemproxy';

export interface ServedConfig {
  /** The twemproxy pool's name; null for a slotproxy config. */
  pool: string | null;
  config: Config;
  /** What the file leaves to a default that may be a trap (config/warnings.ts): said, not refused. */
  warnings: string[];
}

function isMapping(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * A nutcracker.yml's shape: every top-level value a pool with `listen` or `servers`, no slotproxy
 * `mode`. One of the two is enough, so that a pool missing the other is told so as a pool.
 */
export function isTwemproxyShape(raw: unknown): boolean {
  if (!isMapping(raw) || typeof raw.mode === 'string') return false;
  const pools = Object.values(raw);
  return pools.length > 0 && pools.every((p) => isMapping(p) && ('listen' in p || 'servers' in p));
}

/**
 * Reads `file` and returns the config of every proxy it asks for, flags applied. Every problem is
 * a ConfigError naming the file (a twemproxy one prefixed with its pool, as convertTwemproxy says it).
 */
export function loadServedFile(file: string, overrides: ConfigOverrides): ServedConfig[] {
  const { text, raw } = readConfigSource(file);
  if (!isTwemproxyShape(raw)) return [{ pool: null, config: applyOverrides(configFromSource(file, raw), overrides), warnings: configWarnings(raw) }];
  const refused: string[] = [];
  if (overrides.listen !== undefined) refused.push('--listen: a nutcracker.yml sets each pool\'s listen; change it in the file');
  if (overrides.seeds !== undefined) refused.push('--seeds: a nutcracker.yml is served in ring mode, which has no seeds');
  if (refused.length > 0) throw new ConfigError(refused, file);
  let pools: ConvertedPool[];
  try {
    pools = convertTwemproxy(text);
  } catch (err) {
    if (err instanceof TwemproxyConfigError) throw new ConfigError([err.message], file);
    throw err;
  }
  return pools.map(({ pool, config }) => {
    try {
      return { pool, config: applyOverrides(parseConfig(config), overrides), warnings: [] };
    } catch (err) {
      if (err instanceof ConfigError) throw new ConfigError(err.problems.map((p) => `pool ${pool}: ${p}`), file);
      throw err;
    }
  });
}
