/**
 * V8 flags slotproxy runs with (in the bin's shebang, the npm scripts and the benchmark).
 *
 * A 16 MiB young-generation semi-space, V8's own maximum on 64-bit, stated so that a Node release
 * with another default does not change it silently. What lives on the young generation is every
 * request in flight; when those outgrow a semi-space, each scavenge promotes them, and the old
 * generation fills with garbage that only a full GC removes. Measured side by side on a 3-master
 * cluster, split MSET of 10 keys at `-c 50 -P 16`: 2 MiB semi-spaces took 29.4 µs of proxy CPU per
 * request and peaked at 148 MiB RSS; 16 MiB took 18.3 µs and peaked at 105 MiB (4 and 8 MiB
 * behaved as 2). Plain GET/SET shapes cost the same CPU either way; idle RSS is about 3 MiB higher
 * and RSS under steady load about 20 MiB higher. The client that never reads stays bounded by
 * back-pressure, not by the GC: 134 MiB peak with 2 MiB, 137 with 16.
 *
 * `--expose-gc` gives cmd/settle-heap.ts the one collection after start-up that hands back the
 * young generation start-up grew (about 7 MiB of RSS at idle); nothing else calls `gc`.
 */
export const NODE_FLAGS: readonly string[] = ['--max-semi-space-size=16', '--expose-gc'];
