// No setting changes another when written out at its default value: for every default the config
// schema declares (walked from the schema itself, so a new one is covered without editing this
// file) and those applied after it (DEFAULT_COMPUTED), a config that writes the default loads to
// exactly the config that leaves it out.
import { parseConfig } from '../../config/load';
import { configSchema } from '../../config/schema';
import { DEFAULT_COMMAND_TIMEOUT_MS } from '../../config/schema-connections';

/** The parts of a valibot schema object the walk reads. */
interface SchemaNode {
  kind?: string;
  type: string;
  entries?: Record<string, SchemaNode>;
  wrapped?: SchemaNode;
  default?: unknown;
  pipe?: SchemaNode[];
  item?: SchemaNode;
}

/** A path in the config ('[]' for the first item of a list) and the default the schema gives it. */
type Defaulted = [path: string[], value: unknown];

function defaultsOf(schema: SchemaNode, at: string[] = [], out: Defaulted[] = []): Defaulted[] {
  // A pipe's first schemas are the shape; its actions (checks, transforms) are not.
  const shapes = (schema.pipe ?? []).filter((s) => s !== schema && s.kind === 'schema' && (s.entries ?? s.wrapped ?? s.item ?? s.pipe) !== undefined);
  if (shapes.length > 0) {
    for (const s of shapes) defaultsOf(s, at, out);
    return out;
  }
  if (schema.type === 'optional' && schema.wrapped !== undefined) {
    const d: unknown = typeof schema.default === 'function' ? (schema.default as () => unknown)() : schema.default;
    if (d !== undefined) out.push([at, d]);
    defaultsOf(schema.wrapped, at, out);
  } else if (schema.entries !== undefined) {
    for (const [key, entry] of Object.entries(schema.entries)) defaultsOf(entry, [...at, key], out);
  } else if (schema.item !== undefined) {
    defaultsOf(schema.item, [...at, '[]'], out);
  }
  return out;
}

/** Defaults applied by a transform rather than declared on the field. */
const DEFAULT_COMPUTED: Defaulted[] = [[['backend', 'commandTimeoutMs'], DEFAULT_COMMAND_TIMEOUT_MS]];

const SEEDS = ['127.0.0.1:7001'];
/** Configs holding every optional section, so that each default has a parent to be written in. */
const CLUSTER_FULL = {
  cluster: { seeds: SEEDS },
  tls: { cert: 'cert.pem', key: 'key.pem' },
  backend: { tls: {} },
  metrics: { listen: '127.0.0.1:0', tls: { cert: 'cert.pem', key: 'key.pem' } },
  stats: { listen: '127.0.0.1:0' },
};
const RING_FULL = {
  mode: 'ring',
  ring: { nodes: [{ addr: '127.0.0.1:7101' }] },
  migration: { phase: 'double-write', to: { nodes: [{ addr: '127.0.0.1:7201' }] } },
};
const RING_SENTINEL = { mode: 'ring', ring: { sentinels: ['127.0.0.1:26379'], nodes: [{ master: 'm1' }], sentinel: {} } };

function baseFor(path: string[]): Record<string, unknown> {
  if (path[0] === 'ring' && path[1] === 'sentinel') return RING_SENTINEL;
  return path[0] === 'ring' || path[0] === 'migration' ? RING_FULL : CLUSTER_FULL;
}

/** A deep copy of `config` with `value` written at `path` (into the first item of a list for '[]'); undefined: left out. */
function written(config: Record<string, unknown>, path: string[], value: unknown): Record<string, unknown> {
  const out = structuredClone(config);
  let at: unknown = out;
  for (const key of path.slice(0, -1)) {
    if (key === '[]') at = (at as unknown[])[0];
    else at = ((at as Record<string, unknown>)[key] ??= {});
  }
  const last = path[path.length - 1];
  if (last === '[]') throw new Error(`a default for a whole list item: ${path.join('.')}`);
  if (value === undefined) delete (at as Record<string, unknown>)[last];
  else (at as Record<string, unknown>)[last] = structuredClone(value);
  return out;
}

const defaults = [...defaultsOf(configSchema as unknown as SchemaNode), ...DEFAULT_COMPUTED];

test('the walk finds the schema\'s defaults (so a broken walk cannot pass by finding none)', () => {
  const paths = defaults.map(([p]) => p.join('.'));
  expect(paths.length).toBeGreaterThan(40);
  for (const p of ['listen', 'mode', 'ring.hash', 'ring.distribution', 'ring.hashTag', 'ring.nodes.[].weight', 'backend.connectTimeoutMs', 'limits.maxClients', 'log.level', 'metrics.console', 'backend.commandTimeoutMs']) {
    expect(paths).toContain(p);
  }
});

test.each(defaults.map(([path, value]) => [path.join('.'), path, value] as const))('%s written at its default loads the same config as left out', (_name, path, value) => {
  const base = baseFor(path);
  expect(parseConfig(written(base, path, value))).toStrictEqual(parseConfig(written(base, path, undefined)));
});

test('backend.commandTimeoutMs: 10000 written out keeps timeoutBehindScripts false; another value sets it', () => {
  const backend = (b: Record<string, unknown>): unknown => parseConfig({ cluster: { seeds: SEEDS }, backend: b }).backend;
  expect(backend({ commandTimeoutMs: DEFAULT_COMMAND_TIMEOUT_MS })).toMatchObject({ timeoutBehindScripts: false });
  expect(backend({ commandTimeoutMs: 400 })).toMatchObject({ timeoutBehindScripts: true });
});
