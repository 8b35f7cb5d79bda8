/** Resolves with the value once `check` holds, polling every 20 ms; throws with the last value after `ms`. */
export async function eventually<T>(read: () => Promise<T>, check: (v: T) => boolean, ms = 10_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await read();
    if (check(v)) return v;
    if (Date.now() > until) throw new Error(`still ${JSON.stringify(v)} after ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
