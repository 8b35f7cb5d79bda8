/**
 * Server-assisted client-side caching through the proxy (CLIENT TRACKING), never stale.
 *
 * The nodes only see the proxy's shared connections, so the proxy does what Redis's tracking.c
 * does for its clients: it remembers which client read which key (key-table.ts), hears every
 * change on every node it reads from (one BCAST feed per node, backend/change-feed.ts) and sends
 * each client the invalidations Redis would send it: a RESP3 push on its own connection, or a
 * message on `__redis__:invalidate` to the client it REDIRECTs to.
 *
 * Never stale: a key is remembered before its read is sent, and an invalidation goes after every
 * reply the client is already owed, so a value read before a change is always followed by its
 * invalidation. Whenever the proxy can no longer vouch for what a client holds (a feed or a
 * connection to a node lost, a slot or ring node that changed hands, a read made while a feed
 * was not up) it sends the null invalidation, which tells the client to drop everything.
 */
import { BackendPool } from '../backend/pool';
import { CommandInfo, CommandTable } from '../commands/table';
import { keyPositions } from '../commands/keys';
import { ReplyOwner, ReplySlot } from '../client/reply-slot';
import { log } from '../telemetry/log';
import * as encode from '../resp/encode';
import { ClientTracking, TrackingRequest } from './tracking-state';
import { ClientIds, KeyTable, forEachId } from './key-table';
import { TableLimit, maxKeysSet } from './table-limit';
import { ScriptUses, isScriptCall, scriptBody } from './script-use';
import { WriteOrder } from './write-order';
import { ChangeFeed } from '../backend/change-feed';
import { NodeEviction } from './node-eviction';
import { readKeysOfCall } from './script-read-keys';
import { versionAtLeast } from '../resp/backend-version';
import { FlushGates, flushTellsFirst, isFlush } from './flush-gates';
import { hasKeys, holdsOwnPushes } from './tracking-rules';

/** What the hub needs of a client of the proxy (server/session.ts implements it). */
export interface CachingClient extends ReplyOwner {
  readonly id: number;
  protocol: 2 | 3;
  tracking: ClientTracking | null;
  /** In RESP2 subscribed mode: invalidations redirected to it come as `__redis__:invalidate` messages. */
  readonly subscribed: boolean;
  /** Appends `frame` after every reply the client is owed; sent whatever CLIENT REPLY says. */
  pushOutOfBand(frame: Buffer): void;
  /** Appends a reply slot: the place of the next reply. */
  track<S extends ReplySlot>(slot: S): S;
}

/** Where a script's text is found (dispatch/ passes it): EVALSHA's from the proxy's script store. */
export interface ScriptSource {
  readonly table: CommandTable;
  body(sha: Buffer): Buffer | undefined;
}

export interface CachingOptions {
  /** Keys remembered at most (Redis's tracking-table-max-keys); 0: no limit. */
  maxKeys: number;
  /** The nodes reads may go to now: each needs a feed. */
  nodes(): readonly string[];
  /** Which client has this id (REDIRECT targets are any client of the proxy). */
  client(id: number): CachingClient | undefined;
  /** How long CLIENT TRACKING ON waits for the feeds to be up before it answers anyway. */
  readyTimeoutMs: number;
  /** The back end: its server name (`redis`, `valkey`) and redis_version (Valkey 8 says 7.2.4); what changed in 7.2 and 7.4 follows it. */
  backend(): { name: string; version: string };
}

const PUSH_HEAD = Buffer.from('>2\r\n$10\r\ninvalidate\r\n');
const MESSAGE_HEAD = Buffer.from('*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n');
/** What Redis sends as the "keys" of a flush: its shared null, in the tracking client's protocol. */
const FLUSH = { 2: Buffer.from('$-1\r\n'), 3: Buffer.from('_\r\n') };
/** How often the feeds are checked against the nodes while anyone tracks (events do it sooner). */
const CHECK_EVERY_MS = 1000;
const RECONNECT_MS = 100;
/** Longest a reply waits behind the invalidations of a script or EXEC before it (feeds that do not answer). */
const HOLD_MAX_MS = 1000;

export class ClientCaching {
  private readonly trackers = new Map<number, CachingClient>();
  private readonly bcast = new Set<CachingClient>();
  private readonly table: KeyTable;
  private readonly feeds = new Map<string, ChangeFeed>();
  private allReady = false;
  private readyWaiters: (() => void)[] = [];
  private timer: NodeJS.Timeout | null = null;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private readonly limit: TableLimit<CachingClient>;
  private readonly scripts = new ScriptUses();
  private readonly writeOrder = new WriteOrder();
  private readonly eviction: NodeEviction;
  /** Flush replies waiting for the feeds' nulls (flush-gates.ts). */
  private readonly flushGates = new FlushGates<ChangeFeed>();
  /** Invalidations and flushes sent, for INFO. */
  invalidationsSent = 0;
  flushesSent = 0;

