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
import { isIPv6 } from 'node:net';
import * as v from 'valibot';
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

/** "required" for a missing value, else `expected <what>, got <value>`. */
function expected(what: string) {
  return (iss: v.BaseIssue<unknown>): string =>
    iss.input === undefined ? 'required' : `expected ${what}, got ${describeInput(iss.input)}`;
}

/** Adds a problem, at a field below the checked value when keys are given (`'users', 2, 'name'`). */
type Report = (message: string, ...keys: (string | number)[]) => void;

type IssuePath = [v.IssuePathItem, ...v.IssuePathItem[]];

/** A Report on `value`, from the `addIssue` of a valibot rawCheck or rawTransform. */
function reporter(value: unknown, addIssue: (info: { message: string; path?: IssuePath }) => void): Report {
  return (message, ...keys) => {
    const path: v.IssuePathItem[] = [];
    let input = value;
    for (const key of keys) {
      const child: unknown = (input as Record<string | number, unknown>)[key];
      path.push({ type: 'unknown', origin: 'value', input, key, value: child });
      input = child;
    }
    addIssue({ message, path: path.length > 0 ? (path as IssuePath) : undefined });
  };
}

/** valibot's strictObject issue for a key that is not a field. */
function isUnknownKey(iss: v.BaseIssue<unknown>): boolean {
  return iss.type === 'strict_object' && iss.expected === 'never';
}

/**
 * Further checks of a value, skipped while something in it has the wrong type or is missing (its
 * fields cannot be trusted then). Other problems do not stop them: a number out of range, or an
 * unknown field, which valibot counts as a wrong type but which leaves every known field as checked.
 */
function refine<T>(check: (value: T, report: Report) => void) {
  return v.rawCheck<T>(({ dataset, addIssue }) => {
    if (dataset.issues?.some((iss) => iss.kind === 'schema' && !isUnknownKey(iss))) return;
    check(dataset.value as T, reporter(dataset.value, addIssue));
  });
}

/**
 * The other half of `v.minLength(1)`, which checks values of the right type only: a value of the
 * wrong type that has a length anyway (`seeds: ""`, `name: []`) gets this problem too.
 */
function emptyOfWrongType<T>() {
  return v.rawCheck<T>(({ dataset, addIssue }) => {
    if (dataset.typed) return;
    const x = dataset.value as { length?: unknown } | null | undefined;
    if (x === null || x === undefined || x.length === undefined || (x.length as number) >= 1) return;
    addIssue({ message: Array.isArray(x) || typeof x === 'string' ? 'must not be empty' : 'must be at least 1' });
  });
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length];
}

/** "unknown field", with the field `key` is most likely a typo of. */
function unknownField(key: string, known: readonly string[]): string {
  const lower = key.toLowerCase();
  let best: string | undefined;
  let bestDistance = Math.max(1, Math.floor(key.length / 3)) + 1;
  for (const k of known) {
    const d = k.toLowerCase() === lower ? 0 : editDistance(lower, k.toLowerCase());
    if (d < bestDistance) {
      best = k;
      bestDistance = d;
    }
  }
  return best === undefined ? 'unknown field' : `unknown field (did you mean "${best}"?)`;
}

