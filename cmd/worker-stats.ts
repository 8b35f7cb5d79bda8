/**
 * nutcracker's stats port under --workers: the primary serves it, and every time it rebuilds the
 * JSON it asks each worker for its pools' counts over the cluster IPC channel and sums them
 * (proxy/telemetry/nutcracker-stats.ts's sumPoolSources), so the JSON counts the whole process
 * group as one nutcracker would. A worker that does not answer within a second (starting, or
 * gone) is left out of that build.
 */
import cluster, { Worker } from 'node:cluster';
import { NamedPoolSource, NutcrackerStatsPool, sumPoolSources } from '../proxy/telemetry/nutcracker-stats';

const REQUEST = 'slotproxy:nutcracker-stats?';
const REPLY = 'slotproxy:nutcracker-stats';
const ANSWER_WITHIN_MS = 1000;

interface StatsRequest {
  type: typeof REQUEST;
  id: number;
}

interface StatsReply {
  type: typeof REPLY;
  id: number;
  pools: NamedPoolSource[];
}

/** In a worker: answers the primary's requests with `pools`' counts. */
export function answerStatsRequests(pools: readonly NutcrackerStatsPool[]): void {
  process.on('message', (m: Partial<StatsRequest> | null) => {
    if (m?.type !== REQUEST || typeof m.id !== 'number') return;
    const reply: StatsReply = { type: REPLY, id: m.id, pools: pools.map((p) => ({ name: p.name, source: p.read() })) };
    process.send?.(reply);
  });
}

let nextId = 0;

/** One worker's counts, or null when it does not answer in time. */
function ask(worker: Worker, id: number): Promise<NamedPoolSource[] | null> {
  return new Promise((resolve) => {
    const done = (pools: NamedPoolSource[] | null): void => {
      clearTimeout(timer);
      worker.off('message', onMessage);
      resolve(pools);
    };
    const onMessage = (m: Partial<StatsReply> | null): void => {
      if (m?.type === REPLY && m.id === id && Array.isArray(m.pools)) done(m.pools);
    };
    const timer = setTimeout(() => done(null), ANSWER_WITHIN_MS);
    worker.on('message', onMessage);
    // A worker that has just died (EPIPE): left out at once, not after the timeout.
    worker.send({ type: REQUEST, id } satisfies StatsRequest, (err: Error | null) => {
      if (err !== null) done(null);
    });
  });
}

/** In the primary: every connected worker's counts, summed. */
export async function gatherWorkerStats(): Promise<NamedPoolSource[]> {
  const id = nextId++;
  const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && w.isConnected());
  const answers = await Promise.all(workers.map((w) => ask(w, id)));
  return sumPoolSources(answers.filter((a): a is NamedPoolSource[] => a !== null));
}
