import { parseRefusedArgs, refusalField } from '../../proxy/migration/follow-refusals';

// The apply script writes each argument as "<byte length>:<bytes>" (follow-applier.ts).
function written(args: Buffer[]): Buffer {
  return Buffer.concat(args.flatMap((a) => [Buffer.from(`${a.length}:`), a]));
}

test('a refused command reads back as the apply script wrote it, binary and empty arguments too', () => {
  const args = [Buffer.from('RPUSH'), Buffer.from('k:1'), Buffer.from([0, 0x3a, 0xff, 0x0d, 0x0a]), Buffer.alloc(0), Buffer.from('12:34')];
  expect(parseRefusedArgs(written(args))).toEqual(args);
});

test('a value the script did not write is not taken for a command', () => {
  for (const bad of ['', 'RPUSH', '5:RPU', 'x:RPUSH', '-1:', '3:SET1']) expect(parseRefusedArgs(Buffer.from(bad))).toBeNull();
});

test('the field names the followed node first, so a follower reads only its own', () => {
  expect(refusalField('127.0.0.1:7000', 'abc 120 118', 3)).toBe('127.0.0.1:7000 abc 120 118 3');
});
