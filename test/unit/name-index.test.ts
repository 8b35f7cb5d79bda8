// NameIndex: command names found by their bytes, ASCII letters folded as Redis's strcasecmp does.
import { NameIndex } from '../../proxy/commands/name-index';
import { CommandTable } from '../../proxy/commands/table';

const b = (s: string): Buffer => Buffer.from(s, 'latin1');

describe('NameIndex', () => {
  const index = new NameIndex<number>([['get', 1], ['getex', 2], ['client|list', 3], ['x-y_z', 4], ['', 5]]);

  test('any case of ASCII letters finds the entry', () => {
    for (const name of ['get', 'GET', 'Get', 'gEt']) expect(index.get(b(name))).toBe(1);
    expect(index.get(b('CLIENT|LIST'))).toBe(3);
    expect(index.get(b('X-Y_Z'))).toBe(4);
  });

  test('only whole names match: prefixes, longer names and unknown ones do not', () => {
    expect(index.get(b('ge'))).toBeUndefined();
    expect(index.get(b('gets'))).toBeUndefined();
    expect(index.get(b('GETEX'))).toBe(2);
    expect(index.get(b('set'))).toBeUndefined();
    expect(index.get(Buffer.alloc(100_000, 65))).toBeUndefined();
  });

  test('bytes other than A-Z are compared as they are', () => {
    expect(index.get(b('x-y\x7fz'))).toBeUndefined(); // '_' (0x5f) is not DEL (0x7f) folded
    expect(index.get(b('x\x0dy_z'))).toBeUndefined();
    const accented = new NameIndex<number>([['à', 1]]);
    expect(accented.get(Buffer.from('à', 'utf8'))).toBe(1);
    expect(accented.get(Buffer.from('À', 'utf8'))).toBeUndefined(); // no folding outside ASCII, as in the C locale
  });

  test('a name outside Latin-1 (a module command) is matched by its UTF-8 bytes only', () => {
    const utf8 = new NameIndex<number>([['ĉmd', 1]]);
    expect(utf8.get(Buffer.from('ĉmd', 'utf8'))).toBe(1);
    expect(utf8.get(Buffer.from('\tmd', 'latin1'))).toBeUndefined(); // 'ĉ' cut to one byte would be TAB
  });

  test('the empty name is an entry like any other', () => {
    expect(index.get(Buffer.alloc(0))).toBe(5);
  });

  test('every command of the recorded Redis 7.0 table is found in lower, upper and mixed case', () => {
    const table = CommandTable.fallback();
    const names = [...table.all()].filter((info) => !info.name.includes('|')).map((info) => info.name);
    expect(names.length).toBeGreaterThan(200);
    for (const name of names) {
      const mixed = [...name].map((c, i) => (i % 2 === 0 ? c.toUpperCase() : c)).join('');
      for (const form of [name, name.toUpperCase(), mixed]) expect(table.lookup(b(form))?.name).toBe(name);
    }
    expect(table.lookup(b('NOSUCHCOMMAND'))).toBeUndefined();
  });
});
