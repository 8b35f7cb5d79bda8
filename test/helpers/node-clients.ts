// Jest helper: one ioredis client per node address (a client per key would run a node out of
// connections), all disconnected by closeAll() in afterEach.
import Redis from 'ioredis';

export class NodeClients {
  private readonly byAddress = new Map<string, Redis>();
  private readonly all: Redis[] = [];

  /** The client of `addr` (`host:port`), opened on first use. */
  open(addr: string): Redis {
    const known = this.byAddress.get(addr);
    if (known !== undefined && known.status !== 'end') return known;
    const [host, port] = addr.split(':');
    const c = this.track(new Redis({ host, port: Number(port), maxRetriesPerRequest: 0, disableClientInfo: true }));
    this.byAddress.set(addr, c);
    return c;
  }

  /** A client of the test's own, disconnected with the others. */
  track(c: Redis): Redis {
    this.all.push(c);
    return c;
  }

  closeAll(): void {
    for (const c of this.all.splice(0)) c.disconnect();
    this.byAddress.clear();
  }
}
