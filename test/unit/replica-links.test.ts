// readFrom replica: which replicas a master's INFO replication lets the proxy read from.
import { linkIsUsable, parseReplicaLinks } from '../../proxy/cluster/replica-reads';

// As Redis 7.0 writes it (CRLF, one slaveN line per replica).
const INFO = [
  '# Replication',
  'role:master',
  'connected_slaves:4',
  'slave0:ip=127.0.0.1,port=7004,state=online,offset=1234,lag=0',
  'slave1:ip=127.0.0.1,port=7005,state=online,offset=1200,lag=5',
  'slave2:ip=127.0.0.1,port=7006,state=wait_bgsave,offset=0,lag=0',
  'slave3:ip=::1,port=7007,state=online,offset=1234,lag=1',
  'master_failover_state:no-failover',
  '',
].join('\r\n');

test('every slaveN line becomes an address with its state and lag', () => {
  const links = parseReplicaLinks(INFO);
  expect([...links.keys()]).toEqual(['127.0.0.1:7004', '127.0.0.1:7005', '127.0.0.1:7006', '[::1]:7007']);
  expect(links.get('127.0.0.1:7005')).toEqual({ state: 'online', lagSeconds: 5 });
});

test('a replica is read from only when online and within the lag limit', () => {
  const links = parseReplicaLinks(INFO);
  expect(linkIsUsable(links.get('127.0.0.1:7004'), 2)).toBe(true);
  expect(linkIsUsable(links.get('127.0.0.1:7005'), 2)).toBe(false); // lags
  expect(linkIsUsable(links.get('127.0.0.1:7005'), 5)).toBe(true);
  expect(linkIsUsable(links.get('127.0.0.1:7006'), 2)).toBe(false); // still syncing
  expect(linkIsUsable(links.get('127.0.0.1:7099'), 2)).toBe(false); // the master does not list it
});

test('a line without lag (a replica that never acknowledged) is not usable', () => {
  const links = parseReplicaLinks('slave0:ip=10.0.0.1,port=6380,state=online,offset=0\r\n');
  expect(linkIsUsable(links.get('10.0.0.1:6380'), 1000)).toBe(false);
});
