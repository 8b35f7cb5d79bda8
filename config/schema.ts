/**
 * The one schema of slotproxy's config file (SPEC sections 7 and 8).
 *
 * Field names are a contract with users and scripts: add fields, never rename them. Every object is
 * strict, so a misspelt key is an "unknown field" error instead of a silently ignored setting.
 * Each option's default is stated next to it; `Config` is the parsed output, defaults applied,
 * narrowed by `mode` so that `cfg.mode === 'ring'` guarantees `cfg.ring`.
 *
 * Messages for ordinary type/range problems are worded by config/load.ts; only messages that need
 * knowledge of the field live here (what it holds, its choices, the fields of its mapping).
 */
import * as v from 'valibot';
import { Report, int, isMapping, listenAddr, nonEmpty, oneOf, reporter, strictObject } from './schema-kit';
import { DistributionName, HashName, MigrationCarry, MigrationPhase, clusterSchema, migrationSchema, ringSchema } from './schema-backends';
import { authSchema, backendSchema, backendTlsSchema, clientTlsSchema, limitsSchema, userSchema } from './schema-connections';
import { checkMetricsAuth, metricsSchema } from './schema-metrics';

// What other files import from the schema, wherever its section lives.
export { describeInput, parseHostPort } from './schema-kit';
export type { HostPort } from './schema-kit';
export { DISTRIBUTIONS, HASH_NAMES, MIGRATION_PHASES, READ_FROM } from './schema-backends';
export type { DistributionName, HashName, MigrationCarry, MigrationPhase, ReadFrom, RingNode } from './schema-backends';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

// A default given to v.optional is validated like a value from the file, so `{}` gets every default inside.
const flatSchema = strictObject({
  /** Where clients connect. Loopback unless told otherwise; IPv6 as "[::1]:7777". Default "127.0.0.1:7777". */
  listen: v.optional(listenAddr, '127.0.0.1:7777'),
  /** Back end: a Redis Cluster, or standalone nodes on a ketama ring. Default 'cluster'. */
  mode: v.optional(oneOf(['cluster', 'ring']), 'cluster'),
  /** Cluster back end. Required in cluster mode, refused in ring mode. */
  cluster: v.optional(clusterSchema),
  /** Ring back end. Required in ring mode, refused in cluster mode. */
  ring: v.optional(ringSchema),
  /** A migration from the back end (`ring` or `cluster`) to `migration.to` (a ring or a cluster). Optional: absent, no migration. */
  migration: v.optional(migrationSchema),
  /** Multi-key commands spanning slots (or ring nodes): refused with CROSSSLOT as Redis Cluster does, or split per node (MGET/MSET/DEL/EXISTS/UNLINK/TOUCH only). Default 'refuse'. */
  crossSlot: v.optional(oneOf(['refuse', 'split']), 'refuse'),
  /** Lua files, or folders of *.lua, preloaded on every master. Relative paths are resolved against the config file's folder by loadConfigFile. Default []. */
  scripts: v.optional(v.array(nonEmpty), []),
  /** Client authentication. Optional: absent, clients need no AUTH. */
  auth: v.optional(authSchema),
  /** TLS for clients on `listen`. Optional: absent, plain TCP. */
  tls: v.optional(clientTlsSchema),
  /** Connections to the Redis nodes. Default: all defaults. */
  backend: v.optional(backendSchema, {}),
  /** Protection against clients that are too big, too many, or too slow. Default: all defaults. */
  limits: v.optional(limitsSchema, {}),
  /** Prometheus `/metrics` endpoint and the console, with their HTTP Basic and TLS (schema-metrics.ts). Optional: absent, no endpoint. */
  metrics: v.optional(metricsSchema),
  /**
   * nutcracker's stats port: every connection gets nutcracker's stats JSON and is closed
   * (proxy/telemetry/nutcracker-stats.ts). `listen`: required, host:port. `intervalMs`: how often the
   * JSON is rebuilt, as nutcracker's -i; default 30000. `pool`: the pool's name in the JSON for a
   * slotproxy config (a nutcracker.yml's pools keep their names); default "slotproxy".
   * Optional: absent, no stats port (`slotproxy nutcracker -s/-a` sets it).
   */
  stats: v.optional(strictObject({ listen: listenAddr, intervalMs: v.optional(int(1, 3_600_000), 30_000), pool: v.optional(nonEmpty, 'slotproxy') })),
  /**
   * Structured logging. Default: all defaults. `file`: append JSON lines to this file instead of
   * stderr, reopened on SIGUSR1 and SIGHUP (logrotate); relative to the config file's folder.
   * Optional: absent, stderr.
   */
  log: v.optional(strictObject({ level: v.optional(oneOf(LOG_LEVELS), 'info'), file: v.optional(nonEmpty) }), {}),
  /** Processes serving clients. Default 1. */
  workers: v.optional(int(1), 1),
});
type FlatConfig = v.InferOutput<typeof flatSchema>;

