/**
 * The one schema of slotproxy's config file (SPEC sections 7 and 8).
 *
 * Field names are a contract with users and scripts: add fields, never rename them. Every object is
 * strict, so a misspelt key is an "unknown field" error instead of a silently ignored setting.
 * Each option's default is stated next to it; `Config` is the parsed output, defaults applied,
 * narrowed by `mode` so that `cfg.mode === 'ring'` guarantees `cfg.ring`.
 *
 * Messages for ordinary type/range problems are worded by config/load.ts; only messages that need
 * knowledge of the field live here.
 */
import { isIPv6 } from 'node:net';
import { z } from 'zod';
import { RulesInput, parseChannelRules, parseCommandRules, parseKeyRules } from './acl-rules';

export interface HostPort {
  /** Without brackets for IPv6, as `net.connect` and `server.listen` want it. */
  host: string;
  port: number;
}

// Unbracketed hosts are names or IPv4 literals; a bare IPv6 literal is ambiguous ("::1:7777").
const HOSTNAME = /^[A-Za-z0-9._-]+$/;
const PORT = /^[0-9]{1,5}$/;

/** A JSON-ish rendering of a user's value for error messages: `"localhost"`, `7777`, `null`. */
export function describeInput(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a mapping';
  if (typeof v === 'string') return JSON.stringify(v.length > 80 ? `${v.slice(0, 77)}...` : v);
  if (typeof v === 'bigint') return `${v.toString()}n`;
  return String(v);
}

/** The reason `s` is not a host:port (`minPort` 0 allows an ephemeral listen port), or the parts. */
function splitHostPort(s: string, minPort: number): HostPort | string {
  const expected = `expected host:port, got ${describeInput(s)}`;
  let host: string;
  let portText: string;
  if (s.startsWith('[')) {
    const close = s.indexOf(']');
    if (close < 0 || s[close + 1] !== ':') return expected;
    host = s.slice(1, close);
    portText = s.slice(close + 2);
    if (!isIPv6(host)) return `expected [IPv6]:port, got ${describeInput(s)}`;
  } else {
    const colon = s.lastIndexOf(':');
    if (colon < 0) return expected;
    host = s.slice(0, colon);
    portText = s.slice(colon + 1);
    if (host.includes(':')) {
      return `expected host:port (write IPv6 as [::1]:7777), got ${describeInput(s)}`;
    }
    if (!HOSTNAME.test(host)) return expected;
  }
  if (!PORT.test(portText)) return expected;
  const port = Number(portText);
  if (port < minPort || port > 65535) {
    return `expected host:port with a port from ${minPort} to 65535, got ${describeInput(s)}`;
  }
  return { host, port };
}

/**
 * Splits "host:port" or "[v6]:port". Throws on anything else; the config schema has already
 * rejected bad addresses, so a throw here means a caller skipped validation.
 */
export function parseHostPort(s: string): HostPort {
  const r = splitHostPort(s, 0);
  if (typeof r === 'string') throw new Error(r);
  return r;
}

function hostPort(minPort: number) {
  return z
    .string({
      error: (iss) =>
        iss.input === undefined ? 'required' : `expected host:port, got ${describeInput(iss.input)}`,
    })
    .superRefine((s, ctx) => {
      const r = splitHostPort(s, minPort);
      if (typeof r === 'string') ctx.addIssue({ code: 'custom', message: r });
    });
}

/** Something we listen on: port 0 asks the OS for a free port (tests, sandboxes). */
const listenAddr = hostPort(0);
/** Something we connect to: port 0 cannot be reached. */
const remoteAddr = hostPort(1);

const nonEmpty = z.string().min(1);

/**
 * An integer in [min, max]. Not `z.int()`: its non-integer issue aborts the parse, which would
 * hide the mode/section problems reported by `checkSections` in the same run.
 */
function int(min: number, max: number = Number.MAX_SAFE_INTEGER) {
  return z
    .number({
      error: (iss) =>
        iss.input === undefined ? 'required' : `expected an integer, got ${describeInput(iss.input)}`,
    })
    .superRefine((n, ctx) => {
      if (!Number.isSafeInteger(n)) {
        ctx.addIssue({ code: 'custom', message: `expected an integer, got ${describeInput(n)}` });
      } else if (n < min) {
        ctx.addIssue({ code: 'custom', message: `must be at least ${min}` });
      } else if (n > max) {
        ctx.addIssue({ code: 'custom', message: `must be at most ${max}` });
      }
    });
}

