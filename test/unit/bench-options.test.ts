// `npm run bench` flags (bench/options.ts): a partial run picks targets and tests, and skips the
// memory and migration parts, which only mean something over the whole run.
import { UsageError, parseOptions } from '../../bench/options';

describe('bench options', () => {
  test('--targets and --tests pick a subset, in the bench order, and make the run partial', () => {
    const o = parseOptions(['--targets', 'cluster,twemproxy', '--tests', 'GET,SET'], '/repo');
    expect(o?.targets).toEqual(['twemproxy', 'cluster']);
    expect(o?.tests).toEqual(['GET', 'SET']);
    expect(o?.memoryTest).toBe(false);
  });

  test('a full run has every target and the memory test', () => {
    const o = parseOptions([], '/repo');
    expect(o?.targets).toEqual(['direct', 'twemproxy', 'floor', 'ring', 'floor-cluster', 'cluster', 'workers']);
    expect(o?.memoryTest).toBe(true);
  });

  test('--baseline adds the baseline rows, each beside its own build; they need it', () => {
    expect(parseOptions(['--baseline', '/tmp/before', '--targets', 'ring,ring-baseline,twemproxy'], '/repo')).toMatchObject({ baseline: '/tmp/before', targets: ['twemproxy', 'ring', 'ring-baseline'] });
    expect(parseOptions(['--baseline=/tmp/before'], '/repo')?.targets).toEqual(['direct', 'twemproxy', 'floor', 'ring', 'ring-baseline', 'floor-cluster', 'cluster', 'cluster-baseline', 'workers']);
    expect(() => parseOptions(['--targets', 'ring-baseline'], '/repo')).toThrow(/need --baseline DIR/);
    expect(() => parseOptions(['--baseline'], '/repo')).toThrow(/--baseline needs a directory/);
  });

  test('unknown names and empty lists are usage errors naming what is known', () => {
    expect(() => parseOptions(['--targets', 'predixy'], '/repo')).toThrow(UsageError);
    expect(() => parseOptions(['--targets', 'predixy'], '/repo')).toThrow(/known: direct,twemproxy,floor,ring,ring-baseline,floor-cluster,cluster,cluster-baseline,workers/);
    expect(() => parseOptions(['--tests='], '/repo')).toThrow(/--tests needs a list/);
  });
});