export type ClusterConfig = v.InferOutput<typeof clusterSchema>;
export type RingConfig = v.InferOutput<typeof ringSchema>;
type MigrationTargetInput = v.InferOutput<typeof migrationSchema>['to'];
export type MigrationSpool = NonNullable<v.InferOutput<typeof migrationSchema>['spool']>;
/** Side B as a ring. */
export type RingTarget = { hash: HashName; hashTag?: string; distribution?: DistributionName; nodes: NonNullable<MigrationTargetInput['nodes']> };
/** Side B as a Redis Cluster. */
export type ClusterTarget = { cluster: NonNullable<MigrationTargetInput['cluster']> };
export type MigrationConfig = {
  phase: MigrationPhase;
  carry?: MigrationCarry;
  spool?: MigrationSpool;
  to: RingTarget | ClusterTarget;
};
export type AuthConfig = v.InferOutput<typeof authSchema>;
export type UserConfig = v.InferOutput<typeof userSchema>;
export type BackendConfig = v.InferOutput<typeof backendSchema>;
export type LimitsConfig = v.InferOutput<typeof limitsSchema>;
export type ClientTlsConfig = v.InferOutput<typeof clientTlsSchema>;
export type BackendTlsConfig = v.InferOutput<typeof backendTlsSchema>;
export type { MetricsAuthConfig, MetricsConfig } from './schema-metrics';

type CommonConfig = Omit<FlatConfig, 'mode' | 'cluster' | 'ring' | 'migration'>;
export type ClusterModeConfig = CommonConfig & {
  mode: 'cluster';
  cluster: ClusterConfig;
  ring?: undefined;
  migration?: MigrationConfig;
};
export type RingModeConfig = CommonConfig & {
  mode: 'ring';
  ring: RingConfig;
  migration?: MigrationConfig;
  cluster?: undefined;
};

interface SectionsView {
  metrics?: unknown;
  auth?: unknown;
  mode?: unknown;
  cluster?: unknown;
  ring?: unknown;
  migration?: unknown;
}

/**
 * Runs even when other fields are broken (see `configSchema` below), so that a misplaced section is
 * reported together with everything else; hence it reads its input as unknown.
 */
function checkSections(c: SectionsView, report: Report): void {
  checkMetricsAuth(c, report);
  const { mode } = c;
  if (mode !== 'cluster' && mode !== 'ring') return;
  const other = mode === 'cluster' ? 'ring' : 'cluster';
  if (c[mode] === undefined) {
    report(`${mode} mode needs a "${mode}" section`, 'mode');
  }
  if (c[other] !== undefined) {
    report(`only allowed in ${other} mode (mode is "${mode}")`, other);
  }
  const to = isMapping(c.migration) ? (c.migration as { to?: unknown }).to : undefined;
  if (isMapping(to)) {
    const t = to as Record<string, unknown>;
    if (t.nodes !== undefined && t.cluster !== undefined) report('give either nodes (a ring) or cluster (a Redis Cluster), not both', 'migration', 'to');
    else if (t.nodes === undefined && t.cluster === undefined) report('needs nodes (a ring) or cluster: { seeds: [...] } (a Redis Cluster)', 'migration', 'to');
    else if (t.cluster !== undefined) {
      for (const field of ['hash', 'hashTag', 'distribution'] as const) {
        if (t[field] !== undefined) report('only for a ring (a Redis Cluster hashes keys to slots)', 'migration', 'to', field);
      }
    }
  }
}

