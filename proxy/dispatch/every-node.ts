/**
 * CONFIG SET, CONFIG RESETSTAT and CONFIG REWRITE through the proxy: sent to every node, masters and
 * replicas (in ring mode every node of the ring, and of ring B during a migration), so the client
 * sees one server whose settings are the same wherever its keys live. RESETSTAT resets the proxy's
 * own counters too. SAVE, BGSAVE and BGREWRITEAOF take the same path to every master alone.
 *
 * CONFIG SET is all or nothing: every node's current values of the parameters are read first
 * (CONFIG GET), then the first master checks the new ones (Redis validates and applies a CONFIG SET
 * as a whole on one node), then every other node takes them. When any node refuses or cannot be
 * reached, the nodes that took them are set back to their own old values. RESETSTAT and REWRITE
 * cannot be undone: every node is asked, and an error says on how many it was done. Errors keep
 * the node's own text first (so its code, `ERR`, `NOPERM` ...) and name the node. `requirepass` is
 * the proxy's and never sent; parameters that would cut the proxy off its nodes are refused
 * (config-set.ts).
 */
import { ProxyContext } from '../context';
import { ReplyOwner, ReplySlot } from '../client/reply-slot';
import { request } from '../backend/request';
import { Reply, decodeReply, errorText } from '../resp/decode-reply';
import * as encode from '../resp/encode';
import * as errors from '../resp/errors';
import { planConfigSet } from './config-set';

/** Every node, masters first (the first master is the one that validates a CONFIG SET). */
export function everyNode(ctx: ProxyContext): string[] {
  const topology = ctx.topology;
  if (topology === null) return ctx.ring?.placement.allAddresses() ?? [...ctx.router.masters()];
  // Cluster mode: the cluster's masters and replicas, and during a migration side B's masters.
  const masters = topology.current.masters.map((m) => m.address);
  const replicas = topology.current.masters.flatMap((m) => m.replicas);
  return [...new Set([...masters, ...replicas, ...(ctx.ring?.placement.to?.masters() ?? [])])];
}

/** A node's reply, or the text of its error (a refusal, or the proxy's: unreachable, lost). */
type Outcome = { ok: true; frame: Buffer } | { ok: false; text: string };

export class EveryNodeCommand extends ReplySlot {
  constructor(private readonly ctx: ProxyContext, owner: ReplyOwner, private readonly nodes: readonly string[]) {
    super(owner);
  }

  start(name: string, args: Buffer[]): void {
    if (name === 'config|set') return this.startConfigSet(args);
    this.run(name, args, () => undefined);
  }

  /** CONFIG SET: requirepass is the proxy's, taken once the nodes took the rest; some parameters are refused whole. */
  private startConfigSet(args: Buffer[]): void {
    const plan = planConfigSet(args);
    if (plan.kind === 'refuse') return this.complete(encode.error(plan.message));
    const password = plan.requirepass;
    const applied = password === null ? () => undefined : () => this.ctx.auth.setRequirepass(password);
    if (plan.forward === null) {
      applied();
      return this.complete(encode.OK);
    }
    this.run('config|set', plan.forward, applied);
  }

  /** `applied`: what the proxy itself takes once every node took the command. */
  private run(name: string, args: Buffer[], applied: () => void): void {
    if (this.nodes.length === 0) return this.complete(encode.error(errors.PROXY_NOT_READY));
    // BGSAVE takes SCHEDULE alone: anything else is refused as one Redis refuses it, not by every node.
    if (name === 'bgsave' && args.length > 1 && (args.length > 2 || args[1].toString('latin1').toLowerCase() !== 'schedule')) {
      return this.complete(encode.error(errors.SYNTAX_ERROR));
    }
    // The proxy is part of the one server: its own counters too, and its per-command counts.
    if (name === 'config|resetstat') this.resetProxyCounters();
    const run = name === 'config|set' ? this.configSet(args) : this.everywhere(args);
    // tracking-table-max-keys is the proxy's own too: taken at once, set back if the nodes refuse.
    const undoMaxKeys = name === 'config|set' ? this.ctx.caching.configSet(args) : null;
    run.then(
      (frame) => {
        if (frame[0] !== 43 /* + */) undoMaxKeys?.();
        // A new busy threshold: the pool stops using a lane stuck behind a script after it.
        if (name === 'config|set' && frame[0] === 43 /* + */) this.learnBusyThreshold(args);
        if (frame[0] === 43 /* + */) applied();
        this.complete(frame);
      },
      (err: Error) => {
        undoMaxKeys?.();
        this.complete(encode.error(`ERR slotproxy: ${err.message}`));
      },
    );
  }

