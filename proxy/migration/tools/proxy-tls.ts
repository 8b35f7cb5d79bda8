/**
 * How `slotproxy migrate phase` speaks TLS to proxies whose client listener has a `tls:` section,
 * from that section, each setting overridable by a flag:
 * - trusts: `--tls-ca`, else the listener's `tls.ca` (the fleet's CA, which usually signed the
 *   proxies' certificates too), else Node's built-in CAs;
 * - presents, when the listener asks for client certificates (`tls.ca` set): `--tls-cert` and
 *   `--tls-key`, else the proxy's own `tls.cert` and `tls.key` (signed by that CA; the files are on
 *   the machine the tool runs on when it runs beside a proxy);
 * - checks the name `--tls-servername` (also sent as SNI), else each proxy's registered host.
 * A handshake that fails is explained in those terms (tlsFailure), with the flag that changes it.
 */
import { readFileSync } from 'node:fs';
import tls from 'node:tls';
import { ClientTlsConfig } from '../../../config/schema';

export interface ProxyTlsFlags {
  tlsCa?: string;
  tlsCert?: string;
  tlsKey?: string;
  tlsServername?: string;
}

export interface ProxyTls {
  readonly context: tls.SecureContext;
  readonly servername: string | undefined;
  /** For messages: what it trusts, e.g. `tls.ca (/etc/ca.pem)`. */
  readonly trusts: string;
  /** For messages: the client certificate it presents, or null. */
  readonly presents: string | null;
}

function read(what: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new Error(`cannot read ${what} ${file}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** Null when the listener is plain TCP; throws when a file cannot be read or a flag makes no sense. */
export function proxyTls(listener: ClientTlsConfig | undefined, flags: ProxyTlsFlags): ProxyTls | null {
  const given = [flags.tlsCa, flags.tlsCert, flags.tlsKey, flags.tlsServername].some((f) => f !== undefined);
  if (listener === undefined) {
    if (given) throw new Error('--tls-* given, but the config has no tls: section: its proxies listen without TLS');
    return null;
  }
  if ((flags.tlsCert === undefined) !== (flags.tlsKey === undefined)) throw new Error('--tls-cert and --tls-key go together');
  const ca = flags.tlsCa !== undefined ? { what: '--tls-ca', file: flags.tlsCa } : listener.ca !== undefined ? { what: 'tls.ca', file: listener.ca } : null;
  let cert: { what: string; file: string; key: string } | null = null;
  if (flags.tlsCert !== undefined) cert = { what: '--tls-cert', file: flags.tlsCert, key: flags.tlsKey! };
  else if (listener.ca !== undefined) cert = { what: 'tls.cert', file: listener.cert, key: listener.key };
  const context = tls.createSecureContext({
    ca: ca === null ? undefined : read(ca.what, ca.file),
    cert: cert === null ? undefined : read(cert.what, cert.file),
    key: cert === null ? undefined : read(cert.what === 'tls.cert' ? 'tls.key' : '--tls-key', cert.key),
  });
  return {
    context,
    servername: flags.tlsServername,
    trusts: ca === null ? "Node's built-in CAs (the config has no tls.ca)" : `${ca.what} (${ca.file})`,
    presents: cert === null ? null : `${cert.what} (${cert.file})`,
  };
}

const UNTRUSTED = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_SIGNATURE_FAILURE',
  'CERT_UNTRUSTED',
]);

/** The alerts a TLS server sends when it refuses the client's certificate (or its lack of one). */
const CLIENT_CERT_REFUSED = /ALERT_(CERTIFICATE_REQUIRED|UNKNOWN_CA|BAD_CERTIFICATE|CERTIFICATE_UNKNOWN|UNSUPPORTED_CERTIFICATE|ACCESS_DENIED|DECRYPT_ERROR|HANDSHAKE_FAILURE)$/;

/** What a failed TLS connection to a proxy means, and what changes it; null when it is no TLS matter. */
export function tlsFailure(err: NodeJS.ErrnoException, t: ProxyTls, name: string): string | null {
  const code = err.code ?? '';
  if (UNTRUSTED.has(code)) {
    return `TLS: its certificate is not signed by a CA this tool trusts (${code}); it trusts ${t.trusts}: name the CA that signed the proxies' certificates with --tls-ca FILE`;
  }
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    return `TLS: its certificate is not for ${t.servername ?? name} (${err.message}); give a name the certificate carries with --tls-servername NAME`;
  }
  if (CLIENT_CERT_REFUSED.test(code)) return `TLS: it refused this tool's client certificate (${code}): ${presentedHint(t)}`;
  if (/WRONG_VERSION_NUMBER|PACKET_LENGTH_TOO_LONG|UNKNOWN_PROTOCOL|RECORD_LAYER_FAILURE/.test(code)) {
    return `TLS: it does not answer TLS (${code}): its listener has no tls: section, though this config has one`;
  }
  if (code.startsWith('ERR_SSL_') || code.startsWith('CERT_') || code.startsWith('ERR_TLS_')) return `TLS: ${err.message} (${code})`;
  return null;
}

function presentedHint(t: ProxyTls): string {
  return `its listener requires one signed by its tls.ca, and this tool presented ${t.presents ?? 'no client certificate'}; give one with --tls-cert FILE --tls-key FILE`;
}

/**
 * A TLS 1.3 server checks the client's certificate after the client's handshake is done: one it
 * refuses ends the connection before any reply (the alert may not reach the client first).
 */
export function closedAfterHandshake(t: ProxyTls): string {
  return `TLS: it closed the connection without a reply, as a listener that requires client certificates does when it refuses this tool's client certificate: ${presentedHint(t)}`;
}
