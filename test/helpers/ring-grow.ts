// Jest helper: three standalone redis-servers for a ring grown from 2 to 3 nodes (a, b -> a, b, c,
// md5), started in beforeAll and always stopped in afterAll of the enclosing block; `extraArgs` is
// appended to every node's redis-server command line (e.g. ['--enable-debug-command', 'yes']).
import { parseConfig } from '../../config/load';
import { RingModeConfig } from '../../config/schema';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';

const NAMES = ['a', 'b', 'c'];

export interface RingGrow {
  nodes: () => StandaloneNodes;
  /** A ring-mode config (listening on a free port) in double-write from a, b to a, b, c. */
  config: () => RingModeConfig;
}

export function useRingGrow(extraArgs?: string[]): RingGrow {
  let nodes: StandaloneNodes | undefined;
  beforeAll(async () => {
    nodes = await StandaloneNodes.start(3, { extraArgs });
  }, 60_000);
  afterAll(async () => {
    await nodes?.stop();
  }, 30_000);
  const started = (): StandaloneNodes => {
    if (nodes === undefined) throw new Error('useRingGrow: the nodes did not start');
    return nodes;
  };
  return {
    nodes: started,
    config: () => {
      const ring = (n: number): { name: string; addr: string; weight: number }[] =>
        started().addresses.slice(0, n).map((addr, i) => ({ name: NAMES[i], addr, weight: 1 }));
      const cfg = parseConfig({
        listen: '127.0.0.1:0',
        mode: 'ring',
        ring: { hash: 'md5', nodes: ring(2) },
        migration: { phase: 'double-write', to: { nodes: ring(3) } },
        log: { level: 'silent' },
      });
      if (cfg.mode !== 'ring') throw new Error('expected a ring config');
      return cfg;
    },
  };
}
