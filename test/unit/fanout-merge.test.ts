// The merges of replies fanned out to every master that need no node to test: SCRIPT/FUNCTION KILL
// and SCRIPT EXISTS (dispatch/fanout.ts).
import { andArrays, killMerge } from '../../proxy/dispatch/fanout';

const OK = '+OK\r\n';
const NOTBUSY = '-NOTBUSY No scripts in execution right now.\r\n';
const UNKILLABLE =
  '-UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.\r\n';
const BUSY = '-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n';

const merge = (frames: string[]): string => killMerge(frames.map((f) => Buffer.from(f))).toString();

describe('killMerge (SCRIPT KILL, FUNCTION KILL)', () => {
  test.each<[string, string[], string]>([
    ['one master killed its script', [NOTBUSY, OK, NOTBUSY], OK],
    ['none was running one', [NOTBUSY, NOTBUSY, NOTBUSY], NOTBUSY],
    ['the busy script wrote already', [NOTBUSY, NOTBUSY, UNKILLABLE], UNKILLABLE],
    ['a function runs, not a script', [BUSY, NOTBUSY, NOTBUSY], BUSY],
    ['one killed, another refused', [UNKILLABLE, OK, NOTBUSY], OK],
  ])('%s', (_what, frames, want) => {
    expect(merge(frames)).toBe(want);
  });
});

describe('andArrays (SCRIPT EXISTS)', () => {
  const frames = ['*3\r\n:1\r\n:0\r\n:0\r\n', '*3\r\n:1\r\n:1\r\n:0\r\n'].map((f) => Buffer.from(f));

  test('1 where every master has it, or where the proxy holds the body', () => {
    expect(andArrays([false, false, false])(frames).toString()).toBe('*3\r\n:1\r\n:0\r\n:0\r\n');
    expect(andArrays([false, false, true])(frames).toString()).toBe('*3\r\n:1\r\n:0\r\n:1\r\n');
  });

  test('a master\'s error is the reply', () => {
    expect(andArrays([true])([Buffer.from('*1\r\n:1\r\n'), Buffer.from('-ERR x\r\n')]).toString()).toBe('-ERR x\r\n');
  });
});
