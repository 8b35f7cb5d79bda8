import { importingSlots, isArrival } from '../../proxy/migration/follow-handoff';

test('the slots the node itself imports, from its CLUSTER NODES line (not those it migrates, nor another node\'s)', () => {
  const nodes = [
    'a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460 [5461-<-b2] [100->-c3] [16000-<-c3]',
    'b2 127.0.0.1:7001@17001 master - 0 1 2 connected 5461-10922 [200-<-a1]',
    'c3 127.0.0.1:7002@17002 master - 0 1 3 connected 10923-16383',
    '',
  ].join('\n');
  expect([...importingSlots(nodes)].sort((x, y) => x - y)).toEqual([5461, 16000]);
  expect(importingSlots('a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-16383\n').size).toBe(0);
});

test('MIGRATE\'s arrival is told from other commands by its name alone', () => {
  expect(isArrival(Buffer.from('RESTORE-ASKING'))).toBe(true);
  expect(isArrival(Buffer.from('restore-asking'))).toBe(true);
  expect(isArrival(Buffer.from('RESTORE'))).toBe(false);
  expect(isArrival(undefined)).toBe(false);
});
