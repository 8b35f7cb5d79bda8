/**
 * The back-end sections of the config schema: `cluster`, `ring` and `migration` (SPEC sections 3,
 * 6 and 8). Field names are a contract; each default is stated next to its field.
 */
import * as v from 'valibot';
import { describeInput, emptyOfWrongType, int, nonEmpty, oneOf, refine, remoteAddr, strictObject } from './schema-kit';

export const READ_FROM = ['master', 'replica', 'prefer-replica'] as const;
export type ReadFrom = (typeof READ_FROM)[number];

export const clusterSchema = strictObject({
  /** Nodes asked for the slot map; any reachable one will do. Required, at least one. */
  seeds: v.pipe(v.array(remoteAddr), v.minLength(1), emptyOfWrongType()),
  /** Where read-only commands go. Default 'master'. */
  readFrom: v.optional(oneOf(READ_FROM), 'master'),
  /** With readFrom replica: how often each replica's health and lag are checked. Default 1000. */
  replicaCheckIntervalMs: v.optional(int(100), 1_000),
  /** With readFrom replica: a replica whose last acknowledgement to its master is older is not read from. Default 2. */
  replicaMaxLagSeconds: v.optional(int(0), 2),
  /** Periodic topology refresh, on top of refreshes triggered by MOVED and lost connections. Default 10000. */
  refreshIntervalMs: v.optional(int(100), 10_000),
  /** MOVED/ASK hops for one command before its error is passed on; bounds redirect loops. Default 16. */
  maxRedirects: v.optional(int(1, 100), 16),
  /** How long TRYAGAIN, CLUSTERDOWN and connection errors are retried with backoff before the error reaches the client; 0 passes them on at once. Default 5000. */
  retryWindowMs: v.optional(int(0), 5_000),
});

/** twemproxy's key hashes, by twemproxy's names, so its pool configs carry over unchanged. */
export const HASH_NAMES = [
  'one_at_a_time',
  'md5',
  'crc16',
  'crc32',
  'crc32a',
  'fnv1_64',
  'fnv1a_64',
  'fnv1_32',
  'fnv1a_32',
  'hsieh',
  'murmur',
  'jenkins',
] as const;
export type HashName = (typeof HASH_NAMES)[number];

/** twemproxy's distributions (SPEC 6): where a ring puts each key. */
export const DISTRIBUTIONS = ['ketama', 'modula', 'random'] as const;
export type DistributionName = (typeof DISTRIBUTIONS)[number];

export const ringNodeSchema = v.pipe(
  strictObject({
    /**
     * The node's identity on the ketama continuum. Absent: twemproxy's rule applies (the address),
     * so keep names when replacing a twemproxy pool that had them, or keys move. For a node given
     * by `master`, absent means the master name (as in twemproxy's Sentinel patch). Optional.
     */
    name: v.optional(nonEmpty),
    /** A standalone Redis. Required unless `master` is given; with `master`, where it is looked for while no sentinel answers. */
    addr: v.optional(remoteAddr),
    /**
     * The node's Sentinel master name (`sentinel monitor NAME ...`): its address is asked of
     * `ring.sentinels` and followed through failovers; keys stay where the name puts them.
     * Optional: absent, `addr` is the node for good.
     */
    master: v.optional(nonEmpty),
    /** Share of the continuum relative to the other nodes. Default 1. */
    weight: v.optional(int(1), 1),
  }),
  refine((node, report) => {
    if (node.addr === undefined && node.master === undefined) report('required (or master: the Sentinel master name of the node)', 'addr');
  }),
  // A Sentinel-managed node's identity must not be its address, which a failover changes.
  v.transform((node) => (node.master !== undefined && node.name === undefined ? { ...node, name: node.master } : node)),
);
export type RingNode = v.InferOutput<typeof ringNodeSchema>;

