/**
 * Can this proxy follow a node as a replica? Asked before a migration starts, without starting a
 * sync (no fork, no snapshot on the node): the handshake, `PING`, `PSYNC ? -1` and `REPLCONF capa
 * eof` go in one write, so when the node reads `PSYNC` the `PING`'s reply is still unsent and a
 * node that lets the user run it answers "SYNC and PSYNC are invalid with pending output"
 * (replication.c, syncCommand). The command lookup and the ACL check come before that, so:
 *
 *   -ERR SYNC and PSYNC are invalid with pending output   -> PSYNC allowed
 *   -NOPERM ...                                            -> the user lacks +psync (or +replconf)
 *   -ERR unknown command ...                               -> PSYNC renamed or removed (managed services)
 *
 * Checked on Redis 7.0.15, 7.4.1 and Valkey 8.0.1. Should the write arrive in two reads anyway, the
 * node starts a full sync (`+FULLRESYNC`): that too says PSYNC is allowed, and the link is closed.
 */
import { BackendTls, backendSocket } from '../security/tls';
import { splitAddress } from '../backend/connection';
import * as encode from '../resp/encode';

export type ProbeVerdict =
  | { kind: 'allowed' }
  /** The node refuses to be followed; `why` quotes it. */
  | { kind: 'refused'; why: string }
  /** No answer to tell by (down, timed out, an answer this probe does not know). */
  | { kind: 'unknown'; why: string };

export interface ProbeOptions {
  tls: BackendTls | null;
  /** AUTH and the like, as the follower's link sends them (simple replies only). */
  handshake: readonly Buffer[];
  timeoutMs: number;
}

const PENDING_OUTPUT = 'SYNC and PSYNC are invalid with pending output';

export function probeReplication(address: string, options: ProbeOptions): Promise<ProbeVerdict> {
  return new Promise((resolve) => {
    const [host, port] = splitAddress(address);
    const lines: string[] = [];
    let buffered = '';
    let done = false;
    // Replies expected: the handshake's, PING's, PSYNC's, REPLCONF's.
    const psyncAt = options.handshake.length + 1;
    const finish = (verdict: ProbeVerdict): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      opened.socket.destroy();
      resolve(verdict);
    };
    const judge = (): void => {
      for (let i = 0; i < Math.min(lines.length, psyncAt); i++) {
        if (lines[i].startsWith('-')) return finish(verdictOf(address, i < options.handshake.length ? 'the handshake' : 'PING', lines[i]));
      }
      if (lines.length <= psyncAt) return;
      const psync = lines[psyncAt];
      if (psync.startsWith('+FULLRESYNC')) return finish({ kind: 'allowed' });
      if (!psync.startsWith('-')) return finish({ kind: 'unknown', why: `${address} answered PSYNC with "${psync}"` });
      if (psync.slice(1) !== `ERR ${PENDING_OUTPUT}`) return finish(verdictOf(address, 'PSYNC', psync));
      if (lines.length <= psyncAt + 1) return;
      const replconf = lines[psyncAt + 1];
      finish(replconf.startsWith('-') ? verdictOf(address, 'REPLCONF', replconf) : { kind: 'allowed' });
    };
    const opened = backendSocket(host, options.tls, (chunk) => {
      buffered += chunk.toString('latin1');
      let end: number;
      while ((end = buffered.indexOf('\r\n')) >= 0) {
        lines.push(buffered.slice(0, end));
        buffered = buffered.slice(end + 2);
      }
      judge();
    });
    const timer = setTimeout(() => finish({ kind: 'unknown', why: `${address} did not answer within ${options.timeoutMs} ms` }), options.timeoutMs);
    opened.socket.on('error', (err: Error) => finish({ kind: 'unknown', why: `${address}: ${err.message}` }));
    opened.socket.on('close', () => finish({ kind: 'unknown', why: `${address} closed the connection` }));
    opened.connect(port, host, () => {
      opened.socket.write(
        Buffer.concat([
          ...options.handshake,
          encode.command(['PING']),
          encode.command(['PSYNC', '?', '-1']),
          encode.command(['REPLCONF', 'capa', 'eof']),
        ]),
      );
    });
  });
}

function verdictOf(address: string, what: string, line: string): ProbeVerdict {
  const text = line.slice(1);
  if (text.startsWith('NOPERM') || /^ERR unknown command/i.test(text)) return { kind: 'refused', why: `${address} refuses ${what}: ${text.trim()}` };
  return { kind: 'unknown', why: `${address} answered ${what} with "${text.trim()}"` };
}
