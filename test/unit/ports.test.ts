import { CLUSTER_BUS_OFFSET, freeClusterPorts, freeStablePorts } from '../../cmd/sandbox/ports';

// Linux hands outgoing connections ports from 32768 up (net.ipv4.ip_local_port_range).
const EPHEMERAL_LOW = 32768;

test('cluster ports and their bus ports are distinct and below the ephemeral range', async () => {
  const ports = await freeClusterPorts(6);
  expect(new Set(ports).size).toBe(6);
  for (const p of ports) {
    expect(p).toBeGreaterThanOrEqual(12000);
    expect(p + CLUSTER_BUS_OFFSET).toBeLessThan(EPHEMERAL_LOW);
  }
});

test('stable ports are distinct and below the ephemeral range', async () => {
  const ports = await freeStablePorts(4);
  expect(new Set(ports).size).toBe(4);
  for (const p of ports) expect(p).toBeLessThan(EPHEMERAL_LOW);
});
