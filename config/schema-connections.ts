/**
 * The connection sections of the config schema: clients' `auth` (users and their ACL rules) and
 * `tls`, the `backend` connections (credentials, TLS, timeouts) and the `limits` that protect the
 * proxy. Field names are a contract; each default is stated next to its field.
 */
import * as v from 'valibot';
import { RulesInput, parseChannelRules, parseCommandRules, parseKeyRules } from './acl-rules';
import { describeInput, int, nonEmpty, refine, strictObject } from './schema-kit';

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

export const userSchema = strictObject({
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

export const authSchema = v.pipe(
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
export const clientTlsSchema = v.pipe(
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
export const backendTlsSchema = v.pipe(
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

/** backend.commandTimeoutMs when the config leaves it out. */
export const DEFAULT_COMMAND_TIMEOUT_MS = 10_000;

export const backendSchema = v.pipe(
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
    commandTimeoutMs: v.optional(int(1)),
    /**
     * The command timeout cuts off a request waiting behind a script the node is running (it answers
     * BUSY on another connection), as twemproxy's `timeout:` does. Default: true when
     * `commandTimeoutMs` is other than its default (an operator's choice; a twemproxy pool's
     * `timeout:` sets this explicitly, config/twemproxy.ts), false with the default 10000, written
     * out or not, which then waits for the script's end (or its kill).
     */
    timeoutBehindScripts: v.optional(v.boolean()),
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
  // A timeout other than the default applies behind a busy script too; the default, written out or
  // left out, does not (no setting changes another when written at its default). The output states
  // it, so that the parsed config parses again to the same (overrides, workers).
  v.transform((b) => {
    const commandTimeoutMs = b.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
    return { ...b, commandTimeoutMs, timeoutBehindScripts: b.timeoutBehindScripts ?? commandTimeoutMs !== DEFAULT_COMMAND_TIMEOUT_MS };
  }),
);

export const limitsSchema = strictObject({
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
  /** A MONITOR client with more unsent lines than this is disconnected (and logged), as Redis's client-output-buffer-limit pubsub hard limit. 0: no limit. Default 32 MiB. */
  monitorOutputBytes: v.optional(int(0), 32 * 1024 * 1024),
  /** Script bodies the proxy keeps for NOSCRIPT healing (EVAL, SCRIPT LOAD); least recently used go first, preloaded ones never. Default 16 MiB. */
  scriptStoreBytes: v.optional(int(0), 16 * 1024 * 1024),
  /** Keys the proxy remembers for CLIENT TRACKING clients (Redis's tracking-table-max-keys); past it the oldest are invalidated. 0: no limit. Default 1000000. */
  trackingTableMaxKeys: v.optional(int(0), 1_000_000),
});
