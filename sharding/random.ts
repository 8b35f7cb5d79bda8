/**
 * twemproxy's `distribution: random` (nc_random.c): one entry per live server, weights ignored, and every request takes `random() % entries`, whatever its key. There is no
 * key -> node function: a key written through one request may be read from another node.
 *
 * The random source is given (a seeded one in tests); nothing else here is impure.
 */
import type { NodeLookup } from './distribution';

export class RandomPick implements NodeLookup {
  readonly points: readonly number[];
  private readonly live: Uint16Array;

  /** `live`: config indexes of the nodes in the ring, in config order. */
  constructor(nodeCount: number, live: readonly number[], private readonly random: () => number) {
    if (live.length === 0) throw new Error('a random ring needs at least one live node');
    this.live = Uint16Array.from(live);
    const points = new Array<number>(nodeCount).fill(0);
    for (const i of live) points[i] = 1;
    this.points = Object.freeze(points);
  }

  get size(): number {
    return this.live.length;
  }

  /** A live node picked at random; the hash is not used (nutcracker does not even compute it). */
  indexOfHash(_hash: number): number {
    const pick = Math.floor(this.random() * this.live.length);
    // random() may return a value that rounds up to 1 in some generators: stay in range.
    return this.live[Math.min(pick, this.live.length - 1)];
  }
}