  private resetProxyCounters(): void {
    this.ctx.stats.resetCounters();
    for (const info of this.ctx.table.all()) info.counters.calls = 0;
  }

  private learnBusyThreshold(args: Buffer[]): void {
    for (let i = 2; i + 1 < args.length; i += 2) {
      const param = args[i].toString('latin1').toLowerCase();
      if (param === 'busy-reply-threshold' || param === 'lua-time-limit') this.ctx.pool.setBusyAfter(Number(args[i + 1].toString('latin1')));
    }
  }

  private async send(address: string, args: readonly (Buffer | string)[]): Promise<Outcome> {
    try {
      const frame = await request(this.ctx.pool.connection(address, this.owner.id), args);
      const text = errorText(frame);
      return text === null ? { ok: true, frame } : { ok: false, text };
    } catch (err) {
      return { ok: false, text: (err as Error).message };
    }
  }

  /** RESETSTAT, REWRITE: every node at once; OK when all did it. */
  private async everywhere(args: Buffer[]): Promise<Buffer> {
    const outcomes = await Promise.all(this.nodes.map((n) => this.send(n, args)));
    const refused = this.verdict(outcomes, (failed) => errors.doneOnNodes(this.nodes.length - failed, this.nodes.length));
    return refused ?? (outcomes[0] as Extract<Outcome, { ok: true }>).frame;
  }

  /** The first refusal with its node named, or null when every node took the command. */
  private verdict(outcomes: Outcome[], outcome: (failedCount: number) => string): Buffer | null {
    const failed = outcomes.flatMap((o, i) => (o.ok ? [] : [this.nodes[i]]));
    const first = outcomes.find((o): o is Extract<Outcome, { ok: false }> => !o.ok);
    return first === undefined ? null : encode.error(errors.onNodes(first.text, failed, outcome(failed.length)));
  }

  private async configSet(args: Buffer[]): Promise<Buffer> {
    const [first, ...others] = this.nodes;
    // An odd argument count is the node's own syntax error: nothing to read back.
    const params = args.length % 2 === 0 ? args.filter((_, i) => i >= 2 && i % 2 === 0) : [];
    const before = params.length === 0 ? [] : await Promise.all(this.nodes.map((n) => this.send(n, ['CONFIG', 'GET', ...params])));
    const unread = this.verdict(before, () => errors.NO_NODE_CHANGED);
    if (unread !== null) return unread;

    const validated = await this.send(first, args);
    if (!validated.ok) return encode.error(errors.onNodes(validated.text, [first], errors.NO_NODE_CHANGED));
    const outcomes = [validated, ...(await Promise.all(others.map((n) => this.send(n, args))))];
    if (outcomes.every((o) => o.ok)) return validated.frame;

    // Some node refused: the others go back to their own old values.
    const setBack = await Promise.all(
      this.nodes.map(async (node, i) => {
        if (!outcomes[i].ok) return true;
        const old = oldValues(params, (before[i] as Extract<Outcome, { ok: true }>).frame);
        return old !== null && (await this.send(node, ['CONFIG', 'SET', ...old])).ok;
      }),
    );
    const stuck = this.nodes.filter((_, i) => !setBack[i]);
    return this.verdict(outcomes, () => (stuck.length === 0 ? errors.NODES_SET_BACK : errors.notSetBack(stuck))) ?? validated.frame;
  }
}

/** `param value ...` restoring `params` from a node's CONFIG GET reply; null when one is missing. */
function oldValues(params: readonly Buffer[], getReply: Buffer): Buffer[] | null {
  const pairs = decodeReply(getReply, true) as Reply[];
  const values = new Map<string, Buffer>();
  for (let i = 0; i + 1 < pairs.length; i += 2) values.set(String(pairs[i]).toLowerCase(), pairs[i + 1] as Buffer);
  const out: Buffer[] = [];
  for (const p of params) {
    const value = values.get(p.toString().toLowerCase());
    if (value === undefined) return null;
    out.push(p, value);
  }
  return out;
}
