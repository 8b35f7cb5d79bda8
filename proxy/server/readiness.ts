/**
 * Whether this proxy can serve (GET /readyz): it listens (the endpoint starts after the listener),
 * its config is loaded, and it knows where keys go: a ring's placement from its config, a cluster's
 * slot map once loaded. A down ring server, or a slot whose master is being replaced, does not make
 * it unready: the other keys are still served, so taking every proxy out of a load balancer for
 * one shard would turn a partial outage into a total one. The nodes' own state is GET
 * /health/backends (./backend-health.ts), /metrics and the console. Null when ready, else why not.
 */
import { ProxyContext } from '../context';

export function readinessProblem(ctx: ProxyContext): Promise<string | null> {
  const topology = ctx.topology;
  if (topology !== null && topology.current.masters.length === 0) return Promise.resolve('the cluster topology is not loaded yet');
  return Promise.resolve(null);
}
