/**
 * One request from a `migrate` tool to a proxy, as a client of its listener: a connection of its
 * own (plain TCP, or TLS as proxy-tls.ts sets it up), AUTH first when the proxies have a password
 * or the tool was given one of their users, closed after the reply. Every way it can fail is said in words that point at the cause.
 */
import net from 'node:net';
import tls from 'node:tls';
import { ReplyFramer } from '../../resp/reply-framer';
import { errorText } from '../../resp/decode-reply';
import * as encode from '../../resp/encode';
import { socketErrorText } from '../../backend/socket-error';
import { splitAddress } from '../../backend/connection';
import { ProxyTls, closedAfterHandshake, tlsFailure } from './proxy-tls';

export interface ProxyLinkOptions {
  /** The proxies' client password (`auth.password`), or `user`'s (`auth.users[]`), sent as AUTH. */
  password?: string;
  /** A user of the config's `auth.users`, sent as `AUTH user password`; absent, the default user's `auth.password`. */
  user?: string;
  tls: ProxyTls | null;
  timeoutMs: number;
}

/** Sends `args` to the proxy at `addr`; resolves with its reply frame (an error reply is one too), rejects saying why (not naming `addr`). */
export function askProxy(addr: string, args: readonly string[], opts: ProxyLinkOptions): Promise<Buffer> {
  const [host, port] = splitAddress(addr);
  const auth = opts.password === undefined ? [] : [encode.command(opts.user === undefined ? ['AUTH', opts.password] : ['AUTH', opts.user, opts.password])];
  const requests = [...auth, encode.command(args)];
  return new Promise((resolve, reject) => {
    const t = opts.tls;
    const socket =
      t === null
        ? net.connect({ host, port })
        : // SNI may not be an IP address; the certificate check still uses `host` (IP SANs).
          tls.connect({ host, port, secureContext: t.context, servername: t.servername ?? (net.isIP(host) === 0 ? host : undefined), rejectUnauthorized: true });
    const framer = new ReplyFramer();
    const frames: Buffer[] = [];
    let settled = false;
    const finish = (err: string | null, frame?: Buffer): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (err === null) resolve(frame!);
      else reject(new Error(err));
    };
    const timer = setTimeout(() => finish(`no reply within ${opts.timeoutMs} ms`), opts.timeoutMs);
    let connected = false;
    socket.on(t === null ? 'connect' : 'secureConnect', () => {
      connected = true;
      socket.write(Buffer.concat(requests));
    });
    socket.on('data', (chunk: Buffer) => {
      try {
        framer.push(chunk, (frame) => frames.push(Buffer.from(frame)));
      } catch {
        return finish(`it answered bytes that are not RESP${t === null ? ': if its listener speaks TLS, the config lacks its tls: section' : ''}`);
      }
      if (opts.password !== undefined && frames.length >= 1) {
        const refused = errorText(frames[0]);
        if (refused !== null) return finish(`it refused ${opts.user === undefined ? "the config's auth.password" : `user ${opts.user} with its password in the config`}: ${refused}`);
      }
      if (frames.length === requests.length) finish(null, frames[frames.length - 1]);
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      const why = t === null ? null : tlsFailure(err, t, host);
      finish(why ?? socketErrorText(err));
    });
    socket.on('close', () => {
      if (t === null) return finish('it closed the connection without a reply (if its listener speaks TLS, the config lacks its tls: section)');
      finish(connected ? closedAfterHandshake(t) : 'it closed the connection during the TLS handshake');
    });
  });
}
