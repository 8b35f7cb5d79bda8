/**
 * The scripts the proxy knows (preloaded `scripts:` files, SCRIPT LOADed, run with EVAL) loaded on
 * every master of side B, so an EVALSHA finds them there after `done`, also through a proxy
 * restarted in front of B with an empty script store. SCRIPT EXISTS first: only what a master
 * lacks is loaded.
 */
import { log } from '../telemetry/log';
import { LibraryCall } from './libraries';

/** SHAs per SCRIPT EXISTS: a bounded request whatever the store holds. */
const EXISTS_BATCH = 500;

/** Returns how many loads it took; throws when a master cannot be reached. */
export async function copyScripts(call: LibraryCall, scripts: readonly [string, Buffer][], to: readonly string[]): Promise<number> {
  if (scripts.length === 0) return 0;
  let loaded = 0;
  await Promise.all(
    to.map(async (addr) => {
      for (let i = 0; i < scripts.length; i += EXISTS_BATCH) {
        const batch = scripts.slice(i, i + EXISTS_BATCH);
        const exists = await call(addr, ['SCRIPT', 'EXISTS', ...batch.map(([sha]) => sha)]);
        if (!Array.isArray(exists)) throw new Error(`${addr}: unexpected SCRIPT EXISTS reply`);
        for (let k = 0; k < batch.length; k++) {
          if (exists[k] === 1) continue;
          try {
            await call(addr, ['SCRIPT', 'LOAD', batch[k][1]]);
            loaded++;
          } catch (err) {
            // A body that does not compile there (another Redis version): the others still go.
            log.warn({ node: addr, sha: batch[k][0], err: (err as Error).message }, 'cannot load a known script on side B');
          }
        }
      }
    }),
  );
  if (loaded > 0) log.info({ scripts: loaded, nodes: to.length }, 'known scripts loaded on side B');
  return loaded;
}
