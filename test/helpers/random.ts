// Seeded pseudo-random numbers for fuzz and chunking tests, so a failure reproduces from its seed.

/** xorshift32: fast enough for 100,000 fuzz cases under jest. Returns numbers in [0, 1). */
export function xorshift32(seed: number): () => number {
  let x = (seed ^ 0x9e3779b9) >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 4294967296;
  };
}

/** A whole number in [lo, hi]. */
export function randInt(rng: () => number, lo: number, hi: number): number {
  return lo + Math.floor(rng() * (hi - lo + 1));
}
