// FUNCTION STATS merged over the masters (dispatch/function-stats.ts): frames as Redis 7.0.15 sends them.
import { functionStatsMerge } from '../../proxy/dispatch/function-stats';

const engines2 = (libs: number, fns: number): string =>
  `$7\r\nengines\r\n*2\r\n$3\r\nLUA\r\n*4\r\n$15\r\nlibraries_count\r\n:${libs}\r\n$15\r\nfunctions_count\r\n:${fns}\r\n`;
const engines3 = (libs: number, fns: number): string =>
  `$7\r\nengines\r\n%1\r\n$3\r\nLUA\r\n%2\r\n$15\r\nlibraries_count\r\n:${libs}\r\n$15\r\nfunctions_count\r\n:${fns}\r\n`;
const RUNNING2 = '*6\r\n$4\r\nname\r\n$4\r\nspin\r\n$7\r\ncommand\r\n*3\r\n$5\r\nfcall\r\n$4\r\nspin\r\n$1\r\n0\r\n$11\r\nduration_ms\r\n:815\r\n';
const RUNNING3 = '%3\r\n$4\r\nname\r\n$4\r\nspin\r\n$7\r\ncommand\r\n*3\r\n$5\r\nfcall\r\n$4\r\nspin\r\n$1\r\n0\r\n$11\r\nduration_ms\r\n:815\r\n';
const idle2 = (libs = 1, fns = 2): string => `*4\r\n$14\r\nrunning_script\r\n$-1\r\n${engines2(libs, fns)}`;
const busy2 = `*4\r\n$14\r\nrunning_script\r\n${RUNNING2}${engines2(1, 2)}`;
const idle3 = `%2\r\n$14\r\nrunning_script\r\n_\r\n${engines3(1, 2)}`;
const busy3 = `%2\r\n$14\r\nrunning_script\r\n${RUNNING3}${engines3(1, 2)}`;
const BUSY = '-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n';

const merge = (frames: string[]): string => functionStatsMerge(frames.map((f) => Buffer.from(f))).toString('latin1');

test.each<[string, string[], string]>([
  ['nothing runs: nil, one server\'s counts', [idle2(), idle2(), idle2()], idle2()],
  ['a function runs on the second master', [idle2(), busy2, idle2()], busy2],
  ['a master missed a library: the largest count', [idle2(0, 0), idle2(1, 2), idle2(1, 2)], idle2(1, 2)],
  ['an EVAL runs on a master: its BUSY', [idle2(), BUSY, busy2], BUSY],
  ['RESP3: maps and RESP3\'s null', [idle3, idle3], idle3],
  ['RESP3: the running function', [idle3, busy3], busy3],
  ['RESP3 inside MULTI (the others answered in RESP2)', [idle3, busy2], busy3],
  ['RESP2 with a RESP3 running element', [idle2(), busy3], busy2],
])('%s', (_what, frames, want) => {
  expect(merge(frames)).toBe(want);
});
