import { statsFromFlags } from '../../cmd/nutcracker';
import { parseConfig } from '../../config/load';
import { NodeCounters } from '../../proxy/backend/node-counters';
import { NutcrackerPoolSource, nutcrackerStatsJson, sumPoolSources } from '../../proxy/telemetry/nutcracker-stats';

test("-s/-a map onto a stats listen with nutcracker's defaults for the other; neither: no stats port", () => {
  expect(statsFromFlags({})).toBeUndefined();
  expect(statsFromFlags({ statsInterval: '100' })).toBeUndefined();
  expect(statsFromFlags({ statsPort: '3333' })).toEqual({ listen: '0.0.0.0:3333', intervalMs: 30_000 });
  expect(statsFromFlags({ statsAddr: '127.0.0.1', statsInterval: '250' })).toEqual({ listen: '127.0.0.1:22222', intervalMs: 250 });
  expect(statsFromFlags({ statsAddr: '::1', statsPort: '1' })).toEqual({ listen: '[::1]:1', intervalMs: 30_000 });
});

test('stats config: defaults, and errors that name the field', () => {
  const ring = { mode: 'ring', ring: { nodes: [{ addr: '127.0.0.1:6379' }] } };
  expect(parseConfig({ ...ring, stats: { listen: '127.0.0.1:22222' } }).stats).toEqual({ listen: '127.0.0.1:22222', intervalMs: 30_000, pool: 'slotproxy' });
  expect(parseConfig(ring).stats).toBeUndefined();
  expect(() => parseConfig({ ...ring, stats: { listen: '127.0.0.1:22222', intervalMs: 0 } })).toThrow(/stats\.intervalMs/);
  expect(() => parseConfig({ ...ring, stats: {} })).toThrow(/stats\.listen/);
});

test("the JSON: nutcracker's fields in its order, servers keyed as given, counters copied", () => {
  const counters = new NodeCounters();
  counters.requests = 3;
  counters.responses = 2;
  counters.ejects = 1;
  const source: NutcrackerPoolSource = {
    clientEof: 4,
    clientErr: 1,
    clientConnections: 2,
    totalClients: 7,
    forwardErrors: 0,
    backendConnectsStarted: 2,
    servers: [
      { key: 'first', counters, connections: 1, inQueue: 0, inQueueBytes: 0, outQueue: 1, outQueueBytes: 14 },
      { key: '127.0.0.1:6380', counters: new NodeCounters(), connections: 1, inQueue: 0, inQueueBytes: 0, outQueue: 0, outQueueBytes: 0 },
    ],
  };
  const text = nutcrackerStatsJson([{ name: 'alpha', source }], '1.2.3', 0, 65_000);
  expect(text).toMatch(/^\{"service":"nutcracker", "source":"[^"]+", "version":"1\.2\.3", "uptime":65, "timestamp":65, "total_connections":10, "curr_connections":5, "alpha": \{"client_eof":4, /);
  const json = JSON.parse(text) as Record<string, Record<string, Record<string, number> | number>>;
  expect(Object.keys(json.alpha)).toEqual(['client_eof', 'client_err', 'client_connections', 'server_ejects', 'forward_error', 'fragments', 'first', '127.0.0.1:6380']);
  expect(json.alpha.server_ejects).toBe(1);
  expect(json.alpha.first).toEqual({
    server_eof: 0, server_err: 0, server_timedout: 0, server_connections: 1, server_ejected_at: 0,
    requests: 3, request_bytes: 0, responses: 2, response_bytes: 0, in_queue: 0, in_queue_bytes: 0, out_queue: 1, out_queue_bytes: 14,
  });
});

test('--workers: the workers\' counts of the same pools summed, pools by name and servers by key; server_ejected_at the latest', () => {
  const server = (key: string, requests: number, ejectedAtUs: number) => {
    const counters = new NodeCounters();
    counters.requests = requests;
    counters.requestBytes = requests * 10;
    counters.ejectedAtUs = ejectedAtUs;
    return { key, counters, connections: 1, inQueue: 0, inQueueBytes: 0, outQueue: 1, outQueueBytes: 5 };
  };
  const pool = (clients: number, servers: ReturnType<typeof server>[]): NutcrackerPoolSource => ({
    clientEof: clients, clientErr: 0, clientConnections: clients, totalClients: clients, forwardErrors: 1, backendConnectsStarted: 2, servers,
  });
  const one = [{ name: 'alpha', source: pool(2, [server('a', 3, 0), server('b', 4, 100)]) }, { name: 'beta', source: pool(1, [server('c', 1, 0)]) }];
  const two = [{ name: 'alpha', source: pool(5, [server('a', 10, 50), server('b', 1, 20)]) }, { name: 'beta', source: pool(1, [server('c', 2, 0)]) }];
  const summed = sumPoolSources([one, two]);
  expect(summed.map((p) => p.name)).toEqual(['alpha', 'beta']);
  const alpha = summed[0].source;
  expect({ clientEof: alpha.clientEof, clientConnections: alpha.clientConnections, forwardErrors: alpha.forwardErrors, backendConnectsStarted: alpha.backendConnectsStarted }).toEqual({ clientEof: 7, clientConnections: 7, forwardErrors: 2, backendConnectsStarted: 4 });
  expect(alpha.servers.map((s) => [s.key, s.counters.requests, s.counters.requestBytes, s.counters.ejectedAtUs, s.connections, s.outQueueBytes])).toEqual([['a', 13, 130, 50, 2, 10], ['b', 5, 50, 100, 2, 10]]);
  expect(summed[1].source.servers[0].counters.requests).toBe(3);
  // The inputs are left as they were.
  expect(one[0].source.servers[0].counters.requests).toBe(3);
  // One JSON, with one listener per pool however many workers.
  expect(JSON.parse(nutcrackerStatsJson(summed, 'v', 0, 0)).total_connections).toBe((1 + 7 + 4) + (1 + 2 + 4));
});
