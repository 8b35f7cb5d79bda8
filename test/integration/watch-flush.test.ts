// FLUSHALL and FLUSHDB while a client WATCHes keys, compared with one Redis byte for byte: a flush
// touches the watched keys that exist (EXEC answers nil), not those that do not, whoever flushes
// (the watching client itself, another client), SYNC or ASYNC. Redis's own test "Flushall while
// watching several keys by one client" (tests/unit/multi.tcl) is the first steps.

import { useProxy } from '../helpers/proxy';
import { useCluster } from '../helpers/cluster';
import { ScriptStep, runScript } from '../helpers/tracking-script';

const { proxy } = useProxy();
/** One Redis: a single-node cluster owning every slot. */
const reference = useCluster({ masters: 1, replicasPerMaster: 0 });

const r = (...args: string[]): ScriptStep => ({ on: 'r', args });
const o = (...args: string[]): ScriptStep => ({ on: 'o', args });
const transaction = (): ScriptStep => ({ on: 'r', args: [['MULTI'], ['PING'], ['EXEC']] });

const STEPS: ScriptStep[] = [
  r('MSET', 'a{t}', 'a', 'b{t}', 'b'), r('WATCH', 'b{t}', 'a{t}'), r('FLUSHALL'), r('PING'), transaction(),
  r('WATCH', 'b{t}', 'a{t}'), r('FLUSHALL'), transaction(),
  r('SET', 'a{t}', '1'), r('WATCH', 'b{t}', 'a{t}'), o('FLUSHALL'), transaction(),
  r('WATCH', 'b{t}', 'a{t}'), o('FLUSHDB'), transaction(),
  r('SET', 'a{t}', '1'), r('WATCH', 'b{t}', 'a{t}'), o('FLUSHALL', 'ASYNC'), transaction(),
  r('SET', 'b{t}', '1'), r('WATCH', 'b{t}', 'a{t}'), r('FLUSHDB', 'SYNC'), transaction(),
];

test('WATCH, then a flush: EXEC answers as one Redis', async () => {
  const setup = { r: [['FLUSHALL']] };
  const want = await runScript(reference().masters[0].port, ['r', 'o'], setup, STEPS);
  // Watched keys that exist are touched (nil), keys that do not are not (the PING runs).
  expect(want.streams.r.match(/\*-1\r\n|\*1\r\n\+PONG\r\n/g)).toEqual(['*-1\r\n', '*1\r\n+PONG\r\n', '*-1\r\n', '*1\r\n+PONG\r\n', '*-1\r\n', '*-1\r\n']);
  const got = await runScript(proxy().address.port, ['r', 'o'], setup, STEPS, want);
  expect(got.streams).toEqual(want.streams);
});
