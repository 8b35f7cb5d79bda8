/**
 * Under `--workers N` the primary serves the console: each worker builds its own state
 * (state.ts) and this makes one page of them, the process's. Counts that every worker has its
 * share of are summed (clients, requests, errors, connections to each node, per-second samples);
 * what every worker sees alike (placement, migration, sentinel) is taken from the first; events
 * are merged, those every worker logged alike (a reload, a phase switch) kept once.
 */
import { ConsoleEvent, Sample } from './recorder';
import { ConsoleState, NodeView } from './state';

/** `states` in worker order (not empty); `pid`: the primary's. */
export function mergeStates(states: readonly ConsoleState[], pid: number): ConsoleState {
  const first = states[0];
  return {
    ...first,
    at: Math.max(...states.map((s) => s.at)),
    proxy: { ...first.proxy, pid, workers: states.length, uptimeSeconds: Math.max(...states.map((s) => s.proxy.uptimeSeconds)) },
    clients: {
      connected: sum(states, (s) => s.clients.connected),
      totalConnections: sum(states, (s) => s.clients.totalConnections),
      byUser: sumRecords(states.map((s) => s.clients.byUser)),
      requestsPerSecond: sum(states, (s) => s.clients.requestsPerSecond),
      rejected: sum(states, (s) => s.clients.rejected),
    },
    nodes: mergeNodes(states),
    migration: states.find((s) => s.migration !== null)?.migration ?? null,
    events: mergeEvents(states.map((s) => s.events)),
    series: mergeSeries(states.map((s) => s.series)),
  };
}

function sum<T>(items: readonly T[], of: (item: T) => number): number {
  return items.reduce((total, item) => total + of(item), 0);
}

function sumRecords(records: readonly Record<string, number>[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of records) for (const [k, n] of Object.entries(r)) out[k] = (out[k] ?? 0) + n;
  return out;
}

/** A node's counts summed; its health is the worst any worker saw with a probe answer (down over up). */
function mergeNodes(states: readonly ConsoleState[]): NodeView[] {
  const out = new Map<string, NodeView>();
  for (const s of states) {
    for (const n of s.nodes) {
      const seen = out.get(n.addr);
      if (seen === undefined) {
        out.set(n.addr, { ...n });
        continue;
      }
      seen.connections += n.connections;
      seen.requestsPerSecond += n.requestsPerSecond;
      seen.errorsPerSecond += n.errorsPerSecond;
      seen.errors += n.errors;
      if (n.health === 'down' || seen.health === 'unknown') {
        seen.health = n.health;
        seen.error = n.error ?? seen.error;
      }
      if (n.pingMs !== null && (seen.pingMs === null || n.pingMs > seen.pingMs)) seen.pingMs = n.pingMs;
    }
  }
  return [...out.values()];
}

/** Events of every worker, oldest first; the same kind and text within a second counted once. */
function mergeEvents(lists: readonly ConsoleEvent[][]): ConsoleEvent[] {
  const all = lists.flat().sort((a, b) => a.at - b.at);
  const out: ConsoleEvent[] = [];
  for (const e of all) {
    const twin = out.find((o) => o.kind === e.kind && o.text === e.text && Math.abs(o.at - e.at) < 1000);
    if (twin === undefined) out.push(e);
  }
  return out;
}

/** Samples of the same second summed (latency: the mean weighted by requests, p99: the highest). */
function mergeSeries(lists: readonly Sample[][]): Sample[] {
  const bySecond = new Map<number, { sample: Sample; latencyWeight: number }>();
  for (const list of lists) {
    for (const s of list) {
      const second = Math.round(s.at / 1000);
      const seen = bySecond.get(second);
      if (seen === undefined) {
        bySecond.set(second, { sample: { ...s }, latencyWeight: s.latencyMs === null ? 0 : s.requests });
        continue;
      }
      const m = seen.sample;
      if (s.latencyMs !== null) {
        const weight = seen.latencyWeight + s.requests;
        m.latencyMs = weight === 0 ? s.latencyMs : ((m.latencyMs ?? 0) * seen.latencyWeight + s.latencyMs * s.requests) / weight;
        seen.latencyWeight = weight;
      }
      if (s.p99Ms !== null && (m.p99Ms === null || s.p99Ms > m.p99Ms)) m.p99Ms = s.p99Ms;
      m.requests += s.requests;
      m.errors += s.errors;
      m.clients += s.clients;
      m.at = Math.max(m.at, s.at);
    }
  }
  return [...bySecond.entries()].sort((a, b) => a[0] - b[0]).map(([, v]) => v.sample);
}