export const READ_FROM = ['master', 'replica', 'prefer-replica'] as const;
export type ReadFrom = (typeof READ_FROM)[number];

const clusterSchema = z.strictObject({
  /** Nodes asked for the slot map; any reachable one will do. Required, at least one. */
  seeds: z.array(remoteAddr).min(1),
  /** Where read-only commands go. Default 'master'. */
  readFrom: z.enum(READ_FROM).default('master'),
  /** With readFrom replica: how often each replica's health and lag are checked. Default 1000. */
  replicaCheckIntervalMs: int(100).default(1_000),
  /** With readFrom replica: a replica whose last acknowledgement to its master is older is not read from. Default 2. */
  replicaMaxLagSeconds: int(0).default(2),
  /** Periodic topology refresh, on top of refreshes triggered by MOVED and lost connections. Default 10000. */
  refreshIntervalMs: int(100).default(10_000),
  /** MOVED/ASK hops for one command before its error is passed on; bounds redirect loops. Default 16. */
  maxRedirects: int(1, 100).default(16),
  /** How long TRYAGAIN, CLUSTERDOWN and connection errors are retried with backoff before the error reaches the client; 0 passes them on at once. Default 5000. */
  retryWindowMs: int(0).default(5_000),
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

const ringNodeSchema = z.strictObject({
  /**
   * The node's identity on the ketama continuum. Absent: twemproxy's rule applies (the address),
   * so keep names when replacing a twemproxy pool that had them, or keys move. Optional.
   */
  name: nonEmpty.optional(),
  /** A standalone Redis. Required. */
  addr: remoteAddr,
  /** Share of the continuum relative to the other nodes. Default 1. */
  weight: int(1).default(1),
});
export type RingNode = z.output<typeof ringNodeSchema>;

const ringNodesSchema = z
  .array(ringNodeSchema)
  .min(1)
  .superRefine((nodes, ctx) => {
    // Two entries with one address would double a server's share; two with one name would
    // collide on the continuum. Both are always typos.
    for (const field of ['addr', 'name'] as const) {
      const first = new Map<string, number>();
      nodes.forEach((node, i) => {
        const value = node[field];
        if (value === undefined) return;
        const seen = first.get(value);
        if (seen === undefined) {
          first.set(value, i);
        } else {
          ctx.addIssue({
            code: 'custom',
            path: [i, field],
            message: `duplicate ${field} ${describeInput(value)} (already used by nodes[${seen}])`,
          });
        }
      });
    }
  });

const hashTagSchema = z
  .string({
    error: (iss) =>
      `expected 2 characters like "{}", got ${describeInput(iss.input)}`,
  })
  .refine((s) => /^([\x00-\x7f]{2})?$/.test(s), {
    // twemproxy compares single bytes, so only single-byte characters mean the same thing here.
    error: (iss) => `expected 2 ASCII characters like "{}", got ${describeInput(iss.input)}`,
  });

function ringShape<H extends z.ZodType>(hash: H) {
  return {
    /** Key hash (twemproxy's `hash`). Default 'md5'; in `migration.to`, the ring's own hash. */
    hash,
    /** Two characters, e.g. "{}": only the part of a key between them is hashed (twemproxy's `hash_tag`). Default "{}" (SPEC 2; in `migration.to`, the ring's own); "" hashes whole keys, as twemproxy without `hash_tag`. */
    hashTag: hashTagSchema.optional(),
    /** The servers. Required, at least one; addresses and names unique. */
    nodes: ringNodesSchema,
  };
}

const ringSchema = z.strictObject({
  ...ringShape(z.enum(HASH_NAMES).default('md5')),
  /** twemproxy's auto_eject_hosts: a node failing `serverFailureLimit` times in a row leaves the ring (its keys go to the others) for `serverRetryTimeoutMs`. Optional: absent or false, a down node's keys get an error. Not applied during a migration. */
  autoEjectHosts: z.boolean().optional(),
  /** Consecutive connection failures that eject a node (twemproxy's server_failure_limit). Optional: 2. */
  serverFailureLimit: int(1).optional(),
  /** How long an ejected node stays out before it is tried again (twemproxy's server_retry_timeout). Optional: 30000. */
  serverRetryTimeoutMs: int(1).optional(),
});

export const MIGRATION_PHASES = ['double-write', 'read-new', 'done'] as const;
export type MigrationPhase = (typeof MIGRATION_PHASES)[number];

const migrationSchema = z.strictObject({
  /** Where reads and writes go (SPEC section 6). Required. */
  phase: z.enum(MIGRATION_PHASES),
  /** The ring being migrated to. Required; `hash` defaults to the current ring's. */
  to: z.strictObject(ringShape(z.enum(HASH_NAMES).optional())),
});

/** A rules field: one string of space-separated Redis ACL rules, or a list of them, checked by `parse`. */
function rulesField(parse: (input: RulesInput) => { problems: string[] }) {
  return z
    .union([z.string(), z.array(z.string())], {
      error: (iss) => `expected rules, as a string ("+@read -keys") or a list of strings, got ${describeInput(iss.input)}`,
    })
    .superRefine((input, ctx) => {
      for (const message of parse(input).problems) ctx.addIssue({ code: 'custom', message });
    });
}

const userSchema = z.strictObject({
  name: nonEmpty,
  password: nonEmpty,
  // Syntax and categories are checked here; command names against the back end's table when the proxy loads them.
  /** Redis ACL command rules (`+@all -@admin +config|get`), applied left to right from `-@all`. Optional: absent, every command. */
  commands: rulesField(parseCommandRules).optional(),
  /** Key patterns (`~cache:*`, `%R~ro:*`, `%W~`, `allkeys`, `resetkeys`). Optional: absent, every key. */
  keys: rulesField(parseKeyRules).optional(),
  /** Pub/Sub channel patterns (`&news.*`, `allchannels`, `resetchannels`). Optional: absent, every channel. */
  channels: rulesField(parseChannelRules).optional(),
});

const authSchema = z
  .strictObject({
    /** Password of the default user, as Redis's `requirepass`. Optional. */
    password: nonEmpty.optional(),
    /** ACL-style users for `AUTH name password`, each with optional permissions. Optional. */
    users: z.array(userSchema).optional(),
  })
  .superRefine((auth, ctx) => {
    const users = auth.users ?? [];
    if (auth.password === undefined && users.length === 0) {
      ctx.addIssue({
        code: 'custom',
        message: 'set "password", "users" or both (remove "auth" to let clients in without AUTH)',
      });
    }
    const first = new Map<string, number>();
    users.forEach((user, i) => {
      const seen = first.get(user.name);
      if (seen !== undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['users', i, 'name'],
          message: `duplicate name ${describeInput(user.name)} (already used by users[${seen}])`,
        });
      }
      first.set(user.name, i);
      // `AUTH password` is `AUTH default password` in Redis, so both would define one user twice.
      if (user.name === 'default' && auth.password !== undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['users', i, 'name'],
          message: '"default" is the user that auth.password sets; set only one of them',
        });
      }
    });
  });

