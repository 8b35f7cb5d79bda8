/** A wait that calls its `finish` at most once, cut after `ms` with what `timedOut` says (change-copier.ts barriers). */
export function timeBound<T>(ms: number, wait: (finish: (result: T) => void) => void, timedOut: () => T): Promise<T> {
  return new Promise((resolve) => {
    let settled = false;
    const finish = (result: T): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result);
    };
    const timer = setTimeout(() => finish(timedOut()), ms);
    wait(finish);
  });
}