function isMapping(x: unknown): boolean {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

/**
 * A mapping holding `entries` and nothing else: every other key is an "unknown field" problem.
 * valibot's strictObject takes lists for mappings (hence the first check) and reports only the
 * first unknown key (hence the last: it reports the others, after it and in the file's order).
 */
function strictObject<const E extends v.ObjectEntries>(entries: E) {
  const known = Object.keys(entries);
  return v.pipe(
    v.custom<v.InferInput<v.StrictObjectSchema<E, undefined>>>(isMapping, expected('a mapping')),
    // Its issues are a missing field (no input) or the first unknown key (the key as input).
    v.strictObject(entries, (iss) => (iss.input === undefined ? 'required' : unknownField(String(iss.input), known))),
    v.rawCheck(({ dataset, addIssue }) => {
      const first = dataset.issues?.find((iss) => isUnknownKey(iss) && iss.path?.length === 1);
      if (first?.path === undefined) return;
      const { input, key: firstKey } = first.path[0] as v.ObjectPathItem;
      for (const key in input) {
        if (key === firstKey || Object.hasOwn(entries, key)) continue;
        addIssue({ message: unknownField(key, known), path: [{ type: 'object', origin: 'key', input, key, value: input[key] }] });
      }
    }),
  );
}

/** One of `options`; any other value is named in the problem. */
function oneOf<const T extends readonly [string, ...string[]]>(options: T) {
  return v.picklist(options, expected(`one of ${options.join(' | ')}`));
}

function hostPort(minPort: number) {
  return v.pipe(
    v.string(expected('host:port')),
    refine((s, report) => {
      const r = splitHostPort(s, minPort);
      if (typeof r === 'string') report(r);
    }),
  );
}

/** Something we listen on: port 0 asks the OS for a free port (tests, sandboxes). */
const listenAddr = hostPort(0);
/** Something we connect to: port 0 cannot be reached. */
const remoteAddr = hostPort(1);

const nonEmpty = v.pipe(v.string(), v.minLength(1), emptyOfWrongType());

/**
 * An integer in [min, max]. Anything but a finite number is a wrong type (not `v.number()`, which
 * takes Infinity), so the checks of the enclosing mapping wait for it; a fraction or a number out
 * of range is a problem of this field only, and one problem at most is reported.
 */
function int(min: number, max: number = Number.MAX_SAFE_INTEGER) {
  return v.pipe(
    v.custom<number>((n) => typeof n === 'number' && Number.isFinite(n), expected('an integer')),
    refine((n, report) => {
      if (!Number.isSafeInteger(n)) {
        report(`expected an integer, got ${describeInput(n)}`);
      } else if (n < min) {
        report(`must be at least ${min}`);
      } else if (n > max) {
        report(`must be at most ${max}`);
      }
    }),
  );
}

export const READ_FROM = ['master', 'replica', 'prefer-replica'] as const;
export type ReadFrom = (typeof READ_FROM)[number];

const clusterSchema = strictObject({
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

const ringNodeSchema = strictObject({
  /**
   * The node's identity on the ketama continuum. Absent: twemproxy's rule applies (the address),
   * so keep names when replacing a twemproxy pool that had them, or keys move. Optional.
   */
  name: v.optional(nonEmpty),
  /** A standalone Redis. Required. */
  addr: remoteAddr,
  /** Share of the continuum relative to the other nodes. Default 1. */
  weight: v.optional(int(1), 1),
});
export type RingNode = v.InferOutput<typeof ringNodeSchema>;

const ringNodesSchema = v.pipe(
  v.array(ringNodeSchema),
  v.minLength(1),
  emptyOfWrongType(),
  refine((nodes, report) => {
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
          report(`duplicate ${field} ${describeInput(value)} (already used by nodes[${seen}])`, i, field);
        }
      });
    }
  }),
);

const hashTagSchema = v.pipe(
  v.string((iss) => `expected 2 characters like "{}", got ${describeInput(iss.input)}`),
  // twemproxy compares single bytes, so only single-byte characters mean the same thing here.
  v.check(
    (s) => /^([\x00-\x7f]{2})?$/.test(s),
    (iss) => `expected 2 ASCII characters like "{}", got ${describeInput(iss.input)}`,
  ),
);

function ringShape<H extends v.GenericSchema>(hash: H) {
  return {
    /** Key hash (twemproxy's `hash`). Default 'md5'; in `migration.to`, the ring's own hash. */
    hash,
    /** Two characters, e.g. "{}": only the part of a key between them is hashed (twemproxy's `hash_tag`). Default "{}" (SPEC 2; in `migration.to`, the ring's own); "" hashes whole keys, as twemproxy without `hash_tag`. */
    hashTag: v.optional(hashTagSchema),
    /** The servers. Required, at least one; addresses and names unique. */
    nodes: ringNodesSchema,
  };
}

const ringSchema = strictObject({
  ...ringShape(v.optional(oneOf(HASH_NAMES), 'md5')),
  /** twemproxy's auto_eject_hosts: a node failing `serverFailureLimit` times in a row leaves the ring (its keys go to the others) for `serverRetryTimeoutMs`. Optional: absent or false, a down node's keys get an error. Not applied during a migration. */
  autoEjectHosts: v.optional(v.boolean()),
  /** Consecutive connection failures that eject a node (twemproxy's server_failure_limit). Optional: 2. */
  serverFailureLimit: v.optional(int(1)),
  /** How long an ejected node stays out before it is tried again (twemproxy's server_retry_timeout). Optional: 30000. */
  serverRetryTimeoutMs: v.optional(int(1)),
});

export const MIGRATION_PHASES = ['double-write', 'read-new', 'done'] as const;
export type MigrationPhase = (typeof MIGRATION_PHASES)[number];

const migrationSchema = strictObject({
  /** Where reads and writes go (SPEC section 6). Required. */
  phase: oneOf(MIGRATION_PHASES),
  /**
   * Where the keys go. Required: a ring (`nodes`, with `hash` and `hashTag` defaulting to the current
   * ring's) or a Redis Cluster (`cluster: { seeds }`), one of the two (checked in checkSections).
   */
  to: strictObject({
    ...ringShape(v.optional(oneOf(HASH_NAMES))),
    nodes: v.optional(ringNodesSchema),
    /** A Redis Cluster: nodes asked for its slot map, any reachable one will do. */
    cluster: v.optional(strictObject({ seeds: v.pipe(v.array(remoteAddr), v.minLength(1), emptyOfWrongType()) })),
  }),
});

