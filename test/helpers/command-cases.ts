// Jest helper: requests generated for every command a Redis server documents, from its own
// `COMMAND DOCS` (argument specs) and `COMMAND INFO` (arity): a valid call, wrong arity, wrong types,
// bad numbers and WRONGTYPE. Used by the differential test (test/integration/differential.test.ts).

import { RespReply } from '../../cmd/sandbox/resp-client';

/** One argument as COMMAND DOCS describes it. */
export interface ArgSpec {
  name: string;
  type: string;
  token?: string;
  optional: boolean;
  args: ArgSpec[];
}

export interface CommandSpec {
  /** `get`, or `config|get` for a subcommand. */
  name: string;
  /** What a client sends first: `['GET']`, `['CONFIG', 'GET']`. */
  words: string[];
  arity: number;
  group: string;
  args: ArgSpec[];
  /** It has subcommands (`CONFIG`); its own cases are only about the container. */
  container: boolean;
}

export interface Case {
  /** The command as docs/compatibility.md's table names it: `GET`, `CONFIG GET`. */
  command: string;
  /** `valid`, `no-args`, `extra-arg`, `all-options`, `wrongtype`, `not-integer <arg>`, `inf <arg>` ... or a corpus case's name. */
  kind: string;
  requests: (string[] | string)[];
}

/** Keys of the same hash tag, one per type, which every case starts with. */
export const FIXTURE_KEYS = {
  string: '{t}str',
  list: '{t}list',
  hash: '{t}hash',
  set: '{t}set',
  zset: '{t}zset',
  stream: '{t}stream',
  hll: '{t}hll',
} as const;

/** The requests that give a server the fixtures (after FLUSHALL). */
export const FIXTURES: string[][] = [
  ['SET', FIXTURE_KEYS.string, '10'],
  ['RPUSH', FIXTURE_KEYS.list, 'a', 'b', 'c'],
  ['HSET', FIXTURE_KEYS.hash, 'a', '1', 'b', '2'],
  ['SADD', FIXTURE_KEYS.set, '1', '2', '3'], // an intset: in order (a hash table's order is seeded at random)
  ['ZADD', FIXTURE_KEYS.zset, '1', 'a', '2', 'b', '3', 'c'],
  ['XADD', FIXTURE_KEYS.stream, '1-1', 'a', '1'],
  ['XGROUP', 'CREATE', FIXTURE_KEYS.stream, 'g', '0'],
  ['PFADD', FIXTURE_KEYS.hll, 'a', 'b', 'c'],
];

/** The key a command of each documented group is given, and the key of another type for WRONGTYPE. */
const KEY_OF_GROUP: Record<string, { key: string; wrong: string }> = {
  string: { key: FIXTURE_KEYS.string, wrong: FIXTURE_KEYS.list },
  bitmap: { key: FIXTURE_KEYS.string, wrong: FIXTURE_KEYS.list },
  hyperloglog: { key: FIXTURE_KEYS.hll, wrong: FIXTURE_KEYS.list },
  list: { key: FIXTURE_KEYS.list, wrong: FIXTURE_KEYS.string },
  hash: { key: FIXTURE_KEYS.hash, wrong: FIXTURE_KEYS.string },
  set: { key: FIXTURE_KEYS.set, wrong: FIXTURE_KEYS.string },
  'sorted-set': { key: FIXTURE_KEYS.zset, wrong: FIXTURE_KEYS.string },
  geo: { key: FIXTURE_KEYS.zset, wrong: FIXTURE_KEYS.string },
  stream: { key: FIXTURE_KEYS.stream, wrong: FIXTURE_KEYS.string },
};

export const SCRIPT = 'return 1';
export const SCRIPT_SHA1 = 'e0e1f9fabfc9d4800c877a703b823ac0578ff8db';
export const LIBRARY = "#!lua name=lib\nredis.register_function('f', function() return 1 end)";

