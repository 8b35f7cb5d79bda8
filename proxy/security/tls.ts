/**
 * TLS on both sides of the proxy (SPEC section 7).
 *
 * Clients: with a `tls` section the listener is a TLS server; sessions get a TLSSocket, which is a
 * net.Socket, so nothing past accept() knows the difference. The secure context can be replaced at
 * run time (SIGHUP), for certificate rotation; connected clients keep theirs.
 *
 * Back ends: with `backend.tls`, each back-end connection wraps its not-yet-connected TCP socket in
 * a TLS client socket, and counts as connected only after the handshake ('secureConnect'). The
 * secure context (CA, client certificate) is built once per proxy, not per connection.
 */
import { readFileSync } from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import { BackendTlsConfig, ClientTlsConfig } from '../../config/schema';
import { OnBytes, onreadOption } from '../net/socket-reader';

/** A TLS handshake from a client must finish within this long, so half-open handshakes do not pile up. */
const CLIENT_HANDSHAKE_TIMEOUT_MS = 10_000;

function read(file: string | undefined): Buffer | undefined {
  return file === undefined ? undefined : readFileSync(file);
}

/** The server-side options of a TLS listener; reads the files now (throws if one is unreadable). */
export function clientTlsOptions(config: ClientTlsConfig): tls.TlsOptions {
  return {
    cert: read(config.cert),
    key: read(config.key),
    ca: read(config.ca),
    requestCert: config.ca !== undefined,
    rejectUnauthorized: config.requireClientCert,
    handshakeTimeout: CLIENT_HANDSHAKE_TIMEOUT_MS,
  };
}

/** What a back-end connection needs to speak TLS; built once from the config. */
export interface BackendTls {
  readonly secureContext: tls.SecureContext;
  readonly servername: string | undefined;
  readonly rejectUnauthorized: boolean;
}

export function backendTls(config: BackendTlsConfig | undefined): BackendTls | null {
  if (config === undefined) return null;
  return {
    secureContext: tls.createSecureContext({ ca: read(config.ca), cert: read(config.cert), key: read(config.key) }),
    servername: config.servername,
    rejectUnauthorized: config.rejectUnauthorized,
  };
}

/** A socket to a node, and how to connect it: `onReady` runs once bytes may be written (after the TLS handshake). */
export interface BackendSocket {
  readonly socket: net.Socket;
  connect(port: number, host: string, onReady: () => void): void;
}

/**
 * `onBytes` gets what the node sends: over plain TCP read into the shared buffer (net/socket-reader.ts),
 * over TLS as 'data' events (the TLS layer reads the TCP socket itself).
 */
export function backendSocket(host: string, options: BackendTls | null, onBytes: OnBytes): BackendSocket {
  if (options === null) {
    const plain = new net.Socket({ onread: onreadOption(onBytes) } as net.SocketConstructorOpts);
    return { socket: plain, connect: (port, h, onReady) => plain.connect(port, h, onReady) };
  }
  const raw = new net.Socket();
  raw.setNoDelay(true);
  const socket = tls.connect({
    socket: raw,
    host,
    // SNI may not be an IP address; certificate checks still use `host` (IP SANs).
    servername: options.servername ?? (net.isIP(host) === 0 ? host : undefined),
    secureContext: options.secureContext,
    rejectUnauthorized: options.rejectUnauthorized,
  });
  socket.on('data', onBytes);
  return {
    socket,
    connect: (port, h, onReady) => {
      socket.once('secureConnect', onReady);
      raw.connect(port, h);
    },
  };
}
