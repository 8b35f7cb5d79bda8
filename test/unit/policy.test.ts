// POLICY: how each command that is not simply "route by its keys" is handled. Every entry must name a
// command the (fallback, Redis 7.0) command table knows, or the entry can never apply.
import { ADMIN_COMMANDS, LOCAL_SUBCOMMAND_ARITY, NEWER_THAN_FALLBACK, POLICY, RING_POLICY, Strategy, strategyFor } from '../../proxy/commands/policy';
import { CommandTable } from '../../proxy/commands/table';

const table = CommandTable.fallback();
const entries = [...POLICY.entries()];
/** Ring mode's own entries (where they differ from cluster mode's) are held to the same rules. */
const ringOnly = [...RING_POLICY.entries()].filter(([name, strategy]) => POLICY.get(name) !== strategy);

describe('POLICY entries', () => {
  test('is not empty, and its names are lower case, with at most one "|"', () => {
    expect(entries.length).toBeGreaterThan(50);
    for (const [name] of entries) expect(name).toMatch(/^[a-z_-]+(\|[a-z_-]+)?$/);
  });

  test.each([...entries, ...ringOnly])('%s names a command of the table', (name) => {
    const bar = name.indexOf('|');
    // A newer back end's command: not in the fallback table (else it belongs with the others).
    if (NEWER_THAN_FALLBACK.has(name)) {
      expect(bar < 0 ? table.get(name) : table.get(name.slice(0, bar))?.subcommands?.get(name.slice(bar + 1))).toBeUndefined();
      return;
    }
    if (bar < 0) {
      expect(table.get(name)?.name).toBe(name);
      return;
    }
    const container = table.get(name.slice(0, bar));
    expect(container?.subcommands).not.toBeNull();
    // Answered locally even where the back end's table lacks it (the dispatcher checks this list).
    if (LOCAL_SUBCOMMAND_ARITY.has(name)) {
      expect(POLICY.get(name)?.kind).toBe('client');
      return;
    }
    // The dispatcher only reaches a `container|sub` entry when the table resolves the subcommand.
    expect(container?.subcommands?.get(name.slice(bar + 1))?.name).toBe(name);
  });

  const refusals = entries.filter((e): e is [string, Extract<Strategy, { kind: 'refuse' }>] => e[1].kind === 'refuse');

  test('some entries refuse', () => {
    expect(refusals.length).toBeGreaterThan(10);
  });

  test.each(refusals)('%s: the refusal gives a reason', (_name, strategy) => {
    expect(strategy.why.trim().length).toBeGreaterThan(0);
    expect(strategy.why).not.toMatch(/\r|\n/);
  });

  test.each([...entries, ...ringOnly])('%s has a known strategy kind', (_name, strategy) => {
    expect(['local', 'client', 'fanout', 'any-master', 'every-node', 'slot', 'refuse', 'transaction', 'pubsub', 'wait', 'monitor', 'every-master']).toContain(strategy.kind);
  });

  test.each([...ADMIN_COMMANDS])('admin command %s has an entry that runs it', (name) => {
    expect(['fanout', 'any-master', 'every-node']).toContain(POLICY.get(name)?.kind);
  });
});

describe('strategyFor', () => {
  test.each<[string, string | null, Strategy['kind'] | undefined]>([
    // plain commands
    ['ping', null, 'local'],
    ['dbsize', null, 'fanout'],
    ['time', null, 'any-master'],
    ['multi', null, 'transaction'],
    ['ssubscribe', null, 'pubsub'],
    ['wait', null, 'wait'],
    ['function|load', 'function', 'fanout'],
    ['get', null, undefined],
    ['eval', null, undefined],
    // a listed subcommand wins over its container
    ['client|setname', 'client', 'client'],
    ['client|pause', 'client', 'fanout'],
    ['cluster|keyslot', 'cluster', 'local'],
    ['script|load', 'script', 'fanout'],
    // an unlisted subcommand falls back to its container
    ['client|no-touch', 'client', 'refuse'],
    ['cluster|nodes', 'cluster', 'refuse'],
    ['script|debug', 'script', 'refuse'],
    ['config|get', 'config', 'any-master'],
    ['config|set', 'config', 'every-node'],
    ['config|resetstat', 'config', 'every-node'],
    ['memory|malloc-stats', 'memory', 'refuse'],
    ['memory|purge', 'memory', 'fanout'],
    ['randomkey', null, 'fanout'],
    // a Redis Cluster node answers these itself: by the slot named, by the key, any master
    ['cluster|countkeysinslot', 'cluster', 'slot'],
    ['cluster|getkeysinslot', 'cluster', 'slot'],
    ['move', null, undefined],
    ['swapdb', null, 'any-master'],
    ['acl|whoami', 'acl', 'local'],
    ['acl|cat', 'acl', 'any-master'],
    ['acl|help', 'acl', 'any-master'],
    ['acl|genpass', 'acl', 'any-master'],
    ['acl|list', 'acl', 'local'],
    ['acl|setuser', 'acl', 'local'],
    ['acl|log', 'acl', 'local'],
    ['acl|save', 'acl', 'refuse'],
    // neither listed: routed by keys
    ['object|encoding', 'object', undefined],
    ['xinfo|stream', 'xinfo', undefined],
  ])('%s (container %s) -> %s', (name, container, kind) => {
    expect(strategyFor(name, container)?.kind).toBe(kind);
  });

  test('a subcommand with keys is routed by its key, whatever its container\'s entry', () => {
    expect(strategyFor('memory|usage', 'memory', true)).toBeUndefined();
    expect(strategyFor('memory|malloc-stats', 'memory', false)).toBe(POLICY.get('memory'));
    // A listed subcommand keeps its entry.
    expect(strategyFor('config|set', 'config', true)).toBe(POLICY.get('config|set'));
  });

  test('the table says which subcommands have keys: exactly those of MEMORY, OBJECT, XINFO and XGROUP', () => {
    const keyed = [...table.all()].filter((c) => c.name.includes('|') && (c.keySpecs.length > 0 || c.firstKey > 0)).map((c) => c.name);
    expect(new Set(keyed.map((n) => n.split('|')[0]))).toEqual(new Set(['memory', 'object', 'xinfo', 'xgroup']));
    for (const name of keyed) expect(strategyFor(name, name.split('|')[0], true)).toBeUndefined();
  });

  test('a subcommand falls back to exactly its container entry', () => {
    expect(strategyFor('client|no-touch', 'client')).toBe(POLICY.get('client'));
    expect(strategyFor('client|setname', 'client')).toBe(POLICY.get('client|setname'));
  });

  test('a subcommand name without its container is not looked up by container', () => {
    expect(strategyFor('client|no-touch', null)).toBeUndefined();
  });

  test.each<[string, string | null, Strategy['kind'] | undefined]>([
    ['move', null, 'local'],
    ['swapdb', null, 'local'],
    ['cluster|countkeysinslot', 'cluster', 'refuse'],
    ['cluster|getkeysinslot', 'cluster', 'refuse'],
    ['cluster|keyslot', 'cluster', 'local'],
    ['acl|whoami', 'acl', 'local'],
    ['get', null, undefined],
  ])('ring mode: %s (container %s) -> %s', (name, container, kind) => {
    expect(strategyFor(name, container, false, RING_POLICY)?.kind).toBe(kind);
  });

  test.each(entries)('%s resolves to its own entry', (name, strategy) => {
    const bar = name.indexOf('|');
    expect(strategyFor(name, bar < 0 ? null : name.slice(0, bar))).toBe(strategy);
  });
});