function toModeConfig(c: FlatConfig, report: Report): ClusterModeConfig | RingModeConfig | undefined {
  const { mode, cluster, ring, migration, ...common } = c;
  let target: MigrationConfig | undefined;
  if (migration !== undefined) {
    const t = migration.to;
    let to: RingTarget | ClusterTarget;
    if (t.cluster !== undefined) to = { cluster: t.cluster };
    else if (t.nodes !== undefined) {
      to = {
        hash: t.hash ?? ring?.hash ?? 'md5',
        ...(t.hashTag === undefined ? {} : { hashTag: t.hashTag }),
        ...(t.distribution === undefined ? {} : { distribution: t.distribution }),
        nodes: t.nodes,
      };
    } else {
      report('needs nodes (a ring) or cluster: { seeds: [...] } (a Redis Cluster)', 'migration', 'to');
      return undefined;
    }
    // A random ring has no key -> node function: nothing could say which keys move, or where to.
    if (ring?.distribution === 'random') {
      report('a random ring cannot be migrated from: it places no key on a node of its own (use ketama or modula)', 'ring', 'distribution');
      return undefined;
    }
    if (t.distribution === 'random') {
      report('a migration cannot go to a random ring: it places no key on a node of its own (use ketama or modula)', 'migration', 'to', 'distribution');
      return undefined;
    }
    target = { phase: migration.phase, ...(migration.carry === undefined ? {} : { carry: migration.carry }), ...(migration.spool === undefined ? {} : { spool: migration.spool }), to };
  }
  if (!sentinelsMatch(ring, target, report)) return undefined;
  const withMigration = target === undefined ? {} : { migration: target };
  if (mode === 'cluster' && cluster !== undefined) return { ...common, mode, cluster, ...withMigration };
  if (mode === 'ring' && ring !== undefined) return { ...common, mode, ring, ...withMigration };
  // checkSections has reported this already, and a pipe does not run its transform after issues.
  report(`${mode} mode needs a "${mode}" section`, 'mode');
  return undefined;
}

/** Nodes given by their Sentinel master name need `ring.sentinels`, and sentinels need such a node. */
function sentinelsMatch(ring: RingConfig | undefined, migration: MigrationConfig | undefined, report: Report): boolean {
  const targetNodes = migration !== undefined && 'nodes' in migration.to ? migration.to.nodes : [];
  const managed = [...(ring?.nodes ?? []), ...targetNodes].some((n) => n.master !== undefined);
  let ok = true;
  if (ring?.sentinels === undefined) {
    targetNodes.forEach((n, i) => {
      if (n.master === undefined) return;
      report('needs ring.sentinels (the sentinels that know this master)', 'migration', 'to', 'nodes', i, 'master');
      ok = false;
    });
  } else if (!managed) {
    report('no ring node is given by its Sentinel master name (master: NAME) in ring.nodes or migration.to.nodes', 'ring', 'sentinels');
    ok = false;
  }
  return ok;
}

export const configSchema = v.pipe(
  flatSchema,
  // Unlike `refine`, this runs whatever else is wrong, as long as the config is a mapping.
  v.rawCheck(({ dataset, addIssue }) => {
    if (isMapping(dataset.value)) checkSections(dataset.value as SectionsView, reporter(dataset.value, addIssue));
  }),
  v.rawTransform(({ dataset, addIssue, NEVER }) => toModeConfig(dataset.value, reporter(dataset.value, addIssue)) ?? NEVER),
);

/** What a config file may hold (defaults not yet applied). */
export type ConfigInput = v.InferInput<typeof configSchema>;
/** A validated config, defaults applied. */
export type Config = v.InferOutput<typeof configSchema>;
