// Finding free loopback TCP ports for the redis-servers the sandbox starts.
//
// A port is "free" if we could listen on it a moment ago. There is always a
// race between closing our probe socket and redis-server binding the port, so
// callers that pick ports automatically should retry on "address in use".

import net from 'node:net';

export const LOOPBACK = '127.0.0.1';

/** Redis Cluster listens on port + 10000 for the cluster bus. */
export const CLUSTER_BUS_OFFSET = 10000;
export const MAX_PORT = 65535;
/** Highest port whose cluster bus port (port + 10000) is still valid. */
export const MAX_CLUSTER_PORT = MAX_PORT - CLUSTER_BUS_OFFSET;

/** Listens on LOOPBACK:port (0 = any); resolves null if the port is taken. */
function tryListen(port: number): Promise<net.Server | null> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE' || err.code === 'EACCES') resolve(null);
      else reject(err);
    });
    // exclusive: a port held in a node cluster primary must not count as free.
    server.listen({ host: LOOPBACK, port, exclusive: true }, () => resolve(server));
  });
}

function portOf(server: net.Server): number {
  const addr = server.address();
  if (addr === null || typeof addr === 'string') {
    throw new Error('ports: listening socket has no TCP address');
  }
  return addr.port;
}

function closeAll(servers: net.Server[]): Promise<void> {
  return Promise.all(
    servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))),
  ).then(() => undefined);
}

function checkCount(n: number): void {
  if (!Number.isInteger(n) || n < 0) {
    throw new RangeError(`ports: count must be a non-negative integer, got ${n}`);
  }
}

/** One free port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  const [port] = await freePorts(1);
  return port;
}

/**
 * n distinct free ports on 127.0.0.1. All probe sockets stay open until all n
 * are found, so the OS cannot hand out the same port twice.
 */
export async function freePorts(n: number): Promise<number[]> {
  checkCount(n);
  const held: net.Server[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const server = await tryListen(0);
      if (server === null) throw new Error('ports: could not listen on an ephemeral port');
      held.push(server);
    }
    return held.map(portOf);
  } finally {
    await closeAll(held);
  }
}

/** Ports below the kernel's ephemeral range (32768-60999 on Linux), where no outgoing connection is given one. */
const STABLE_LOW = 12000;
const STABLE_HIGH = 22000;

/** Every port of STABLE_LOW-STABLE_HIGH once, from a random one on: concurrent callers rarely probe the same ports. */
function* stablePorts(): Generator<number> {
  const span = STABLE_HIGH - STABLE_LOW;
  const start = Math.floor(Math.random() * span);
  for (let i = 0; i < span; i++) yield STABLE_LOW + ((start + i) % span);
}

/**
 * n distinct free ports on 127.0.0.1 below the ephemeral range, from a random start: for a process
 * stopped and started again on the same port (an ephemeral port freed by it may be handed to any
 * outgoing connection meanwhile, and the restart then fails with EADDRINUSE).
 */
export async function freeStablePorts(n: number): Promise<number[]> {
  checkCount(n);
  const held: net.Server[] = [];
  try {
    for (const port of stablePorts()) {
      if (held.length >= n) break;
      const server = await tryListen(port);
      if (server !== null) held.push(server);
    }
    if (held.length < n) throw new Error(`ports: found only ${held.length} of ${n} free ports in ${STABLE_LOW}-${STABLE_HIGH}`);
    return held.map(portOf);
  } finally {
    await closeAll(held);
  }
}

/**
 * n distinct ports p usable by Redis Cluster nodes: p and p + 10000 (the cluster bus) both free on
 * 127.0.0.1, both below the kernel's ephemeral range (p in 12000-22000, its bus in 22000-32000), so
 * no outgoing connection of any process holds a bus port a node needs, nor takes a port a node
 * restarted on it had.
 */
export async function freeClusterPorts(n: number): Promise<number[]> {
  checkCount(n);
  const held: net.Server[] = [];
  const ports: number[] = [];
  try {
    for (const port of stablePorts()) {
      if (ports.length >= n) break;
      const probe = await tryListen(port);
      if (probe === null) continue;
      const bus = await tryListen(port + CLUSTER_BUS_OFFSET);
      if (bus === null) {
        await closeAll([probe]);
        continue;
      }
      // Keep both open: later picks then cannot collide with this pair.
      held.push(probe, bus);
      ports.push(port);
    }
    if (ports.length < n) throw new Error(`ports: found only ${ports.length} of ${n} free cluster port pairs in ${STABLE_LOW}-${STABLE_HIGH}`);
    return ports;
  } finally {
    await closeAll(held);
  }
}

/** True if something accepts TCP connections on host:port right now. */
export function isListening(port: number, host: string = LOOPBACK, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (result: boolean): void => {
      socket.destroy();
      resolve(result);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}
