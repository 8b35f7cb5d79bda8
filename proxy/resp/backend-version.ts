/**
 * The back end's Redis version (INFO server's redis_version: Valkey 8 says 7.2.4), compared where
 * the proxy answers something itself whose text or shape changed between Redis versions.
 */
export function versionAtLeast(version: string, major: number, minor: number): boolean {
  const [ma, mi] = version.split('.').map((p) => Number.parseInt(p, 10));
  if (!Number.isFinite(ma)) return false;
  return ma > major || (ma === major && (mi ?? 0) >= minor);
}