/** Strings with a meaning, by argument name, so that the valid call does something. */
const STRING_BY_NAME: Record<string, string> = {
  id: '2-1',
  group: 'g',
  consumer: 'c',
  host: '127.0.0.1', // MIGRATE: no name to resolve; port 1 refuses at once
  script: SCRIPT,
  sha1: SCRIPT_SHA1,
  'function-code': LIBRARY,
  function: 'f',
  'library-name': 'lib',
};
const INTEGER_BY_NAME: Record<string, string> = {
  cursor: '0',
  seconds: '100',
  milliseconds: '100000',
  ttl: '0',
};

/**
 * Never run: they would stop, block or reconfigure a server or the cluster, or break the harness.
 * Only their argument-less request is sent, and only where the arity makes it an arity error.
 */
const NEVER_RUN = new Set([
  'shutdown', 'debug', 'monitor', 'sync', 'psync', 'replconf', 'replicaof', 'slaveof', 'failover',
  'save', 'bgsave', 'bgrewriteaof', 'client|kill', 'client|pause', 'config|set', 'config|rewrite',
  'module|load', 'module|loadex', 'module|unload', 'acl|setuser', 'acl|deluser', 'acl|load', 'acl|save',
  'cluster|addslots', 'cluster|addslotsrange', 'cluster|delslots', 'cluster|delslotsrange', 'cluster|flushslots',
  'cluster|forget', 'cluster|meet', 'cluster|replicate', 'cluster|reset', 'cluster|setslot',
  'cluster|set-config-epoch', 'cluster|bumpepoch', 'cluster|failover', 'cluster|saveconfig',
]);

/** A RESP2 map (a flat array of names and values) as an object. */
function fields(reply: RespReply): Record<string, RespReply> {
  const out: Record<string, RespReply> = {};
  if (!Array.isArray(reply)) return out;
  for (let i = 0; i + 1 < reply.length; i += 2) out[String(reply[i])] = reply[i + 1];
  return out;
}

function argSpecs(reply: RespReply): ArgSpec[] {
  if (!Array.isArray(reply)) return [];
  return reply.map((a) => {
    const f = fields(a);
    const flags = Array.isArray(f.flags) ? f.flags.map(String) : [];
    return {
      name: String(f.name),
      type: String(f.type),
      token: f.token === undefined ? undefined : String(f.token),
      optional: flags.includes('optional'),
      args: argSpecs(f.arguments ?? null),
    };
  });
}

/** Arity of every command and subcommand (`config|get`) from a COMMAND INFO reply. */
function arities(info: RespReply): Map<string, number> {
  const out = new Map<string, number>();
  const walk = (entries: RespReply): void => {
    if (!Array.isArray(entries)) return;
    for (const e of entries) {
      if (!Array.isArray(e)) continue;
      out.set(String(e[0]), Number(e[1]));
      walk(e[9] ?? null);
    }
  };
  walk(info);
  return out;
}

/** Every command and subcommand of a `COMMAND DOCS` reply, with arities from `COMMAND INFO`. */
export function commandSpecs(docs: RespReply, info: RespReply): CommandSpec[] {
  const arity = arities(info);
  const out: CommandSpec[] = [];
  const add = (name: string, doc: Record<string, RespReply>, words: string[]): void => {
    const subs = fields(doc.subcommands ?? null);
    const container = Object.keys(subs).length > 0;
    out.push({ name, words, arity: arity.get(name) ?? -1, group: String(doc.group), args: argSpecs(doc.arguments ?? null), container });
    for (const sub of Object.keys(subs).sort()) add(sub, fields(subs[sub]), [...words, sub.split('|')[1].toUpperCase()]);
  };
  const all = fields(docs);
  for (const name of Object.keys(all).sort()) add(name, fields(all[name]), [name.toUpperCase()]);
  return out;
}

/** One generated argument, remembered with its spec so that it can be replaced by a bad value. */
interface Word {
  value: string;
  spec?: ArgSpec;
}

