/**
 * Where each Sentinel-managed ring server's master is now, as the sentinels say (SPEC 6: a ring
 * server may be a Sentinel master, named by its master name).
 *
 * Asked of the sentinels at start, for every master; again for all of them whenever a
 * subscription to a sentinel takes (after a sentinel was down, switches may have been missed),
 * every `refreshIntervalMs`, and for one master when something hints that it moved (its
 * connection lost, a READONLY reply, ROLE saying replica: `check()`). `+switch-master` from any
 * sentinel moves it at once.
 *
 * Each question goes to every sentinel at once (`SENTINEL MASTER`), and the view with the highest
 * config epoch wins: a sentinel back from a crash answers from its old config file until it hears
 * the others, and must not send the ring back to a master that failed (and may have restarted
 * empty). A view older than the one followed is never taken; a `+switch-master` counts as newer
 * than the view it replaces. A sentinel down costs a failed question; with every sentinel down the
 * last known addresses stay, which is logged once per outage, and the questions go on.
 *
 * A master's new address is announced to `onSwitch` listeners (proxy/sentinel/follow.ts moves the
 * ring's node there). The map is the one truth every ring placement is built from
 * (sharding/master-addresses.ts), so a rebuilt placement (a reload, auto-eject) agrees with it.
 */
import { ConnectionOptions } from '../backend/connection';
import { log } from '../telemetry/log';
import { SentinelLink, SentinelReplica } from './sentinel-link';

export interface SentinelMastersOptions {
  sentinels: readonly string[];
  /** How sentinel connections are opened: their AUTH handshake, TLS, timeouts. */
  connection: ConnectionOptions;
  /** Every master is asked for again this often. */
  refreshIntervalMs: number;
  /** One question to one sentinel. */
  queryTimeoutMs: number;
}

type SwitchListener = (name: string, from: string | undefined, to: string) => void;
type PromotionListener = (name: string, ended: boolean) => void;

/** A check of one master already asked for recently is not asked again before this. */
const CHECK_SPACING_MS = 100;

export class SentinelMasters {
  /** Master name -> its address now. */
  private readonly at = new Map<string, string>();
  /** Master name -> the config epoch of the view followed (at least; a +switch-master adds one). */
  private readonly epochs = new Map<string, number>();
  /** Every address a master has had (now or before) -> the master's name. */
  private readonly owners = new Map<string, string>();
  private readonly links: SentinelLink[];
  /** The sentinel that answered last is asked first for replicas. */
  private preferred = 0;
  private readonly checks = new Map<string, Promise<void>>();
  private readonly checkedAt = new Map<string, number>();
  /** A check asked for too soon after the last one, to run once the spacing allows. */
  private readonly deferred = new Map<string, { timer: NodeJS.Timeout; done: Promise<void> }>();
  private readonly listeners: SwitchListener[] = [];
  private readonly promotionListeners: PromotionListener[] = [];
  private readonly timer: NodeJS.Timeout;
  /** Set while no sentinel answers (logged once per outage). */
  private allDownSince: number | null = null;
  private stopped = false;

  /**
   * `guesses`: a configured `addr` per master, used until a sentinel answers. Call `start()` next.
   */
  constructor(
    private readonly masters: readonly string[],
    guesses: ReadonlyMap<string, string>,
    private readonly options: SentinelMastersOptions,
  ) {
    for (const [name, addr] of guesses) this.set(name, addr);
    this.links = options.sentinels.map(
      (address) =>
        new SentinelLink(address, options.connection, {
          switched: (name, from, to) => this.switched(name, from, to),
          promoting: (name, ended) => {
            if (!this.at.has(name)) return;
            log.info({ master: name, sentinel: address, ended }, ended ? 'Sentinel gave up promoting a replica' : 'Sentinel is promoting a replica; writes for its master wait');
            for (const l of this.promotionListeners) l(name, ended);
          },
          subscribed: (sentinel) => {
            log.debug({ sentinel }, 'subscribed to +switch-master');
            void this.checkAll('a sentinel subscription (re)started');
          },
          lost: (sentinel, reason) => log.debug({ sentinel, reason }, 'sentinel subscription lost; retrying'),
        }),
    );
    this.timer = setInterval(() => void this.checkAll('periodic'), options.refreshIntervalMs);
    this.timer.unref();
  }

  /**
   * Asks for every master once. Throws, naming them, when some master has neither an answer nor a
   * configured address: the ring cannot be placed without it.
   */
  async start(): Promise<void> {
    await this.learn(this.masters);
    const unknown = this.masters.filter((n) => !this.at.has(n));
    if (unknown.length > 0) throw new Error(`ring.sentinels: no sentinel said where master ${unknown.join(', ')} is, and the config gives no addr for it`);
  }

  /** Asks for masters named now (a reloaded config names new ones); those nobody knows stay unknown. */
  async learn(names: readonly string[]): Promise<void> {
    await Promise.all(names.map((n) => this.check(n, 'start')));
  }

  /** Where master `name` is now (undefined while unknown). An arrow: placements are built with it. */
  readonly addressOf = (name: string): string | undefined => this.at.get(name);

