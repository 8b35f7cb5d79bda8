/**
 * What a valid config may still get wrong: settings whose default is a trap for a config written by
 * hand. Said by `check-config` and logged at start; the config is served as it is.
 */

export const RING_HASH_UNSET =
  "ring.hash not set: md5, slotproxy's default; a twemproxy pool's default is fnv1a_64: set hash: to the pool's";

function isMapping(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Warnings about a slotproxy config as written (before its defaults are filled in). */
export function configWarnings(raw: unknown): string[] {
  if (!isMapping(raw) || raw.mode !== 'ring' || !isMapping(raw.ring)) return [];
  // A ring written by hand against servers a twemproxy pool placed keys on reads none of them back
  // under another hash: the default (SPEC 6) stays, the trap is named.
  return raw.ring.hash === undefined ? [RING_HASH_UNSET] : [];
}
