// Jest helper: a scriptable stand-in for redis-sentinel, on a free loopback port. It answers what
// slotproxy asks a sentinel (AUTH, PING, SENTINEL MASTER, SENTINEL REPLICAS, SUBSCRIBE) from a
// table the test sets, and publishes +switch-master when told: failovers happen exactly when a
// test says, which real sentinels cannot promise. Every connection is closed by stop().
import net from 'node:net';
import RedisParser from 'redis-parser';

export interface FakeMaster {
  address: string;
  epoch: number;
  replicas?: { address: string; flags?: string; link?: string }[];
}

function bulk(s: string): string {
  return `$${Buffer.byteLength(s)}\r\n${s}\r\n`;
}

function array(items: string[]): string {
  return `*${items.length}\r\n${items.join('')}`;
}

function hostAndPort(address: string): [string, string] {
  const i = address.lastIndexOf(':');
  return [address.slice(0, i), address.slice(i + 1)];
}

export class FakeSentinel {
  readonly masters = new Map<string, FakeMaster>();
  /** Every command received, as "NAME arg..." (AUTH's password left out). */
  readonly commands: string[] = [];
  private readonly sockets = new Set<net.Socket>();
  private readonly subscribers = new Set<net.Socket>();

  private constructor(
    private readonly server: net.Server,
    private readonly password: string | null,
  ) {}

  static async start(opts: { password?: string } = {}): Promise<FakeSentinel> {
    const server = net.createServer();
    const fake = new FakeSentinel(server, opts.password ?? null);
    server.on('connection', (socket) => fake.serve(socket));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return fake;
  }

  get address(): string {
    return `127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
  }

  /** Questions asked about master `name` so far. */
  asked(name: string): number {
    return this.commands.filter((c) => c === `SENTINEL MASTER ${name}`).length;
  }

  /** Tells every subscriber that `name` moved from `from` to `to`. */
  publishSwitch(name: string, from: string, to: string): void {
    const [oh, op] = hostAndPort(from);
    const [nh, np] = hostAndPort(to);
    this.publish('+switch-master', `${name} ${oh} ${op} ${nh} ${np}`);
  }

  /** A Sentinel event as a sentinel publishes it (`+failover-state-send-slaveof-noone`, ...). */
  publish(channel: string, payload: string): void {
    const frame = array([bulk('message'), bulk(channel), bulk(payload)]);
    for (const s of this.subscribers) s.write(frame);
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private serve(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.on('close', () => {
      this.sockets.delete(socket);
      this.subscribers.delete(socket);
    });
    socket.on('error', () => undefined);
    let authed = this.password === null;
    const parser = new RedisParser({
      returnReply: (args: unknown) => {
        const argv = (args as unknown[]).map(String);
        const name = (argv[0] ?? '').toUpperCase();
        this.commands.push(name === 'AUTH' ? 'AUTH' : [name, ...argv.slice(1)].join(' '));
        if (name === 'AUTH') {
          authed = argv[argv.length - 1] === this.password;
          return void socket.write(authed ? '+OK\r\n' : '-WRONGPASS invalid username-password pair or user is disabled.\r\n');
        }
        if (!authed) return void socket.write('-NOAUTH Authentication required.\r\n');
        socket.write(this.answer(socket, argv));
      },
      returnError: () => undefined,
    });
    socket.on('data', (chunk) => parser.execute(chunk));
  }

  private answer(socket: net.Socket, argv: string[]): string {
    const [cmd, sub, name] = [argv[0].toUpperCase(), (argv[1] ?? '').toUpperCase(), argv[2] ?? ''];
    if (cmd === 'PING') return '+PONG\r\n';
    if (cmd === 'SUBSCRIBE') {
      this.subscribers.add(socket);
      return array([bulk('subscribe'), bulk(argv[1]), ':1\r\n']);
    }
    if (cmd !== 'SENTINEL') return `-ERR unknown command '${argv[0]}'\r\n`;
    const m = this.masters.get(name);
    if (m === undefined) return '-ERR No such master with that name\r\n';
    if (sub === 'MASTER') {
      const [ip, port] = hostAndPort(m.address);
      return array(['name', name, 'ip', ip, 'port', port, 'flags', 'master', 'config-epoch', String(m.epoch)].map(bulk));
    }
    if (sub === 'REPLICAS' || sub === 'SLAVES') {
      return array(
        (m.replicas ?? []).map((r) => {
          const [ip, port] = hostAndPort(r.address);
          return array(['name', r.address, 'ip', ip, 'port', port, 'flags', r.flags ?? 'slave', 'master-link-status', r.link ?? 'ok'].map(bulk));
        }),
      );
    }
    return `-ERR unknown sentinel subcommand '${argv[1] ?? ''}'\r\n`;
  }
}
