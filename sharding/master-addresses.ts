/**
 * Ring nodes given by their Sentinel master name (`master:`) have no address in the config, or
 * only the one to try while no sentinel answers: these place them where their masters are now.
 * Names, weights and order stay, so a ring built from the result puts every key where the config
 * does (ketama's points come from the names); only addresses differ.
 */
import { MigrationConfig, RingConfig, RingNode } from '../config/schema';

/** Where a Sentinel master is now, or undefined while nobody has said. */
export type MasterAddresses = (master: string) => string | undefined;

function nodesAt(nodes: readonly RingNode[], at: MasterAddresses): RingNode[] {
  return nodes.map((n) => (n.master === undefined ? n : { ...n, addr: at(n.master) ?? n.addr }));
}

/** `ring` with each Sentinel-managed node at its master's address (the configured `addr` while unknown). */
export function ringAt(ring: RingConfig, at: MasterAddresses): RingConfig {
  return ring.nodes.some((n) => n.master !== undefined) ? { ...ring, nodes: nodesAt(ring.nodes, at) } : ring;
}

/** The same for a migration's ring B (a cluster B is left as it is). */
export function migrationAt(migration: MigrationConfig | undefined, at: MasterAddresses): MigrationConfig | undefined {
  if (migration === undefined || !('nodes' in migration.to)) return migration;
  return { ...migration, to: { ...migration.to, nodes: nodesAt(migration.to.nodes, at) } };
}

/** Every Sentinel master name of the ring and of a migration's ring B, in config order, once each. */
export function masterNames(ring: RingConfig, migration: MigrationConfig | undefined): string[] {
  const to = migration !== undefined && 'nodes' in migration.to ? migration.to.nodes : [];
  return [...new Set([...ring.nodes, ...to].flatMap((n) => (n.master === undefined ? [] : [n.master])))];
}
