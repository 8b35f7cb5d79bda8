// Function libraries during a migration, against fake nodes: which libraries differ between the
// masters of both sides, and the copy to side B (the union of A's masters, the first one's code
// winning, B masters already holding everything left alone).
import { LibraryCall, NodeLibraries, libraryDifferences } from '../../proxy/migration/libraries';
import { copyFunctions } from '../../proxy/migration/copy-functions';
import { Reply } from '../../proxy/resp/decode-reply';
import { setLogLevel } from '../../proxy/telemetry/log';

beforeAll(() => setLogLevel('silent'));

const node = (side: 'A' | 'B', addr: string, libs: Record<string, string>): NodeLibraries => ({ side, addr, libraries: new Map(Object.entries(libs)) });

test('a library missing on a master, with other code on one, or only on side B differs; one the same everywhere does not', () => {
  const diffs = libraryDifferences([
    node('A', 'a1', { same: 's', moved: 'm', changed: 'c' }),
    node('A', 'a2', { same: 's', moved: 'm', changed: 'c' }),
    node('B', 'b1', { same: 's', moved: 'm', changed: 'c2', extra: 'x' }),
    node('B', 'b2', { same: 's', changed: 'c' }),
  ]);
  expect(diffs).toEqual([
    { library: 'changed', detail: "code differs from A a1's on B b1" },
    { library: 'extra', detail: 'not on side A; missing on B b2' },
    { library: 'moved', detail: 'missing on B b2' },
  ]);
  expect(libraryDifferences([node('A', 'a1', { x: '1' }), node('B', 'b1', { x: '1' })])).toEqual([]);
});

/** Nodes that keep libraries; a dump is their JSON, restored with REPLACE over what is there. */
function fakeNodes(initial: Record<string, Record<string, string>>): { call: LibraryCall; libs: Map<string, Map<string, string>>; restores: string[] } {
  const libs = new Map(Object.entries(initial).map(([addr, l]) => [addr, new Map(Object.entries(l))]));
  const restores: string[] = [];
  const call: LibraryCall = async (addr, args) => {
    const held = libs.get(addr) as Map<string, string>;
    const words = args.map((a) => (Buffer.isBuffer(a) ? a : String(a)));
    const what = `${String(words[0])} ${String(words[1])}`;
    if (what === 'FUNCTION LIST') return [...held].map(([name, code]): Reply => ['library_name', name, 'library_code', code]);
    if (what === 'FUNCTION DUMP') return Buffer.from(JSON.stringify([...held]));
    if (what === 'FUNCTION RESTORE' && words[3] === 'REPLACE') {
      for (const [name, code] of JSON.parse(String(words[2])) as [string, string][]) held.set(name, code);
      restores.push(`${addr}<-${String(words[2])}`);
      return 'OK';
    }
    throw new Error(`unexpected ${what}`);
  };
  return { call, libs, restores };
}

test('side B gets the union of A masters that disagree, the first master winning; a B master holding it all is left alone', async () => {
  const nodes = fakeNodes({ a1: { x: 'x1', y: 'y' }, a2: { x: 'x2', z: 'z' }, b1: {}, b2: { x: 'x1', y: 'y', z: 'z' }, b3: { x: 'x2', y: 'y', z: 'z' } });
  const r = await copyFunctions(nodes.call, ['a1', 'a2'], ['b1', 'b2', 'b3']);
  expect(r).toEqual({ libraries: 3, restoredOn: ['b1', 'b3'] });
  for (const b of ['b1', 'b2', 'b3']) expect(Object.fromEntries(nodes.libs.get(b) as Map<string, string>)).toEqual({ x: 'x1', y: 'y', z: 'z' });
  // Last master first, so the first one's code is restored last.
  expect(nodes.restores.filter((s) => s.startsWith('b1'))).toEqual(['b1<-[["x","x2"],["z","z"]]', 'b1<-[["x","x1"],["y","y"]]']);
});

test('nothing on side A: side B is not touched', async () => {
  const nodes = fakeNodes({ a1: {}, b1: { mine: 'm' } });
  expect(await copyFunctions(nodes.call, ['a1'], ['b1'])).toEqual({ libraries: 0, restoredOn: [] });
  expect(nodes.restores).toEqual([]);
});
