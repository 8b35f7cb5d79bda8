/**
 * How a ring puts keys on its nodes: twemproxy's `distribution`, one file each (ketama.ts,
 * modula.ts, random.ts), chosen by ring.ts. Every one is built from the live nodes alone (all of
 * them, or those auto_eject_hosts has not taken out), as nutcracker rebuilds its continuum
 * (nc_server.c: server_pool_run) whenever a server leaves or comes back.
 */

/**
 * twemproxy's order of a pool's servers: nutcracker sorts its server list by name when it reads
 * the config (nc_conf.c, conf_validate_server: string_compare, shorter first, then bytewise), so
 * the order of the lines in nutcracker.yml never counts; ketama and modula both follow this order.
 */
export function twemproxyOrder(nodes: readonly DistributedNode[], indexes: readonly number[]): number[] {
  return [...indexes].sort((a, b) => {
    const x = nodes[a].name;
    const y = nodes[b].name;
    return x.length !== y.length ? x.length - y.length : Buffer.compare(x, y);
  });
}

/** A node as a distribution sees it, in config order. */
export interface DistributedNode {
  /** Its identity (ketama makes its points from it). */
  readonly name: Buffer;
  readonly weight: number;
}

export interface NodeLookup {
  /** Config index of the node a key hashing to `hash` goes to (random: any live node; the hash is not used). */
  indexOfHash(hash: number): number;
  /** Per node in config order, its share: ketama points, modula slots, 1 for random; 0 for a node out of the ring. */
  readonly points: readonly number[];
  /** Entries of the lookup: ketama points, modula slots (the live nodes' total weight), or live nodes. */
  readonly size: number;
}
