/**
 * The HTTP listener under --workers: the primary serves /metrics (summed by prom-client's
 * AggregatorRegistry) and the console; a worker answers, over the cluster IPC channel, whether a
 * request's credentials may read them (its users and rules, as reloaded) and its own console state,
 * which the primary merges into one page (proxy/console/merge.ts). A worker that does not answer
 * within a second (starting, or gone) is left out.
 */
import cluster, { Worker } from 'node:cluster';
import type { ConsoleSource } from '../proxy/console/http';
import type { HttpScope, Refusal } from '../proxy/console/http-auth';
import { mergeStates } from '../proxy/console/merge';
import type { ConsoleState } from '../proxy/console/state';
import type { WorkerHttp } from '../proxy/server/server';

const REQUEST = 'slotproxy:http?';
const REPLY = 'slotproxy:http';
const ANSWER_WITHIN_MS = 1000;

interface HttpRequest {
  type: typeof REQUEST;
  id: number;
  /** Check these credentials (null: do not check), and/or send the console's state. */
  check: { scope: HttpScope; authorization: string | undefined } | null;
  state: boolean;
}

interface HttpReply {
  type: typeof REPLY;
  id: number;
  refusal: Refusal | null;
  state: ConsoleState | null;
  error: string | null;
}

/** In a worker: answers the primary's questions from `http` (the first pool's, which owns `metrics`). */
export function answerHttpRequests(http: WorkerHttp): void {
  process.on('message', (m: Partial<HttpRequest> | null) => {
    if (m?.type !== REQUEST || typeof m.id !== 'number') return;
    const id = m.id;
    const refusal = m.check == null ? null : http.refusal(m.check.scope, m.check.authorization);
    const reply = (state: ConsoleState | null, error: string | null): void => void process.send?.({ type: REPLY, id, refusal, state, error } satisfies HttpReply);
    if (refusal !== null || m.state !== true || http.consoleState === null) return reply(null, null);
    http.consoleState().then(
      (state) => reply(state, null),
      (err: Error) => reply(null, err.message),
    );
  });
}

let nextId = 0;

function ask(worker: Worker, request: Omit<HttpRequest, 'type' | 'id'>): Promise<HttpReply | null> {
  const id = nextId++;
  return new Promise((resolve) => {
    const done = (reply: HttpReply | null): void => {
      clearTimeout(timer);
      worker.off('message', onMessage);
      resolve(reply);
    };
    const onMessage = (m: Partial<HttpReply> | null): void => {
      if (m?.type === REPLY && m.id === id) done(m as HttpReply);
    };
    const timer = setTimeout(() => done(null), ANSWER_WITHIN_MS);
    worker.on('message', onMessage);
    // A worker that has just died (EPIPE): left out at once, not after the timeout.
    worker.send({ type: REQUEST, id, ...request } satisfies HttpRequest, (err: Error | null) => {
      if (err !== null) done(null);
    });
  });
}

function connectedWorkers(): Worker[] {
  return Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && w.isConnected());
}

/** In the primary: asks the first worker that answers whether `authorization` may read `scope`. */
export async function workersRefusal(scope: HttpScope, authorization: string | undefined): Promise<Refusal | null> {
  for (const worker of connectedWorkers()) {
    const reply = await ask(worker, { check: { scope, authorization }, state: false });
    if (reply !== null) return reply.refusal;
  }
  throw new Error('no worker answers');
}

/** In the primary: the console of every worker, as one page. */
export function workersConsole(): ConsoleSource {
  return {
    refusal: (authorization) => workersRefusal('console', authorization),
    async state() {
      const replies = await Promise.all(connectedWorkers().map((w) => ask(w, { check: null, state: true })));
      const states = replies.map((r) => r?.state ?? null).filter((s): s is ConsoleState => s !== null);
      if (states.length === 0) throw new Error(replies.find((r) => r?.error)?.error ?? 'no worker answers');
      return mergeStates(states, process.pid);
    },
  };
}
