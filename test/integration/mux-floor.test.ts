// The bench's Node floor must be a real proxy, or its row in BENCHMARKS.md means nothing: replies
// in request order when one client's pipeline spreads over three nodes, and keys on every node.
import { ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { freePort } from '../../cmd/sandbox/ports';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { exchange, splitReplies } from '../helpers/raw-exchange';

const FLOOR = path.resolve(__dirname, '..', '..', 'dist', 'bench', 'mux-floor.js');
const REQUESTS = 600;

let nodes: StandaloneNodes;
let floor: ChildProcess;
let port: number;

beforeAll(async () => {
  nodes = await StandaloneNodes.start(3);
  port = await freePort();
  floor = spawn(process.execPath, [FLOOR, String(port), ...nodes.addresses], { stdio: ['ignore', 'pipe', 'pipe'] });
  await new Promise<void>((resolve, reject) => {
    let output = '';
    floor.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('listening')) resolve();
    });
    floor.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    floor.on('exit', (code) => reject(new Error(`mux-floor exited (${code}) before listening: ${output}`)));
  });
}, 30_000);

afterAll(async () => {
  if (floor?.exitCode === null) {
    floor.kill('SIGTERM');
    await once(floor, 'exit');
  }
  await nodes?.stop();
});

test('answers a pipeline spread over three nodes in request order', async () => {
  const sets = Array.from({ length: REQUESTS }, (_, i) => ['SET', `floor:${i}`, String(i)]);
  const gets = Array.from({ length: REQUESTS }, (_, i) => ['GET', `floor:${i}`]);
  const { replies, closed } = await exchange(port, [...sets, ...gets, ['GET', 'floor:missing'], ['PING']]);
  expect(closed).toBe(false);
  expect(splitReplies(replies)).toEqual([...sets.map(() => '+OK\r\n'), ...gets.map((_, i) => `$${String(i).length}\r\n${i}\r\n`), '$-1\r\n', '+PONG\r\n']);
});

test('puts keys on every node', async () => {
  const sizes = await Promise.all(nodes.nodes.map((n) => n.command('DBSIZE')));
  for (const size of sizes) expect(Number(size)).toBeGreaterThan(REQUESTS / 10);
});