/** The arguments of a call, filled by type: the required ones, or with `all` the optional ones too. */
function fill(specs: ArgSpec[], key: string, all: boolean): Word[] {
  const out: Word[] = [];
  for (const spec of specs) {
    if (spec.optional && !all) continue;
    if (spec.token !== undefined && spec.type !== 'pure-token') out.push({ value: spec.token });
    out.push(...fillOne(spec, key, all));
  }
  // numkeys counts the keys that follow it.
  out.forEach((w, i) => {
    if (w.spec?.name === 'numkeys') w.value = String(out.slice(i + 1).filter((x) => x.spec?.type === 'key').length);
  });
  return out;
}

function fillOne(spec: ArgSpec, key: string, all: boolean): Word[] {
  switch (spec.type) {
    case 'key':
      return [{ value: key, spec }];
    case 'integer':
      // BLOCK <milliseconds> (XREAD): a short block, not the 100 s given to PEXPIRE.
      return [{ value: spec.token === 'BLOCK' ? '10' : (INTEGER_BY_NAME[spec.name] ?? '1'), spec }];
    case 'double':
      return [{ value: spec.name === 'timeout' ? '0.01' : '1.5', spec }];
    case 'unix-time':
      return [{ value: spec.name.endsWith('milliseconds') ? '4102444800000' : '4102444800', spec }];
    case 'pattern':
      return [{ value: '*', spec }];
    case 'pure-token':
      return [{ value: spec.token ?? spec.name }];
    case 'oneof': {
      // The first alternative, but never XADD's `*`: an ID made from the clock differs on any two servers.
      const pick = spec.args.find((a) => a.token !== '*') ?? spec.args[0];
      return fill([{ ...pick, optional: false }], key, all);
    }
    case 'block':
      return fill(spec.args, key, all);
    default:
      return [{ value: STRING_BY_NAME[spec.name] ?? 'a', spec }];
  }
}

/** Whether `words` alone (no arguments) is certainly an arity error, so it is safe to send anything. */
function bareIsArityError(spec: CommandSpec): boolean {
  const n = spec.words.length;
  return spec.arity > 0 ? n !== spec.arity : n < -spec.arity;
}

/** The display name of a command: `CONFIG GET`. */
export function displayName(spec: CommandSpec): string {
  return spec.words.join(' ');
}

/** The generated cases of one command or subcommand. */
export function casesFor(spec: CommandSpec): Case[] {
  const command = displayName(spec);
  const cases: Case[] = [];
  const add = (kind: string, request: string[]): void => {
    if (!cases.some((c) => JSON.stringify(c.requests[0]) === JSON.stringify(request))) cases.push({ command, kind, requests: [request] });
  };
  if (spec.container) {
    add('no-args', spec.words);
    add('unknown-subcommand', [...spec.words, 'NOPE']);
    return cases;
  }
  if (NEVER_RUN.has(spec.name)) {
    if (bareIsArityError(spec)) add('no-args', spec.words);
    return cases;
  }
  const typed = KEY_OF_GROUP[spec.group];
  const key = typed?.key ?? FIXTURE_KEYS.string;
  const words = fill(spec.args, key, false);
  const call = (replace: (w: Word) => string): string[] => [...spec.words, ...words.map(replace)];
  add('valid', call((w) => w.value));
  add('no-args', spec.words);
  if (spec.arity > 0) add('extra-arg', [...call((w) => w.value), 'a']);
  // Every optional argument too, once each, in the documented order (often a syntax error: NX with XX).
  add('all-options', [...spec.words, ...fill(spec.args, key, true).map((w) => w.value)]);
  if (typed !== undefined && words.some((w) => w.spec?.type === 'key')) {
    add('wrongtype', call((w) => (w.spec?.type === 'key' ? typed.wrong : w.value)));
  }
  const bad: Record<string, [string, string][]> = {
    integer: [['not-integer', 'x'], ['overflow', '9223372036854775808']],
    double: [['not-float', 'x'], ['nan', 'nan'], ['inf', 'inf']], // the blocking ones have data: inf does not block
  };
  for (const target of words) {
    for (const [kind, value] of bad[target.spec?.type ?? ''] ?? []) {
      add(`${kind} ${target.spec?.name}`, call((w) => (w === target ? value : w.value)));
    }
  }
  return cases;
}