/** TLS towards clients: the proxy's certificate, and optionally the CA that client certificates must chain to. */
const clientTlsSchema = z
  .strictObject({
    /** PEM certificate (chain) the proxy presents. Required. */
    cert: nonEmpty,
    /** PEM private key of `cert`. Required. */
    key: nonEmpty,
    /** PEM CA bundle that client certificates are verified against. Optional. */
    ca: nonEmpty.optional(),
    /** Refuse clients without a certificate signed by `ca` (Redis's tls-auth-clients). Default false. */
    requireClientCert: z.boolean().default(false),
  })
  .superRefine((t, ctx) => {
    if (t.requireClientCert && t.ca === undefined) {
      ctx.addIssue({ code: 'custom', path: ['ca'], message: 'required when tls.requireClientCert is true' });
    }
  });

/** TLS towards the Redis nodes. Present (even empty, `tls: {}`): every back-end connection uses TLS. */
const backendTlsSchema = z
  .strictObject({
    /** PEM CA bundle the nodes' certificates are verified against. Default: Node's built-in CAs. */
    ca: nonEmpty.optional(),
    /** PEM client certificate, for nodes that require one (tls-auth-clients yes). Optional; needs `key`. */
    cert: nonEmpty.optional(),
    /** PEM private key of `cert`. Optional; needs `cert`. */
    key: nonEmpty.optional(),
    /** Name the nodes' certificates must carry (and SNI). Default: each node's host. */
    servername: nonEmpty.optional(),
    /** Verify the nodes' certificates. Default true; false only for tests. */
    rejectUnauthorized: z.boolean().default(true),
  })
  .superRefine((t, ctx) => {
    if ((t.cert === undefined) !== (t.key === undefined)) {
      ctx.addIssue({ code: 'custom', path: [t.cert === undefined ? 'cert' : 'key'], message: 'cert and key go together' });
    }
  });

