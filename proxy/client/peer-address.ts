/** `ip:port`, with an IPv6 address in brackets, as Redis writes a peer (CLIENT LIST's addr, laddr). */
export function formatPeer(ip: string | undefined, port: number | undefined): string {
  const host = ip ?? '?';
  return host.includes(':') ? `[${host}]:${port ?? 0}` : `${host}:${port ?? 0}`;
}
