/**
 * The back end's Redis version (INFO server's redis_version: Valkey 8 says 7.2.4), compared where
 * the proxy answers something itself whose text or shape changed between Redis versions.
 */
export function versionAtLeast(version: string, major: number, minor: number): boolean {
  const [ma, mi] = version.split('.').map((p) => Number.parseInt(p, 10));
  if (!Number.isFinite(ma)) return false;
  return ma > major || (ma === major && (mi ?? 0) >= minor);
}

/** The back end as HELLO names it (`redis` or `valkey`, its own version) and its redis_version. */
export interface BackendIdentity {
  readonly backendServer: { readonly name: string; readonly version: string };
  readonly backendVersion: string;
}

/**
 * Whether the back end has something that came with Redis `redis` (major, minor) and with Valkey
 * `valkey`, for what Valkey's redis_version (7.2.4 for Valkey 8) does not tell.
 */
export function backendSince(b: BackendIdentity, redis: [number, number], valkey: [number, number]): boolean {
  if (b.backendServer.name === 'valkey') return versionAtLeast(b.backendServer.version, valkey[0], valkey[1]);
  return versionAtLeast(b.backendVersion, redis[0], redis[1]);
}