export const ringNodesSchema = v.pipe(
  v.array(ringNodeSchema),
  v.minLength(1),
  emptyOfWrongType(),
  refine((nodes, report) => {
    // Two entries with one address (or one master) would double a server's share; two with one
    // name would collide on the continuum. All are always typos.
    for (const field of ['addr', 'master', 'name'] as const) {
      const first = new Map<string, number>();
      nodes.forEach((node, i) => {
        const value = node[field];
        if (value === undefined) return;
        const seen = first.get(value);
        if (seen === undefined) {
          first.set(value, i);
        } else {
          report(`duplicate ${field} ${describeInput(value)} (already used by nodes[${seen}])`, i, field);
        }
      });
    }
  }),
);

export const hashTagSchema = v.pipe(
  v.string((iss) => `expected 2 characters like "{}", got ${describeInput(iss.input)}`),
  // twemproxy compares single bytes, so only single-byte characters mean the same thing here.
  v.check(
    (s) => /^([\x00-\x7f]{2})?$/.test(s),
    (iss) => `expected 2 ASCII characters like "{}", got ${describeInput(iss.input)}`,
  ),
);

/**
 * A ring's fields; `hash`, `distribution` and `hashTag` are passed in: a ring's own have defaults
 * (filled in, so a config that writes a default loads the same as one that leaves it out), a
 * migration's `to` has none (absent, the current ring's).
 */
function ringShape<H extends v.GenericSchema, D extends v.GenericSchema, T extends v.GenericSchema>(hash: H, distribution: D, hashTag: T) {
  return {
    /** Key hash (twemproxy's `hash`). Default 'md5' (SPEC 6; a twemproxy pool's is fnv1a_64, config/warnings.ts); in `migration.to`, the ring's own hash. */
    hash,
    /**
     * Where keys go (twemproxy's `distribution`): 'ketama' (a consistent-hash continuum), 'modula'
     * (hash modulo the total weight) or 'random' (each request to a live node picked at random; no
     * migration from or to it). Default 'ketama'; in `migration.to`, the ring's own.
     */
    distribution,
    /** Two characters, e.g. "{}": only the part of a key between them is hashed (twemproxy's `hash_tag`). Default "{}" (SPEC 2; in `migration.to`, the ring's own); "" hashes whole keys, as twemproxy without `hash_tag`. */
    hashTag,
    /** The servers. Required, at least one; addresses and names unique. */
    nodes: ringNodesSchema,
  };
}

/**
 * How the proxy talks to `ring.sentinels` and follows their masters (proxy/sentinel/). Every field
 * is optional.
 */
export const sentinelSchema = v.pipe(
  strictObject({
    /** ACL user for the sentinels (needs `password`). Optional. */
    username: v.optional(nonEmpty),
    /** The sentinels' own password (their `requirepass`), not the nodes'. Optional: absent, no AUTH. */
    password: v.optional(nonEmpty),
    /** TLS to the sentinels, with backend.tls's CA and certificate. Optional: absent, as the nodes (TLS when backend.tls is set). */
    tls: v.optional(v.boolean()),
    /** How long a request for a master that is down waits for Sentinel to promote a replica, before it gets an error. Default 10000. */
    failoverWaitMs: v.optional(int(0), 10_000),
    /** How often every master is asked of the sentinels again, besides +switch-master, reconnects and READONLY. Default 5000. */
    refreshIntervalMs: v.optional(int(100), 5_000),
    /** Where read-only commands go: 'master', or 'replica' / 'prefer-replica' (a healthy replica the sentinels know, else the master), as cluster.readFrom. Default 'master'. */
    readFrom: v.optional(oneOf(READ_FROM), 'master'),
    /** With readFrom replica: how often each replica's health and lag are checked. Default 1000. */
    replicaCheckIntervalMs: v.optional(int(100), 1_000),
    /** With readFrom replica: a replica whose last acknowledgement to its master is older is not read from. Default 2. */
    replicaMaxLagSeconds: v.optional(int(0), 2),
  }),
  refine((s, report) => {
    if (s.username !== undefined && s.password === undefined) report('required when ring.sentinel.username is set (AUTH needs both)', 'password');
  }),
);

