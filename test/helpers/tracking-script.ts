// Jest helper: one scripted conversation over several connections to one server, every byte each
// connection receives kept, for comparing client-side caching (CLIENT TRACKING) with one Redis.
//
// A step sends one request on one connection and waits for its reply (a PING marker follows it).
// Then every connection is synced: on the reference, a PING marker on each shows where its stream
// stood (invalidations Redis sent are already in it); on the proxy, the step first waits until each
// stream has reached the reference's length at that point (invalidations come from another node),
// then sends the same marker. The streams are compared without the sync replies (withoutSyncs):
// they are equal exactly when the proxy sent the same invalidations, in the same place relative to
// the client's own replies; only an invalidation of another client's write may fall on the other
// side of a sync reply (the proxy hears of that write from the node's feed, a moment later).

import net from 'node:net';
import { encodeRequest } from './raw-exchange';

export interface ScriptStep {
  /** Which connection sends it ('a', 'b', ...). */
  on: string;
  /** The request, or several sent together; `$id:x` stands for connection x's CLIENT ID. */
  args: string[] | string[][];
}

export interface ScriptRun {
  /** Each connection's bytes (latin1). */
  streams: Record<string, string>;
  /** Per step, where each connection's sync reply begins: all it received before that reply. */
  marks: Record<string, number>[];
}

/**
 * How long a step's reply may take before the step fails: a missing reply never comes, and a step
 * answers in milliseconds alone, but one took over 5 s on a loaded 2-core host running two test
 * files at once.
 */
const WAIT_MS = 15_000;

/** The head of a RESP2 subscriber's PING reply, the array [pong, marker]. */
const SUBSCRIBED_PONG = '*2\r\n$4\r\npong\r\n';

class Conn {
  received = '';
  private waiters: (() => void)[] = [];
  private constructor(readonly socket: net.Socket) {
    socket.on('data', (d: Buffer) => {
      this.received += d.toString('latin1');
      for (const w of this.waiters.splice(0)) w();
    });
    socket.on('error', () => undefined);
  }

  static async open(port: number): Promise<Conn> {
    const socket = net.connect(port, '127.0.0.1');
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    return new Conn(socket);
  }

  /** Resolves once `test` holds of what was received, or rejects after WAIT_MS. */
  until(test: (received: string) => boolean, what: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${what}: not within ${WAIT_MS} ms; received ${JSON.stringify(this.received)}`)), WAIT_MS);
      const check = (): void => {
        if (test(this.received)) {
          clearTimeout(timer);
          resolve();
        } else this.waiters.push(check);
      };
      check();
    });
  }

  /** Sends `requests`, waits for the marker's reply, and says where that reply begins in the stream. */
  async request(requests: string[][], marker: string): Promise<number> {
    const reply = `$${marker.length}\r\n${marker}\r\n`;
    // PING <marker>: answered with the marker as a bulk in RESP2 and RESP3, inside [pong, marker] in RESP2 subscribed mode.
    const from = this.received.length;
    this.socket.write(requests.map(encodeRequest).join('') + encodeRequest(['PING', marker]));
    // A push may follow the marker (Redis broadcasts BCAST keys once the turn's commands ran).
    await this.until((r) => r.includes(reply, from), marker);
    const at = this.received.indexOf(reply, from);
    return this.received.endsWith(SUBSCRIBED_PONG, at) ? at - SUBSCRIBED_PONG.length : at;
  }
}

/**
 * Runs `steps` against the server on `port`. `reference` (the same script's run on one Redis)
 * makes this run wait, after each step, until every stream holds what the reference's held before
 * that step's sync reply (a push caused by another client's write may still have been on the wire
 * when the step's reply came: one Redis sends it before that write's reply, so before the sync's).
 */
export async function runScript(
  port: number,
  names: string[],
  setup: Record<string, string[][]>,
  steps: ScriptStep[],
  reference?: ScriptRun,
): Promise<ScriptRun> {
  const conns = new Map<string, Conn>();
  const ids = new Map<string, string>();
  try {
    for (const name of names) {
      const c = await Conn.open(port);
      conns.set(name, c);
      c.socket.write(encodeRequest(['CLIENT', 'ID']));
      await c.until((r) => /^:\d+\r\n$/.test(r), 'CLIENT ID');
      ids.set(name, c.received.slice(1, -2));
      // Setup replies (HELLO's, which names the server) are not compared.
      await c.request(setup[name] ?? [], 'setup');
      c.received = '';
    }
    const marks: Record<string, number>[] = [];
    for (let i = 0; i < steps.length; i++) {
      const step = steps[i];
      const conn = conns.get(step.on) as Conn;
      const requests = (Array.isArray(step.args[0]) ? step.args : [step.args]) as string[][];
      await conn.request(requests.map((r) => r.map((a) => (a.startsWith('$id:') ? (ids.get(a.slice(4)) ?? a) : a))), `step-${i}`);
      const mark: Record<string, number> = {};
      for (const [name, c] of conns) {
        if (c.socket.destroyed) continue;
        const want = reference?.marks[i][name];
        if (want !== undefined) await c.until((r) => r.length >= want, `${name} after step ${i} (${step.args.join(' ')})`);
        mark[name] = await c.request([], `sync-${i}`);
      }
      marks.push(mark);
    }
    const streams: Record<string, string> = {};
    for (const [name, c] of conns) streams[name] = c.received;
    return { streams, marks };
  } finally {
    for (const c of conns.values()) c.socket.destroy();
  }
}

/** The streams without the harness's sync replies (`sync-N`, also inside a subscriber's [pong, marker]). */
export function withoutSyncs(streams: Record<string, string>): Record<string, string> {
  const marker = /(\*2\r\n\$4\r\npong\r\n|>2\r\n\$4\r\npong\r\n)?\$\d+\r\nsync-\d+\r\n/g;
  return Object.fromEntries(Object.entries(streams).map(([k, v]) => [k, v.replace(marker, '')]));
}
