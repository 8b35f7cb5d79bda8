// Which Redis build the tests run against (SLOTPROXY_REDIS_BIN, or PATH's), read once at module
// load from `redis-server --version`, so that a test that holds only on some versions says so in
// the test list itself (`if (redisAtLeast(7, 4)) test(...)`, with the reason beside it), never by
// skipping.
import { execFileSync, spawnSync } from 'node:child_process';
import { redisCliBin, redisServerBin } from '../../cmd/sandbox/helpers';

export interface ServerVersion {
  /** 'redis' or 'valkey', from the first word of `--version`. */
  flavor: 'redis' | 'valkey';
  major: number;
  minor: number;
  patch: number;
  /** As printed, e.g. "Valkey 8.0.1". */
  text: string;
}

function readVersion(): ServerVersion {
  const out = execFileSync(redisServerBin(), ['--version'], { encoding: 'utf8' });
  const m = /^(\w+) server v=(\d+)\.(\d+)\.(\d+)/.exec(out);
  if (m === null) throw new Error(`cannot read the server's version from: ${out}`);
  const flavor = m[1].toLowerCase() === 'valkey' ? 'valkey' : 'redis';
  return { flavor, major: Number(m[2]), minor: Number(m[3]), patch: Number(m[4]), text: `${m[1]} ${m[2]}.${m[3]}.${m[4]}` };
}

export const SERVER: ServerVersion = readVersion();

/** INFO server's redis_version: Valkey 8 answers 7.2.4 (its valkey_version is its own). */
export const REDIS_VERSION = SERVER.flavor === 'valkey' ? '7.2.4' : `${SERVER.major}.${SERVER.minor}.${SERVER.patch}`;

/** HELLO's server and version fields, as the server under test answers them. */
export const HELLO_SERVER = { server: SERVER.flavor, version: `${SERVER.major}.${SERVER.minor}.${SERVER.patch}` };

/** True when the server under test is a Redis (or Redis-compatible) version at least major.minor. */
export function redisAtLeast(major: number, minor: number): boolean {
  // Valkey 8 is Redis 7.2.4 to a client (its INFO says redis_version:7.2.4).
  const [ma, mi] = SERVER.flavor === 'valkey' ? [7, 2] : [SERVER.major, SERVER.minor];
  return ma > major || (ma === major && mi >= minor);
}

/** Redis 7.2 reworded NOPERM (Valkey too): the text the server under test, or the proxy in front of it, gives. */
export function nopermText(reason: 'command', user: string, fullName: string): string;
export function nopermText(reason: 'key' | 'channel'): string;
export function nopermText(reason: 'command' | 'key' | 'channel', user = '', fullName = ''): string {
  const newer = redisAtLeast(7, 2);
  if (reason === 'key') return newer ? 'NOPERM No permissions to access a key' : 'NOPERM this user has no permissions to access one of the keys used as arguments';
  if (reason === 'channel') return newer ? 'NOPERM No permissions to access a channel' : 'NOPERM this user has no permissions to access one of the channels used as arguments';
  return newer ? `NOPERM User ${user} has no permissions to run the '${fullName}' command` : `NOPERM this user has no permissions to run the '${fullName}' command`;
}

/** A node's refusal while a script or function runs: Valkey names itself in it. */
export function busyText(kill: 'SCRIPT' | 'FUNCTION'): string {
  return `BUSY ${SERVER.flavor === 'valkey' ? 'Valkey' : 'Redis'} is busy running a script. You can only call ${kill} KILL or SHUTDOWN NOSAVE.`;
}

/** HELLO before AUTH on a server with a password: Redis 7.2 added `<proto>` to the hint. */
export const NOAUTH_HELLO = `NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO ${redisAtLeast(7, 2) ? '<proto> ' : ''}AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time`;

const WRONGPASS_LINE = '-WRONGPASS invalid username-password pair or user is disabled.\r\n';

/**
 * The proxy's replies as a Redis 7.2+ node writes them: such a node writes nothing for a failed AUTH
 * pipelined behind unwritten replies (the client would wait forever), where the proxy answers
 * WRONGPASS. For comparing with the reference node byte for byte everywhere else.
 */
export function withoutPipelinedWrongpass(replies: string): string {
  return redisAtLeast(7, 2) ? replies.split(WRONGPASS_LINE).join('') : replies;
}

/**
 * True when the build under test has TLS (built with BUILD_TLS=yes, as Debian's is): its redis-cli
 * knows `--tls`. A build without it can neither serve TLS nor connect with it.
 */
const cliHelp = spawnSync(redisCliBin(), ['--help'], { encoding: 'utf8' });
export const BUILD_HAS_TLS: boolean = /--tls\b/.test(`${cliHelp.stdout}${cliHelp.stderr}`);