/** A rules field: one string of space-separated Redis ACL rules, or a list of them, checked by `parse`. */
function rulesField(parse: (input: RulesInput) => { problems: string[] }) {
  return v.pipe(
    v.union(
      [v.string(), v.array(v.string())],
      (iss) => `expected rules, as a string ("+@read -keys") or a list of strings, got ${describeInput(iss.input)}`,
    ),
    refine((input, report) => {
      for (const message of parse(input).problems) report(message);
    }),
  );
}

const userSchema = strictObject({
  name: nonEmpty,
  password: nonEmpty,
  // Syntax and categories are checked here; command names against the back end's table when the proxy loads them.
  /** Redis ACL command rules (`+@all -@admin +config|get`), applied left to right from `-@all`. Optional: absent, every command. */
  commands: v.optional(rulesField(parseCommandRules)),
  /** Key patterns (`~cache:*`, `%R~ro:*`, `%W~`, `allkeys`, `resetkeys`). Optional: absent, every key. */
  keys: v.optional(rulesField(parseKeyRules)),
  /** Pub/Sub channel patterns (`&news.*`, `allchannels`, `resetchannels`). Optional: absent, every channel. */
  channels: v.optional(rulesField(parseChannelRules)),
});

const authSchema = v.pipe(
  strictObject({
    /** Password of the default user, as Redis's `requirepass`. Optional. */
    password: v.optional(nonEmpty),
    /** ACL-style users for `AUTH name password`, each with optional permissions. Optional. */
    users: v.optional(v.array(userSchema)),
  }),
  refine((auth, report) => {
    const users = auth.users ?? [];
    if (auth.password === undefined && users.length === 0) {
      report('set "password", "users" or both (remove "auth" to let clients in without AUTH)');
    }
    const first = new Map<string, number>();
    users.forEach((user, i) => {
      const seen = first.get(user.name);
      if (seen !== undefined) {
        report(`duplicate name ${describeInput(user.name)} (already used by users[${seen}])`, 'users', i, 'name');
      }
      first.set(user.name, i);
      // `AUTH password` is `AUTH default password` in Redis, so both would define one user twice.
      if (user.name === 'default' && auth.password !== undefined) {
        report('"default" is the user that auth.password sets; set only one of them', 'users', i, 'name');
      }
    });
  }),
);

/** TLS towards clients: the proxy's certificate, and optionally the CA that client certificates must chain to. */
const clientTlsSchema = v.pipe(
  strictObject({
    /** PEM certificate (chain) the proxy presents. Required. */
    cert: nonEmpty,
    /** PEM private key of `cert`. Required. */
    key: nonEmpty,
    /** PEM CA bundle that client certificates are verified against. Optional. */
    ca: v.optional(nonEmpty),
    /** Refuse clients without a certificate signed by `ca` (Redis's tls-auth-clients). Default false. */
    requireClientCert: v.optional(v.boolean(), false),
  }),
  refine((t, report) => {
    if (t.requireClientCert && t.ca === undefined) {
      report('required when tls.requireClientCert is true', 'ca');
    }
  }),
);

/** TLS towards the Redis nodes. Present (even empty, `tls: {}`): every back-end connection uses TLS. */
const backendTlsSchema = v.pipe(
  strictObject({
    /** PEM CA bundle the nodes' certificates are verified against. Default: Node's built-in CAs. */
    ca: v.optional(nonEmpty),
    /** PEM client certificate, for nodes that require one (tls-auth-clients yes). Optional; needs `key`. */
    cert: v.optional(nonEmpty),
    /** PEM private key of `cert`. Optional; needs `cert`. */
    key: v.optional(nonEmpty),
    /** Name the nodes' certificates must carry (and SNI). Default: each node's host. */
    servername: v.optional(nonEmpty),
    /** Verify the nodes' certificates. Default true; false only for tests. */
    rejectUnauthorized: v.optional(v.boolean(), true),
  }),
  refine((t, report) => {
    if ((t.cert === undefined) !== (t.key === undefined)) {
      report('cert and key go together', t.cert === undefined ? 'cert' : 'key');
    }
  }),
);