  /** Every master known (the config's, and those a reload added). */
  names(): string[] {
    return [...new Set([...this.masters, ...this.at.keys()])];
  }

  /** The master `address` belongs (or belonged) to, or undefined when it is no Sentinel master's. */
  nameOf(address: string): string | undefined {
    return this.owners.get(address);
  }

  /** Called with every move of a master (`from` undefined the first time one is learnt without a guess). */
  onSwitch(listener: SwitchListener): void {
    this.listeners.push(listener);
  }

  /** Called when a sentinel starts promoting a replica of a master (`ended` false), and if it gives up (true). */
  onPromotion(listener: PromotionListener): void {
    this.promotionListeners.push(listener);
  }

  /** The replicas of master `name` as the first sentinel that answers knows them; null when none does. */
  async replicasOf(name: string): Promise<SentinelReplica[] | null> {
    for (const link of this.inTurn()) {
      try {
        return await link.replicas(name, this.options.queryTimeoutMs);
      } catch {
        // The next sentinel.
      }
    }
    return null;
  }

  /**
   * Asks the sentinels where master `name` is, now: one question in flight per master, and one
   * waiting at most, when the last was under CHECK_SPACING_MS ago (many hints at once, such as every
   * lane of a node refused, make one question). Never throws.
   */
  check(name: string, why: string): Promise<void> {
    const running = this.checks.get(name);
    if (running !== undefined) return running;
    const waiting = this.deferred.get(name);
    if (waiting !== undefined) return waiting.done;
    const wait = CHECK_SPACING_MS - (Date.now() - (this.checkedAt.get(name) ?? 0));
    if (why !== 'start' && wait > 0) {
      let timer: NodeJS.Timeout | undefined;
      const done = new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          this.deferred.delete(name);
          resolve(this.check(name, why));
        }, wait);
        timer.unref();
      });
      this.deferred.set(name, { timer: timer as NodeJS.Timeout, done });
      return done;
    }
    const run = this.ask(name, why).finally(() => {
      this.checks.delete(name);
      this.checkedAt.set(name, Date.now());
    });
    this.checks.set(name, run);
    return run;
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
    for (const d of this.deferred.values()) clearTimeout(d.timer);
    this.deferred.clear();
    for (const l of this.links) l.close();
  }

  private async checkAll(why: string): Promise<void> {
    await Promise.all(this.masters.map((n) => this.check(n, why)));
    // Masters a reload added are in `at` too.
    await Promise.all([...this.at.keys()].filter((n) => !this.masters.includes(n)).map((n) => this.check(n, why)));
  }

  /** The links, the one that answered last first. */
  private inTurn(): SentinelLink[] {
    return [...this.links.slice(this.preferred), ...this.links.slice(0, this.preferred)];
  }

  private async ask(name: string, why: string): Promise<void> {
    const problems: string[] = [];
    const views = await Promise.all(
      this.links.map(async (link, i) => {
        try {
          const view = await link.master(name, this.options.queryTimeoutMs);
          if (view === null) problems.push(`${link.address} does not know master ${name}`);
          return view === null ? null : { ...view, i };
        } catch (err) {
          problems.push(err instanceof Error ? err.message : String(err));
          return null;
        }
      }),
    );
    if (this.stopped) return;
    let best: { address: string; epoch: number; i: number } | null = null;
    for (const v of views) if (v !== null && (best === null || v.epoch > best.epoch)) best = v;
    if (best !== null) {
      this.preferred = best.i;
      this.answered();
      const known = this.epochs.get(name);
      // Older than what is followed: a sentinel that has not caught up (the others may be down).
      if (known !== undefined && best.epoch < known) return;
      this.epochs.set(name, best.epoch);
      this.moveTo(name, best.address, `sentinel ${this.links[best.i].address}, config epoch ${best.epoch} (${why})`);
      return;
    }
    if (this.allDownSince === null) {
      this.allDownSince = Date.now();
      log.error({ master: name, known: this.at.get(name) ?? null, problems }, 'no sentinel answered; the last known masters stay, and the sentinels are asked again');
    }
  }

  private answered(): void {
    if (this.allDownSince === null) return;
    log.info({ downForMs: Date.now() - this.allDownSince }, 'a sentinel answers again');
    this.allDownSince = null;
  }

  private switched(name: string, from: string, to: string): void {
    if (!this.at.has(name) && !this.masters.includes(name)) return;
    const now = this.at.get(name);
    if (now === to) return;
    // An event about an older move (a sentinel that lags): ask rather than go back.
    if (now !== undefined && now !== from) return void this.check(name, `+switch-master from ${from}, not from ${now}`);
    // Newer than the view it replaces; the next question learns its real epoch.
    this.epochs.set(name, (this.epochs.get(name) ?? 0) + 1);
    this.moveTo(name, to, '+switch-master');
  }

  private moveTo(name: string, address: string, why: string): void {
    const from = this.at.get(name);
    if (from === address) return;
    this.set(name, address);
    if (from !== undefined) log.warn({ master: name, from, to: address, why }, 'Sentinel master moved: its ring server follows');
    for (const l of this.listeners) l(name, from, address);
  }

  private set(name: string, address: string): void {
    this.at.set(name, address);
    this.owners.set(address, name);
  }
}
