// The dependency rule, read from the code's own imports (docs/architecture.md):
//   config <- sharding <- proxy <- cmd <- bench, and nothing points up;
//   sharding is pure (no I/O module of Node);
//   inside proxy/, each folder (and context.ts) imports only what it declares under "May import:",
//   the declared folder graph has no cycle, and no file imports itself back through others.
import fs from 'node:fs';
import path from 'node:path';

const ROOT = path.join(__dirname, '../..');
const LAYERS = ['config', 'sharding', 'proxy', 'cmd', 'bench'];
const IO_MODULES = /^(node:)?(net|tls|fs|fs\/promises|child_process|http|https|dgram|dns|cluster|worker_threads)$/;

interface Edge {
  from: string;
  to: string;
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
    const rel = path.posix.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourceFiles(rel));
    else if (entry.name.endsWith('.ts')) out.push(rel);
  }
  return out;
}

/** Every module a file names in an import, export ... from, import() or require(). */
export function importSpecifiers(source: string): string[] {
  const specs: string[] = [];
  const re = /(?:^|[\s;])(?:import|export)\s[^'";]*?from\s*['"]([^'"]+)['"]|(?:^|[\s;])import\s*['"]([^'"]+)['"]|(?:import|require)\(\s*['"]([^'"]+)['"]\s*\)/g;
  for (const m of source.matchAll(re)) specs.push(m[1] ?? m[2] ?? m[3]);
  return specs;
}

function resolve(from: string, spec: string): string | null {
  if (!spec.startsWith('.')) return null;
  const base = path.posix.normalize(path.posix.join(path.posix.dirname(from), spec));
  for (const candidate of [base, `${base}.ts`, `${base}/index.ts`]) {
    const full = path.join(ROOT, candidate);
    if (fs.existsSync(full) && fs.statSync(full).isFile()) return candidate;
  }
  throw new Error(`${from}: cannot resolve '${spec}'`);
}

const files = LAYERS.flatMap(sourceFiles);
const edges: Edge[] = [];
const external = new Map<string, string[]>();
for (const file of files) {
  const specs = importSpecifiers(fs.readFileSync(path.join(ROOT, file), 'utf8'));
  external.set(file, specs.filter((s) => !s.startsWith('.')));
  for (const spec of specs) {
    const to = resolve(file, spec);
    if (to !== null) edges.push({ from: file, to });
  }
}

const layerOf = (file: string): string => file.split('/')[0];

/** A unit of proxy/: its first folder, or a file at its top (context.ts). */
const unitOf = (file: string): string => {
  const parts = file.split('/');
  return parts[1];
};

/** What a proxy unit declares it may import: its README's "May import:" line, or a root file's doc comment. */
function declared(unit: string): Set<string> {
  const where = unit.endsWith('.ts') ? path.join(ROOT, 'proxy', unit) : path.join(ROOT, 'proxy', unit, 'README.md');
  if (!fs.existsSync(where)) throw new Error(`proxy/${unit} has no README.md saying what it may import`);
  const line = /May import:([^\n]*)/.exec(fs.readFileSync(where, 'utf8'));
  if (line === null) throw new Error(`${path.relative(ROOT, where)} has no "May import:" line`);
  const names = line[1].replace(/`|\(.*?\)/g, '').replace(/\.\s*$/, '').split(/[\s,]+/).filter((n) => n !== '' && n !== 'nothing');
  return new Set(names.map((n) => (n === 'context' ? 'context.ts' : n)));
}

/** Cycles in a directed graph (Tarjan's strongly connected components of more than one node, or a self-loop). */
function cycles(nodes: Iterable<string>, next: (n: string) => Iterable<string>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let counter = 0;
  const visit = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of next(v)) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const scc: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1 || [...next(v)].includes(v)) found.push(scc.sort());
    }
  };
  for (const n of nodes) if (!index.has(n)) visit(n);
  return found;
}

describe('the dependency rule', () => {
  test('the import reader sees every form of import', () => {
    const src = "import a from './a';\nimport type { B } from \"../b\";\nexport { c } from './c';\nimport './d';\nconst e = require('./e');\nimport {\n  f,\n} from 'f';";
    expect(importSpecifiers(src)).toEqual(['./a', '../b', './c', './d', './e', 'f']);
  });

  test('the cycle finder finds a cycle and a self-import', () => {
    const graph: Record<string, string[]> = { a: ['b'], b: ['c'], c: ['a'], d: ['d'], e: ['a'] };
    expect(cycles(Object.keys(graph), (n) => graph[n])).toEqual([['a', 'b', 'c'], ['d']]);
  });

  test(`layers point one way: ${LAYERS.join(' <- ')}`, () => {
    const up = edges.filter((e) => LAYERS.indexOf(layerOf(e.to)) > LAYERS.indexOf(layerOf(e.from))).map((e) => `${e.from} -> ${e.to}`);
    expect(up).toEqual([]);
  });

  test('sharding/ is pure: no I/O module of Node', () => {
    const io = files.filter((f) => layerOf(f) === 'sharding').flatMap((f) => external.get(f)!.filter((s) => IO_MODULES.test(s)).map((s) => `${f} imports ${s}`));
    expect(io).toEqual([]);
  });

  test('no import cycle between files', () => {
    const next = new Map<string, string[]>();
    for (const e of edges) next.set(e.from, [...(next.get(e.from) ?? []), e.to]);
    expect(cycles(files, (f) => next.get(f) ?? [])).toEqual([]);
  });

  const proxyEdges = edges.filter((e) => layerOf(e.from) === 'proxy' && layerOf(e.to) === 'proxy' && unitOf(e.from) !== unitOf(e.to));
  const units = [...new Set(files.filter((f) => layerOf(f) === 'proxy').map(unitOf))].sort();

  test('every proxy/ folder imports only what it declares', () => {
    const undeclared = proxyEdges.filter((e) => !declared(unitOf(e.from)).has(unitOf(e.to))).map((e) => `${e.from} -> ${e.to}`);
    expect(undeclared).toEqual([]);
  });

  test('the declared proxy/ folders form no cycle', () => {
    const lower = LAYERS.slice(0, LAYERS.indexOf('proxy'));
    for (const u of units) for (const d of declared(u)) expect([...units, ...lower]).toContain(d);
    expect(cycles(units, (u) => [...declared(u)].filter((d) => units.includes(d)))).toEqual([]);
  });
});