  constructor(
    private readonly pool: BackendPool,
    private readonly options: CachingOptions,
  ) {
    this.table = new KeyTable(options.maxKeys);
    this.eviction = new NodeEviction(pool);
    this.limit = new TableLimit(this.table, (key, ids, current) => this.invalidateEvicted(key, ids, current));
  }

  get trackingClients(): number {
    return this.trackers.size;
  }

  get trackedKeys(): number {
    return this.table.size;
  }

  /** Key-client pairs remembered (Redis's tracking_total_items). */
  get trackedItems(): number {
    return this.table.items;
  }

  /** Distinct BCAST prefixes of the tracking clients (Redis's tracking_total_prefixes). */
  get trackedPrefixes(): number {
    const all = new Set<string>();
    for (const c of this.bcast) for (const p of c.tracking?.prefixes ?? []) all.add(p.toString('latin1'));
    return all.size;
  }

  get evictedKeys(): number {
    return this.table.evicted;
  }

  /** tracking-table-max-keys: the config's `limits.trackingTableMaxKeys`, then CONFIG SET's. */
  get maxKeys(): number {
    return this.table.maxKeys;
  }

  setMaxKeys(maxKeys: number): void {
    this.table.maxKeys = maxKeys;
    this.limit.watch();
  }

  /**
   * CONFIG SET naming tracking-table-max-keys: the proxy's table takes the value as the request is
   * sent, so a command pipelined behind it already evicts, as on Redis. Returns what sets it back
   * when the nodes refuse the CONFIG SET; null when it does not name the parameter.
   */
  configSet(args: readonly Buffer[]): (() => void) | null {
    this.eviction.configSet(args);
    const value = maxKeysSet(args);
    if (value === null) return null;
    const before = this.table.maxKeys;
    this.setMaxKeys(value);
    return () => this.setMaxKeys(before);
  }

  /**
   * Every command of every client, before it runs (Redis's processCommand): past
   * tracking-table-max-keys, keys are evicted, as many as Redis would evict now.
   */
  commandArrived(client: CachingClient, info: CommandInfo, args: Buffer[], inMulti: boolean): void {
    if (this.table.overLimit) this.limit.enforce(client);
    if (this.trackers.size > 0 && !inMulti && isFlush(info.name, args) && !(client.subscribed && client.protocol === 2)) {
      this.flushGates.open(client, [...this.feeds.values()].filter((f) => f.ready));
    }
    // The order writes are sent in is the order their keys change: invalidations follow it.
    if (this.trackers.size > 0 && info.flags.has('write')) {
      const positions = keyPositions(info, args);
      if (positions !== null) for (const p of positions) this.writeOrder.note(args[p]);
    }
  }

