// The follower's per-command work in the proxy, without sockets: a replication stream of N
// `SET key:<n> <32 bytes>` (redis-benchmark's keys) cut into commands (replication/stream-reader.ts)
// and routed for a ring grown from 2 nodes to 3 (migration/follow-router.ts), as one node of A's
// follower does. Prints ns per command for each stage; compare runs on one machine only.
// Run: `npm run build && node dist/bench/follow-hot-path.js [--commands 1000000] [--rounds 5]`.
import { StreamReader } from '../proxy/replication/stream-reader';
import { FollowRouter } from '../proxy/migration/follow-router';
import { CommandTable } from '../proxy/commands/table';
import { Ring } from '../sharding/ring';
import * as encode from '../proxy/resp/encode';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return i < 0 ? fallback : process.argv[i + 1];
}

const commands = Number(arg('--commands', '1000000'));
const rounds = Number(arg('--rounds', '5'));
const node = (port: number): { addr: string; weight: number } => ({ addr: `127.0.0.1:${port}`, weight: 1 });
const from = new Ring({ hash: 'md5', hashTag: null, nodes: [node(7000), node(7001)] });
const to = new Ring({ hash: 'md5', hashTag: null, nodes: [node(7000), node(7001), node(7002)] });
const router = new FollowRouter(CommandTable.fallback(), from, to, '127.0.0.1:7000');
const value = Buffer.alloc(32, 'x');
// The stream as the node sends it: chunks of 16 KiB, commands cut across chunks.
const whole = Buffer.concat(Array.from({ length: commands }, (_, i) => encode.command([Buffer.from('SET'), Buffer.from(`key:${String(i % 100000).padStart(12, '0')}`), value])));
const chunks: Buffer[] = [];
for (let at = 0; at < whole.length; at += 16384) chunks.push(whole.subarray(at, Math.min(whole.length, at + 16384)));

for (let round = 0; round < rounds; round++) {
  const reader = new StreamReader();
  let parsed = 0;
  let applied = 0;
  let parseNs = 0;
  let routeNs = 0;
  let offset = 0;
  for (const c of chunks) {
    const t0 = process.hrtime.bigint();
    const cmds = reader.push(c, offset);
    const t1 = process.hrtime.bigint();
    for (const cmd of cmds) if (router.route(cmd.args).kind === 'apply') applied++;
    routeNs += Number(process.hrtime.bigint() - t1);
    parseNs += Number(t1 - t0);
    offset += c.length;
    parsed += cmds.length;
  }
  process.stdout.write(`round ${round + 1}: ${parsed} commands (${applied} move): parse ${(parseNs / parsed).toFixed(0)} ns, route ${(routeNs / parsed).toFixed(0)} ns per command\n`);
}
