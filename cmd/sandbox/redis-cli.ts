// Running the redis-cli binary (RedisNode.cli, `redis-cli --cluster create`) and
// resolving its trimmed stdout; rejects only when redis-cli itself fails.

import { execFile } from 'node:child_process';
import { redisCliBin } from './helpers';

export function runRedisCli(args: string[], timeoutMs = 60_000): Promise<string> {
  let bin: string;
  try {
    bin = redisCliBin();
  } catch (err) {
    return Promise.reject(err);
  }
  return new Promise((resolve, reject) => {
    const child = execFile(
      bin,
      args,
      { timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024, encoding: 'utf8' },
      (err, stdout, stderr) => {
        if (err !== null) {
          const detail = [stderr.trim(), stdout.trim()].filter((s) => s !== '').join('\n');
          reject(new Error(`redis-cli ${args.join(' ')} failed: ${err.message}${detail === '' ? '' : `\n${detail}`}`));
          return;
        }
        resolve(stdout.trim());
      },
    );
    // --cluster create asks for confirmation on stdin unless --cluster-yes; never let it wait.
    child.stdin?.end();
  });
}