const backendSchema = z
  .strictObject({
    /** Shared connections to each node; blocking, MULTI and Pub/Sub clients get their own on top. Default 1, as twemproxy's server_connections. */
    connectionsPerNode: int(1, 64).default(1),
    /** ACL user for back-end connections (needs `password`). Optional. */
    username: nonEmpty.optional(),
    /** Back-end password (`requirepass`/`masterauth`, or the ACL user's). Optional. */
    password: nonEmpty.optional(),
    /** Give up on a TCP connect after this long. Default 2000. */
    connectTimeoutMs: int(1).default(2_000),
    /** A reply later than this fails the command (blocking commands excepted). Default 10000. */
    commandTimeoutMs: int(1).default(10_000),
    /** New back-end connections per second, all nodes together (bursts of the same size), against connection storms. Default 100. */
    maxConnectsPerSecond: int(1, 100_000).default(100),
    /** TLS to the nodes. Optional: absent, plain TCP. */
    tls: backendTlsSchema.optional(),
  })
  .superRefine((b, ctx) => {
    if (b.username !== undefined && b.password === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['password'],
        message: 'required when backend.username is set (AUTH needs both)',
      });
    }
  });

const limitsSchema = z.strictObject({
  /** Connected clients beyond this are refused. Default 10000. */
  maxClients: int(1).default(10_000),
  /** One request's size; bulk lengths are checked against it before anything is buffered. Default 64 MiB. */
  maxRequestBytes: int(1).default(64 * 1024 * 1024),
  /** Arguments in one request: a larger multibulk count is a protocol error. Default 2147483647 (Redis 7.0's INT_MAX). */
  maxArgs: int(1).default(1024 * 1024),
  /** Bytes held for an inline line or a `*`/`$` header line that has not ended. Default 65536 (Redis's PROTO_INLINE_MAX_SIZE). */
  maxInlineBytes: int(1).default(64 * 1024),
  /** Unsent reply bytes above which a client that does not read is paused instead of buffered. Default 8 MiB. */
  clientOutputHighWaterBytes: int(1).default(8 * 1024 * 1024),
  /** Close a client silent this long; 0 never does. Default 0. */
  idleClientTimeoutMs: int(0).default(0),
  /** Script bodies the proxy keeps for NOSCRIPT healing (EVAL, SCRIPT LOAD); least recently used go first, preloaded ones never. Default 16 MiB. */
  scriptStoreBytes: int(0).default(16 * 1024 * 1024),
});

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const flatSchema = z.strictObject({
  /** Where clients connect. Loopback unless told otherwise; IPv6 as "[::1]:7777". Default "127.0.0.1:7777". */
  listen: listenAddr.default('127.0.0.1:7777'),
  /** Back end: a Redis Cluster, or standalone nodes on a ketama ring. Default 'cluster'. */
  mode: z.enum(['cluster', 'ring']).default('cluster'),
  /** Cluster back end. Required in cluster mode, refused in ring mode. */
  cluster: clusterSchema.optional(),
  /** Ring back end. Required in ring mode, refused in cluster mode. */
  ring: ringSchema.optional(),
  /** A migration from `ring` to `migration.to`. Ring mode only. Optional: absent, no migration. */
  migration: migrationSchema.optional(),
  /** Multi-key commands spanning slots (or ring nodes): refused with CROSSSLOT as Redis Cluster does, or split per node (MGET/MSET/DEL/EXISTS/UNLINK/TOUCH only). Default 'refuse'. */
  crossSlot: z.enum(['refuse', 'split']).default('refuse'),
  /** Lua files, or folders of *.lua, preloaded on every master. Relative paths are resolved against the config file's folder by loadConfigFile. Default []. */
  scripts: z.array(nonEmpty).default(() => []),
  /** Client authentication. Optional: absent, clients need no AUTH. */
  auth: authSchema.optional(),
  /** TLS for clients on `listen`. Optional: absent, plain TCP. */
  tls: clientTlsSchema.optional(),
  /** Connections to the Redis nodes. Default: all defaults. */
  backend: backendSchema.prefault({}),
  /** Protection against clients that are too big, too many, or too slow. Default: all defaults. */
  limits: limitsSchema.prefault({}),
  /** Prometheus `/metrics` endpoint. Optional: absent, no endpoint. */
  metrics: z.strictObject({ listen: listenAddr }).optional(),
  /** Structured logging. Default: all defaults. */
  log: z.strictObject({ level: z.enum(LOG_LEVELS).default('info') }).prefault({}),
  /** Processes serving clients. Default 1. */
  workers: int(1).default(1),
});
type FlatConfig = z.output<typeof flatSchema>;