  /** CLIENT TRACKING ON (options already checked): answers once the feeds are up, or after readyTimeoutMs. */
  enable(client: CachingClient, request: TrackingRequest): Promise<void> | null {
    const tracking = client.tracking ?? new ClientTracking();
    tracking.apply(request);
    client.tracking = tracking;
    this.trackers.set(client.id, client);
    if (tracking.bcast) this.bcast.add(client);
    this.syncFeeds();
    if (this.allReady) return null;
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, this.options.readyTimeoutMs);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.readyWaiters.push(done);
    });
  }

  /** CLIENT TRACKING OFF, RESET, or the client went away. Its keys stay in the table, ignored, as on Redis. */
  disable(client: CachingClient): void {
    if (client.tracking === null) return;
    // Places kept for invalidations wait for nothing now.
    for (const hold of client.tracking.pushHolds.splice(0)) hold.slot.complete(Buffer.concat(hold.frames));
    client.tracking = null;
    this.trackers.delete(client.id);
    this.bcast.delete(client);
    if (this.trackers.size === 0) this.stopFeeds();
  }

  /**
   * Called by the dispatcher for every command of a tracking client, before it is sent: remembers
   * the keys a read may hand the client (Redis remembers them when the command runs: earlier is
   * safe, later is not), and prepares what the client's own write invalidates.
   */
  beforeCommand(client: CachingClient, tracking: ClientTracking, info: CommandInfo, args: Buffer[], inMulti: boolean, source: ScriptSource): void {
    const script = isScriptCall(info.name) ? this.scripts.of(scriptBody(info.name, args, (sha) => source.body(sha)), source.table) : null;
    if (script !== null && script.writes && tracking.noloop) this.scriptWrite(tracking, info, args, inMulti);
    // (EXEC is dispatched with the transaction still open; a script queued in MULTI runs at EXEC.)
    // A node that may evict for maxmemory does so before the next command it runs (the feeds'
    // fence after this one's reply, if no other): its keys are told right after this reply.
    const changes = info.name === 'exec' || (script !== null && script.writes && !inMulti) || (!inMulti && this.eviction.mayEvict && hasKeys(info, args));
    if (changes && holdsOwnPushes(client.protocol, tracking)) {
      tracking.holdPushes = true;
      tracking.lastClaimed = null;
      tracking.armedWrite ??= []; // its reply slot is claimed, and writeAnswered says when it came
    }
    const reads = script === null ? info.flags.has('readonly') : script.reads;
    if (reads) {
      tracking.usedSinceFlush = true;
      if (!this.allReady) tracking.flushAfter = true;
      if (tracking.remembersKeys) {
        // Redis 7.2 and later track the keys a script's read-only calls read, 7.0 the keys it declares.
        const readKeys = script !== null && script.readKeys !== null && versionAtLeast(this.options.backend().version, 7, 2) ? readKeysOfCall(script.readKeys, args) : null;
        const positions = readKeys === null ? keyPositions(info, args) : null;
        if (readKeys !== null) for (const k of readKeys) this.remember(client, tracking, k.toString('latin1'));
        // Keys only a node can name (SORT ... BY): nothing to remember them by, so the read is followed by a flush.
        else if (positions === null) tracking.flushAfter = true;
        else for (const p of positions) this.remember(client, tracking, args[p].toString('latin1'));
        if (this.table.overLimit) this.limit.watch();
      }
    } else if (info.flags.has('write')) {
      this.ownWrite(client, tracking, info, args, inMulti);
    }
    // CLIENT CACHING applies to the next command, or to the whole transaction it opens (Redis's resetClient).
    if (!info.name.startsWith('client|') && !inMulti && info.name !== 'multi') tracking.caching = false;
  }

  private remember(client: CachingClient, tracking: ClientTracking, key: string): void {
    this.table.add(key, client.id);
    if (tracking.ownKeys.size > 0 && tracking.ownKeys.has(key)) tracking.readAfterOwnWrite.add(key);
  }

  /**
   * The client writes keys itself. NOLOOP: the feeds' invalidations for them are not passed on.
   * Otherwise Redis tells the client right after the write's reply, before the replies of what it
   * pipelined after; the node's push comes later, through another connection, so the proxy tells
   * it then itself (afterCommand) and forgets that the client read those keys. Inside MULTI the
   * node's push is awaited instead.
   */
  private ownWrite(client: CachingClient, tracking: ClientTracking, info: CommandInfo, args: Buffer[], inMulti: boolean): void {
    if (info.name === 'flushall' || info.name === 'flushdb') {
      // Redis 7.4 runs a SYNC flush in the background and answers once done: the null comes first.
      if (!inMulti && flushTellsFirst(this.options.backend(), args, this.eviction.lazyUserFlush)) this.flush(client, tracking, false);
      else if (!inMulti) tracking.ownFlush = true;
      return;
    }
    if (tracking.bcast ? !tracking.noloop : inMulti) return;
    const positions = keyPositions(info, args);
    if (positions === null || positions.length === 0) return;
    if (tracking.noloop) {
      tracking.armedWrite = positions.map((p) => args[p].toString('latin1'));
      return;
    }
    for (const p of positions) {
      if (this.table.drop(args[p].toString('latin1'), client.id)) (tracking.ownInvalidations ??= []).push(args[p]);
    }
  }

  /**
   * NOLOOP, default mode: a script's changes are the caller's own (Redis checks the client whose
   * command runs). Which keys it changes only its node knows: its declared keys are taken for them.
   * In BCAST mode Redis checks the client that made the change, the script's own: the caller is told.
   */
  private scriptWrite(tracking: ClientTracking, info: CommandInfo, args: Buffer[], inMulti: boolean): void {
    if (inMulti || tracking.bcast) return; // in MULTI, as for a write: the node's push is awaited
    const positions = keyPositions(info, args);
    if (positions !== null && positions.length > 0) tracking.armedWrite = positions.map((p) => args[p].toString('latin1'));
  }

  /** After a command was dispatched: what it invalidates for the client itself, and a flush after a read made while a feed was down. */
  afterCommand(client: CachingClient, tracking: ClientTracking): void {
    if (tracking.holdPushes) this.holdPlace(client, tracking);
    tracking.armedWrite = null;
    const own = tracking.ownInvalidations;
    if (own !== null) {
      tracking.ownInvalidations = null;
      for (const key of own) this.sendKeys(client, tracking, [key]);
    }
    if (tracking.ownFlush) {
      tracking.ownFlush = false;
      this.flush(client, tracking, false);
    }
    if (!tracking.flushAfter) return;
    tracking.flushAfter = false;
    this.flush(client, tracking, true);
  }

  /** NOLOOP: a write's reply came; its keys stop being the client's own once every feed has passed it. */
  writeAnswered(tracking: ClientTracking, slot: ReplySlot): void {
    const write = tracking.writeAnswered(slot);
    if (write === null) return;
    const done = (): void => {
      tracking.releaseWrite(write);
      this.releaseHolds(tracking, slot);
    };
    const feeds = [...this.feeds.values()];
    write.pending = new Set(feeds);
    let left = feeds.length;
    if (left === 0) done();
    const passed = (f: ChangeFeed): boolean => {
      write.pending?.delete(f);
      return --left === 0 && (done(), true);
    };
    // A node over maxmemory evicts when it runs the fence's PING, and sends the BCAST message for
    // that only after the PONG (Redis broadcasts once the event loop turn's commands ran): a
    // second fence, written after the first PONG, comes back after it.
    const twice = this.eviction.mayEvict;
    for (const f of feeds) f.fence(() => (twice ? f.fence(() => passed(f)) : passed(f)));
  }

  /** A place right after the command's reply for what it changes (a client waits HOLD_MAX_MS at most). */
  private holdPlace(client: CachingClient, tracking: ClientTracking): void {
    tracking.holdPushes = false;
    const command = tracking.lastClaimed;
    const slot = client.track(new ReplySlot(client));
    // Answered and passed by the feeds already (no feed up): nothing to wait for.
    if (command === null || command === tracking.lastReleased) return slot.complete(Buffer.alloc(0));
    const hold = { slot, frames: [] as Buffer[], command };
    tracking.pushHolds.push(hold);
    setTimeout(() => this.releaseHolds(tracking, command), HOLD_MAX_MS).unref();
  }

  /** The feeds have passed `command`: its place, and those before it, get what came meanwhile. */
  private releaseHolds(tracking: ClientTracking, command: ReplySlot): void {
    tracking.lastReleased = command;
    const at = tracking.pushHolds.findIndex((h) => h.command === command);
    if (at < 0) return;
    for (const hold of tracking.pushHolds.splice(0, at + 1)) hold.slot.complete(Buffer.concat(hold.frames));
  }

  /**
   * Where reads go changed (a failover, a slot moved, a ring node ejected or back, a migration
   * phase) or a connection to a node was lost: every tracking client drops everything.
   */
  placementChanged(reason: string): void {
    if (this.trackers.size === 0) return;
    log.debug({ reason }, 'client-side caching: flushing every tracking client');
    this.flushEverything();
    this.syncFeeds();
  }

  stop(): void {
    this.stopFeeds();
  }

  private flushEverything(): void {
    this.table.clear();
    for (const c of this.trackers.values()) {
      const t = c.tracking;
      if (t !== null) this.flush(c, t, false);
    }
  }

  /** The null invalidation; skipped when the client read nothing since its last one (it holds nothing), unless `always`. */
  private flush(client: CachingClient, tracking: ClientTracking, always: boolean): void {
    if (!always && !tracking.usedSinceFlush) return;
    tracking.usedSinceFlush = false;
    this.flushesSent++;
    this.send(client, tracking, FLUSH[client.protocol]);
  }

  /** Opens a feed to every node reads may go to, closes the others; keeps checking while anyone tracks. */
  private syncFeeds(): void {
    if (this.trackers.size === 0) return;
    this.timer ??= setInterval(() => this.syncFeeds(), CHECK_EVERY_MS).unref();
    const wanted = new Set(this.options.nodes());
    void this.eviction.check([...wanted]);
    for (const [address, feed] of this.feeds) {
      if (!wanted.has(address) || feed.isClosed) {
        this.feeds.delete(address);
        feed.close();
      }
    }
    for (const address of wanted) {
      if (!this.feeds.has(address)) this.feeds.set(address, new ChangeFeed(address, this.pool, this.feedEvents));
    }
    this.updateReady();
  }

  private updateReady(): void {
    let ready = this.feeds.size > 0;
    for (const f of this.feeds.values()) if (!f.ready) ready = false;
    this.allReady = ready;
    if (ready) for (const w of this.readyWaiters.splice(0)) w();
  }

  /**
   * An evicted key: each default-mode client that read it is told, as if it had changed; but not a
   * NOLOOP client whose own command is about to run (Redis takes it for the client's own change).
   */
  private invalidateEvicted(key: Buffer, ids: ClientIds, current: CachingClient | null): void {
    forEachId(ids, (id) => {
      const c = this.trackers.get(id);
      const t = c?.tracking;
      if (c === undefined || t === null || t === undefined || t.bcast || (t.noloop && c === current)) return;
      this.sendKeys(c, t, [key]);
    });
  }

  private stopFeeds(): void {
    this.limit.stop();
    if (this.timer !== null) clearInterval(this.timer);
    if (this.reconnectTimer !== null) clearTimeout(this.reconnectTimer);
    this.timer = null;
    this.reconnectTimer = null;
    for (const f of this.feeds.values()) f.close();
    this.feeds.clear();
    this.allReady = false;
    this.table.clear();
    for (const w of this.readyWaiters.splice(0)) w(); // nobody tracks any more: nothing to wait for
  }

  private readonly feedEvents = {
    ready: (): void => this.updateReady(),
    lost: (feed: ChangeFeed, reason: string): void => {
      this.flushGates.told(feed);
      if (this.feeds.get(feed.address) !== feed) return;
      this.feeds.delete(feed.address);
      this.allReady = false;
      log.warn({ node: feed.address, reason }, 'client-side caching: invalidation feed lost; tracking clients flushed');
      this.flushEverything();
      this.reconnectTimer ??= setTimeout(() => {
        this.reconnectTimer = null;
        this.syncFeeds();
      }, RECONNECT_MS);
    },
    changed: (keys: Buffer[] | null, feed: ChangeFeed): void => {
      if (keys !== null) return this.invalidateKeys(keys, feed);
      this.flushEverything();
      this.flushGates.told(feed);
    },
  };

  private invalidateKeys(keys: Buffer[], feed: ChangeFeed): void {
    // A node's batch is in key order; one Redis tells default-mode clients in the order keys changed.
    for (const key of this.writeOrder.sort(keys)) {
      const ids = this.table.take(key.toString('latin1'));
      if (ids !== undefined) this.invalidateEntry(key, ids, feed);
    }
    for (const c of this.bcast) {
      const t = c.tracking;
      if (t === null) continue;
      // One push per prefix, with the keys of this batch under it, as Redis broadcasts.
      for (const prefix of t.prefixes) {
        const matched = keys.filter((k) => t.prefixOf(k) === prefix && !t.ownChange(k.toString('latin1'), feed));
        if (matched.length > 0) this.sendKeys(c, t, matched);
      }
    }
  }

  /** Default mode: every client that read `key` gets it, except a NOLOOP client whose own write changed it. */
  private invalidateEntry(key: Buffer, ids: ClientIds, feed: ChangeFeed): void {
    forEachId(ids, (id) => {
      const c = this.trackers.get(id);
      const t = c?.tracking;
      if (c === undefined || t === null || t === undefined || t.bcast) return;
      if (t.ownChange(key.toString('latin1'), feed)) {
        // The client's own write: not told; but a read it sent after that write is still tracked.
        if (t.readAfterOwnWrite.delete(key.toString('latin1'))) this.table.add(key.toString('latin1'), id);
        return;
      }
      this.sendKeys(c, t, [key]);
    });
  }

  private sendKeys(client: CachingClient, tracking: ClientTracking, keys: Buffer[]): void {
    this.invalidationsSent++;
    this.send(client, tracking, encode.arrayOfBulks(keys));
  }

  /** Redis's sendTrackingMessage: to the client in RESP3, or to its REDIRECT target (a push, or a message in RESP2 subscribed mode). */
  private send(client: CachingClient, tracking: ClientTracking, body: Buffer): void {
    let target = client;
    const redirected = tracking.redirect !== 0;
    if (redirected) {
      const redirected = this.options.client(tracking.redirect);
      if (redirected === undefined) {
        tracking.brokenRedirect = true;
        if (client.protocol === 3) client.pushOutOfBand(encode.pushOfFrames([encode.bulk('tracking-redir-broken'), encode.integer(tracking.redirect)]));
        return;
      }
      target = redirected;
    }
    const hold = target === client ? tracking.pushHolds[0] : undefined;
    if (hold !== undefined && target.protocol === 3) hold.frames.push(PUSH_HEAD, body);
    else if (target.protocol === 3) target.pushOutOfBand(Buffer.concat([PUSH_HEAD, body]));
    else if (redirected && target.subscribed) target.pushOutOfBand(Buffer.concat([MESSAGE_HEAD, body]));
  }
}
