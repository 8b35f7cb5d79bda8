// The follow's stream spool (proxy/migration/follow-spool.ts) on a real file: bytes come back in
// order with their offsets across append and take boundaries, a gap is refused, the file is gone
// from its folder once opened, and a drained spool gives its space back.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { StreamSpool } from '../../proxy/migration/follow-spool';

let dir = '';

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slotproxy-spool-unit-'));
});

afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

test('bytes come back in order with their offsets, whatever the append and take sizes', () => {
  const spool = new StreamSpool(path.join(dir, 's.stream'), 1 << 20);
  const stream = Buffer.from([...Array(10_000).keys()].map((i) => `*1\r\n$${String(i).length}\r\n${i}\r\n`).join(''));
  const base = 5_000_000;
  const out: Buffer[] = [];
  let next = base;
  let appended = 0;
  for (let size = 1; appended < stream.length; size = (size * 7 + 3) % 4093 || 1) {
    const chunk = stream.subarray(appended, appended + size);
    spool.append(chunk, base + appended);
    appended += chunk.length;
    // Take some as it goes, as B catches up now and then.
    const taken = spool.take(size % 3 === 0 ? 1500 : 0);
    if (taken !== null) {
      expect(taken.first).toBe(next);
      next += taken.chunk.length;
      out.push(taken.chunk);
    }
  }
  expect(fs.readdirSync(dir)).toEqual([]);
  for (let t = spool.take(777); t !== null; t = spool.take(777)) {
    expect(t.first).toBe(next);
    next += t.chunk.length;
    out.push(t.chunk);
  }
  expect(Buffer.concat(out).equals(stream)).toBe(true);
  expect(spool.bytes).toBe(0);
  spool.close();
});

test('a gap is refused; full at maxBytes; a drained spool starts again at any offset', () => {
  const spool = new StreamSpool(path.join(dir, 's.stream'), 10);
  spool.append(Buffer.from('abcdef'), 100);
  expect(() => spool.append(Buffer.from('x'), 107)).toThrow(/do not follow 105/);
  expect(spool.full).toBe(false);
  spool.append(Buffer.from('ghijk'), 106);
  expect(spool.full).toBe(true);
  expect(spool.take(100)).toEqual({ chunk: Buffer.from('abcdefghijk'), first: 100 });
  expect(spool.take(100)).toBeNull();
  spool.append(Buffer.from('zz'), 9000);
  expect(spool.take(1)).toEqual({ chunk: Buffer.from('z'), first: 9000 });
  spool.clear();
  expect(spool.bytes).toBe(0);
  spool.close();
});
