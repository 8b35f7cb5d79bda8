import fs from 'node:fs';
import { RedisNode } from '../../cmd/sandbox/redis-cluster';
import { freePort } from '../../cmd/sandbox/ports';
test('leak', async () => {
  const node = await RedisNode.start({ port: await freePort(), dieWithParent: false });
  fs.writeFileSync('/tmp/zzprobe-2', JSON.stringify({ pid: node.pid, port: node.port, dir: node.dir }));
});