export type ClusterConfig = z.output<typeof clusterSchema>;
export type RingConfig = z.output<typeof ringSchema>;
export type MigrationConfig = {
  phase: MigrationPhase;
  to: Omit<z.output<typeof migrationSchema>['to'], 'hash'> & { hash: HashName };
};
export type AuthConfig = z.output<typeof authSchema>;
export type UserConfig = z.output<typeof userSchema>;
export type BackendConfig = z.output<typeof backendSchema>;
export type LimitsConfig = z.output<typeof limitsSchema>;
export type ClientTlsConfig = z.output<typeof clientTlsSchema>;
export type BackendTlsConfig = z.output<typeof backendTlsSchema>;

type CommonConfig = Omit<FlatConfig, 'mode' | 'cluster' | 'ring' | 'migration'>;
export type ClusterModeConfig = CommonConfig & {
  mode: 'cluster';
  cluster: ClusterConfig;
  ring?: undefined;
  migration?: undefined;
};
export type RingModeConfig = CommonConfig & {
  mode: 'ring';
  ring: RingConfig;
  migration?: MigrationConfig;
  cluster?: undefined;
};

interface SectionsView {
  mode?: unknown;
  cluster?: unknown;
  ring?: unknown;
  migration?: unknown;
}

/**
 * Runs even when other fields are broken (see `when` below), so that a misplaced section is
 * reported together with everything else; hence it reads its input as unknown.
 */
function checkSections(c: SectionsView, ctx: z.RefinementCtx): void {
  const { mode } = c;
  if (mode !== 'cluster' && mode !== 'ring') return;
  const other = mode === 'cluster' ? 'ring' : 'cluster';
  if (c[mode] === undefined) {
    ctx.addIssue({ code: 'custom', path: ['mode'], message: `${mode} mode needs a "${mode}" section` });
  }
  if (c[other] !== undefined) {
    ctx.addIssue({
      code: 'custom',
      path: [other],
      message: `only allowed in ${other} mode (mode is "${mode}")`,
    });
  }
  if (mode !== 'ring' && c.migration !== undefined) {
    ctx.addIssue({
      code: 'custom',
      path: ['migration'],
      message: `only allowed in ring mode (mode is "${mode}")`,
    });
  }
}

function toModeConfig(c: FlatConfig, ctx: z.RefinementCtx): ClusterModeConfig | RingModeConfig {
  const { mode, cluster, ring, migration, ...common } = c;
  if (mode === 'cluster' && cluster !== undefined) return { ...common, mode, cluster };
  if (mode === 'ring' && ring !== undefined) {
    if (migration === undefined) return { ...common, mode, ring };
    const to = { ...migration.to, hash: migration.to.hash ?? ring.hash };
    return { ...common, mode, ring, migration: { phase: migration.phase, to } };
  }
  // checkSections has reported this already, and a pipe does not run its transform after issues.
  ctx.addIssue({ code: 'custom', path: ['mode'], message: `${mode} mode needs a "${mode}" section` });
  return z.NEVER;
}

export const configSchema = flatSchema
  .superRefine(checkSections, {
    when: (payload) =>
      typeof payload.value === 'object' && payload.value !== null && !Array.isArray(payload.value),
  })
  .transform(toModeConfig);

/** What a config file may hold (defaults not yet applied). */
export type ConfigInput = z.input<typeof configSchema>;
/** A validated config, defaults applied. */
export type Config = z.output<typeof configSchema>;
