/**
 * Why a connection to a node failed, worded as the OS words it (strerror), which is the text
 * twemproxy puts in its error replies (`-ERR Connection refused`) and what its clients and
 * operators match on, rather than Node's `connect ECONNREFUSED 127.0.0.1:7101`.
 *
 * The texts are glibc's strerror (gai_strerror for name lookups). An error without a known code
 * (TLS, a malformed address) keeps Node's message.
 */

const STRERROR: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'Connection refused',
  ETIMEDOUT: 'Connection timed out',
  EHOSTUNREACH: 'No route to host',
  EHOSTDOWN: 'Host is down',
  ENETUNREACH: 'Network is unreachable',
  ENETDOWN: 'Network is down',
  ECONNRESET: 'Connection reset by peer',
  ECONNABORTED: 'Software caused connection abort',
  EPIPE: 'Broken pipe',
  EADDRNOTAVAIL: 'Cannot assign requested address',
  // getaddrinfo's EAI_NONAME and EAI_AGAIN, which Node reports under these codes.
  ENOTFOUND: 'Name or service not known',
  EAI_AGAIN: 'Temporary failure in name resolution',
};

/** The strerror text of a socket error, or Node's message when its code is not a known one. */
export function socketErrorText(err: Error): string {
  const code = (err as NodeJS.ErrnoException).code;
  return code !== undefined && Object.hasOwn(STRERROR, code) ? STRERROR[code] : err.message;
}

/** No connection within `connectTimeoutMs`: ETIMEDOUT's text, as a kernel connect timeout reads, with the limit. */
export function connectTimeoutText(ms: number): string {
  return `${STRERROR.ETIMEDOUT}: no connection within ${ms} ms`;
}