export const ringSchema = v.pipe(
  strictObject({
    ...ringShape(v.optional(oneOf(HASH_NAMES), 'md5'), v.optional(oneOf(DISTRIBUTIONS), 'ketama'), v.optional(hashTagSchema, '{}')),
    /** twemproxy's auto_eject_hosts: a node failing `serverFailureLimit` times in a row leaves the ring (its keys go to the others) for `serverRetryTimeoutMs`. Default false: a down node's keys get an error. Not applied during a migration. */
    autoEjectHosts: v.optional(v.boolean(), false),
    /** Consecutive connection failures that eject a node (twemproxy's server_failure_limit). Default 2. */
    serverFailureLimit: v.optional(int(1), 2),
    /** How long an ejected node stays out before it is tried again (twemproxy's server_retry_timeout). Default 30000. */
    serverRetryTimeoutMs: v.optional(int(1), 30_000),
    /** Redis Sentinels asked where the nodes given by `master` are (any one that answers will do). Required when a node has `master`. */
    sentinels: v.optional(v.pipe(v.array(remoteAddr), v.minLength(1), emptyOfWrongType())),
    /** Talking to the sentinels, and how long a failover is waited for. Optional: all defaults. */
    sentinel: v.optional(sentinelSchema),
  }),
  refine((ring, report) => {
    if (ring.sentinels !== undefined) return;
    ring.nodes.forEach((node, i) => {
      if (node.master !== undefined) report('needs ring.sentinels (the sentinels that know this master)', 'nodes', i, 'master');
    });
    if (ring.sentinel !== undefined) report('only with ring.sentinels', 'sentinel');
  }),
);

export const MIGRATION_PHASES = ['double-write', 'read-new', 'done'] as const;
export type MigrationPhase = (typeof MIGRATION_PHASES)[number];

export const MIGRATION_CARRIES = ['feeds', 'replication', 'auto'] as const;
export type MigrationCarry = (typeof MIGRATION_CARRIES)[number];

export const migrationSchema = strictObject({
  /** Where reads and writes go (SPEC section 6). Required. */
  phase: oneOf(MIGRATION_PHASES),
  /**
   * How side A's changes reach side B: `feeds` (a change feed per node of A, each changed key
   * copied with a versioned snapshot), `replication` (each node of A followed as a replica: its
   * full-sync snapshot, then its replication stream, applied on B in the node's order) or `auto`
   * (replication where every node of A allows it, else feeds; migration/carry-choice.ts).
   * Optional: absent, `feeds`.
   */
  carry: v.optional(oneOf(MIGRATION_CARRIES)),
  /**
   * With carry replication, the follower's local scratch: each followed node's full-sync snapshot,
   * and the part of its stream side B is too slow to take yet (so the link is read at full speed
   * and the node never holds more for the follower than for a replica). Optional: all defaults.
   * Taken by follows begun after a reload.
   */
  spool: v.optional(
    strictObject({
      /** Folder of the files, which are removed as soon as they are opened or read; relative to the config file's folder. Default the system's temp folder. */
      dir: v.optional(nonEmpty),
      /** Stream bytes spooled per followed node, at least 1048576; once full, the link is not read until side B catches up (the node holds the stream, as for a slow replica). Default 1073741824 (1 GiB). */
      maxBytes: v.optional(int(1_048_576), 1_073_741_824),
    }),
  ),
  /**
   * Where the keys go. Required: a ring (`nodes`, with `hash` and `hashTag` defaulting to the current
   * ring's) or a Redis Cluster (`cluster: { seeds }`), one of the two (checked in checkSections).
   */
  to: strictObject({
    ...ringShape(v.optional(oneOf(HASH_NAMES)), v.optional(oneOf(DISTRIBUTIONS)), v.optional(hashTagSchema)),
    nodes: v.optional(ringNodesSchema),
    /** A Redis Cluster: nodes asked for its slot map, any reachable one will do. */
    cluster: v.optional(strictObject({ seeds: v.pipe(v.array(remoteAddr), v.minLength(1), emptyOfWrongType()) })),
  }),
});
