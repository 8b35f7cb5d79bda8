/**
 * Node addresses as V8's internalized strings. The pool (proxy/backend/pool.ts) finds a node's
 * connections by its address, a Map lookup per request; when the Map's key and the address the
 * slot map or ring hands out are two string objects with the same text, every lookup compares
 * their characters through a runtime call. An internalized string is the one object of its text,
 * so the lookup compares pointers (bench/NOTES.md, round 10). A property name is always
 * internalized: that is how plain JS obtains one.
 */
export function interned(address: string): string {
  return Object.keys({ [address]: 0 })[0];
}