const backendSchema = v.pipe(
  strictObject({
    /** Shared connections to each node; blocking, MULTI and Pub/Sub clients get their own on top. Default 1, as twemproxy's server_connections. */
    connectionsPerNode: v.optional(int(1, 64), 1),
    /** ACL user for back-end connections (needs `password`). Optional. */
    username: v.optional(nonEmpty),
    /** Back-end password (`requirepass`/`masterauth`, or the ACL user's). Optional. */
    password: v.optional(nonEmpty),
    /** Give up on a TCP connect after this long. Default 2000. */
    connectTimeoutMs: v.optional(int(1), 2_000),
    /** A reply later than this fails the command (blocking commands excepted). Default 10000. */
    commandTimeoutMs: v.optional(int(1), 10_000),
    /** New back-end connections per second, all nodes together (bursts of the same size), against connection storms. Default 100. */
    maxConnectsPerSecond: v.optional(int(1, 100_000), 100),
    /** TLS to the nodes. Optional: absent, plain TCP. */
    tls: v.optional(backendTlsSchema),
  }),
  refine((b, report) => {
    if (b.username !== undefined && b.password === undefined) {
      report('required when backend.username is set (AUTH needs both)', 'password');
    }
  }),
);

const limitsSchema = strictObject({
  /** Connected clients beyond this are refused. Default 10000. */
  maxClients: v.optional(int(1), 10_000),
  /** One request's size; bulk lengths are checked against it before anything is buffered. Default 64 MiB. */
  maxRequestBytes: v.optional(int(1), 64 * 1024 * 1024),
  /** Arguments in one request: a larger multibulk count is a protocol error. Default 2147483647 (Redis 7.0's INT_MAX). */
  maxArgs: v.optional(int(1), 1024 * 1024),
  /** Bytes held for an inline line or a `*`/`$` header line that has not ended. Default 65536 (Redis's PROTO_INLINE_MAX_SIZE). */
  maxInlineBytes: v.optional(int(1), 64 * 1024),
  /** Unsent reply bytes above which a client that does not read is paused instead of buffered. Default 8 MiB. */
  clientOutputHighWaterBytes: v.optional(int(1), 8 * 1024 * 1024),
  /** Close a client silent this long; 0 never does. Default 0. */
  idleClientTimeoutMs: v.optional(int(0), 0),
  /** Script bodies the proxy keeps for NOSCRIPT healing (EVAL, SCRIPT LOAD); least recently used go first, preloaded ones never. Default 16 MiB. */
  scriptStoreBytes: v.optional(int(0), 16 * 1024 * 1024),
});

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
  /** Prometheus `/metrics` endpoint. Optional: absent, no endpoint. */
  metrics: v.optional(strictObject({ listen: listenAddr })),
  /** Structured logging. Default: all defaults. */
  log: v.optional(strictObject({ level: v.optional(oneOf(LOG_LEVELS), 'info') }), {}),
  /** Processes serving clients. Default 1. */
  workers: v.optional(int(1), 1),
});
type FlatConfig = v.InferOutput<typeof flatSchema>;

export type ClusterConfig = v.InferOutput<typeof clusterSchema>;
export type RingConfig = v.InferOutput<typeof ringSchema>;
type MigrationTargetInput = v.InferOutput<typeof migrationSchema>['to'];
/** Side B as a ring. */
export type RingTarget = { hash: HashName; hashTag?: string; nodes: NonNullable<MigrationTargetInput['nodes']> };
/** Side B as a Redis Cluster. */
export type ClusterTarget = { cluster: NonNullable<MigrationTargetInput['cluster']> };
export type MigrationConfig = {
  phase: MigrationPhase;
  to: RingTarget | ClusterTarget;
};
export type AuthConfig = v.InferOutput<typeof authSchema>;
export type UserConfig = v.InferOutput<typeof userSchema>;
export type BackendConfig = v.InferOutput<typeof backendSchema>;
export type LimitsConfig = v.InferOutput<typeof limitsSchema>;
export type ClientTlsConfig = v.InferOutput<typeof clientTlsSchema>;
export type BackendTlsConfig = v.InferOutput<typeof backendTlsSchema>;

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
      for (const field of ['hash', 'hashTag'] as const) {
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
    else if (t.nodes !== undefined) to = { hash: t.hash ?? ring?.hash ?? 'md5', ...(t.hashTag === undefined ? {} : { hashTag: t.hashTag }), nodes: t.nodes };
    else {
      report('needs nodes (a ring) or cluster: { seeds: [...] } (a Redis Cluster)', 'migration', 'to');
      return undefined;
    }
    target = { phase: migration.phase, to };
  }
  const withMigration = target === undefined ? {} : { migration: target };
  if (mode === 'cluster' && cluster !== undefined) return { ...common, mode, cluster, ...withMigration };
  if (mode === 'ring' && ring !== undefined) return { ...common, mode, ring, ...withMigration };
  // checkSections has reported this already, and a pipe does not run its transform after issues.
  report(`${mode} mode needs a "${mode}" section`, 'mode');
  return undefined;
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
