/**
 * Before a migration starts (double-write at start, on a reload, over `PROXY MIGRATION PHASE`):
 * can the back-end user read every key on every node of side A? Newer Redis versions filter a
 * tracking connection's invalidations by its user's key permissions, so a change feed whose user
 * lacks read access to some keys would miss their changes without a word (and their copies would
 * fail). The user's own rules are read with `ACL WHOAMI` and `ACL GETUSER`; read access to every
 * key is a key pattern `*` with read permission (`~*`, `%R~*`, `%RW~*`, `allkeys`) in its root
 * permissions or one of its selectors.
 *
 * When the rules cannot be read (the user may not run `ACL GETUSER`, a node does not answer) the
 * answer is a refusal saying so: a migration that may lose changes silently is worse than one that
 * waits for a grant. A server without ACL (`ACL` unknown, before Redis 6) has no key permissions.
 * The same check first refuses a side A newer than side B (side-versions.ts).
 */
import { BackendPool } from '../backend/pool';
import { request } from '../backend/request';
import { Reply, decodeReply, errorText, replyFields } from '../resp/decode-reply';
import { Placement } from '../../sharding/migration';
import { log } from '../telemetry/log';
import { versionProblem } from './side-versions';

/**
 * Why the migration must not start: the first node of A whose user cannot read every key, or
 * cannot be checked; null when every node's can. `unreached: 'pass'` (at start) lets a node that
 * does not answer pass with a warning: its change feed is down until it answers, and that gap
 * already holds back read-new; refusing would keep the whole proxy from serving.
 */
export async function feedPermissionProblem(pool: BackendPool, placement: Placement, timeoutMs: number, unreached: 'refuse' | 'pass' = 'refuse'): Promise<string | null> {
  // First the sides' versions (side-versions.ts): a newer A cannot be copied into an older B at all.
  const versions = await versionProblem(pool, placement, timeoutMs);
  if (versions !== null) return versions;
  const nodes = placement.from.masters();
  const problems = await Promise.all(nodes.map((address) => nodeProblem(pool, address, timeoutMs)));
  for (const p of problems) {
    if (p === null) continue;
    if (!p.reached && unreached === 'pass') {
      log.warn({ node: p.address, err: p.why }, 'cannot check the back-end user\'s key permissions on this node of side A now: it did not answer');
      continue;
    }
    return p.why;
  }
  return null;
}

interface NodeProblem {
  address: string;
  why: string;
  /** False when the node did not answer at all. */
  reached: boolean;
}

async function nodeProblem(pool: BackendPool, address: string, timeoutMs: number): Promise<NodeProblem | null> {
  const verdict = await nodeVerdict(pool, address, timeoutMs).then(
    (why) => (why === null ? null : { why, reached: true }),
    (err: unknown) => ({ why: cannotCheck(address, err instanceof Error ? err.message : String(err)), reached: false }),
  );
  return verdict === null ? null : { address, ...verdict };
}

function cannotCheck(address: string, why: string): string {
  return `cannot check that the back-end user may read every key on side A's node ${address} (${why}); its change feed would miss changes to keys it may not read: let the user run ACL WHOAMI and ACL GETUSER on its own name`;
}

/** Rejects when the node does not answer. */
async function nodeVerdict(pool: BackendPool, address: string, timeoutMs: number): Promise<string | null> {
  const ask = async (args: string[]): Promise<Buffer> => request(pool.connection(address, 0), args, timeoutMs);
  const whoami = await ask(['ACL', 'WHOAMI']);
  const whoamiError = errorText(whoami);
  if (whoamiError !== null) {
    // Before Redis 6 there is no ACL: every connection reads every key.
    if (/^ERR unknown command/.test(whoamiError)) return null;
    return cannotCheck(address, `ACL WHOAMI: ${whoamiError}`);
  }
  const user = String(decodeReply(whoami));
  const rules = await ask(['ACL', 'GETUSER', user]);
  const rulesError = errorText(rules);
  if (rulesError !== null) return cannotCheck(address, `ACL GETUSER ${user}: ${rulesError}`);
  const patterns = readPatterns(decodeReply(rules));
  if (patterns.readsEveryKey) return null;
  const shown = patterns.described.length === 0 ? 'none' : patterns.described.join(' ');
  return `the back-end user "${user}" may not read every key on side A's node ${address} (its key patterns: ${shown}): its change feed would miss changes to the others; give it read access to every key (~* or %R~*)`;
}

/**
 * The key patterns of a user and its selectors, and whether one grants read on every key. Redis 7
 * writes `keys` as one string (`~app:* %R~log:*`); Redis 6 as a list of patterns, with `allkeys`
 * among the flags.
 */
export function readPatterns(reply: Reply): { readsEveryKey: boolean; described: string[] } {
  const described: string[] = [];
  let readsEveryKey = false;
  const scan = (user: Map<string, Reply>): void => {
    const flags = user.get('flags');
    if (Array.isArray(flags) && flags.some((f) => String(f) === 'allkeys')) {
      readsEveryKey = true;
      described.push('allkeys');
    }
    const keys = user.get('keys');
    const tokens = Array.isArray(keys) ? keys.map((k) => `~${String(k)}`) : typeof keys === 'string' || Buffer.isBuffer(keys) ? String(keys).split(' ').filter((t) => t !== '') : [];
    for (const token of tokens) {
      described.push(token);
      if (READS_EVERY_KEY.has(token)) readsEveryKey = true;
    }
  };
  const root = replyFields(reply);
  scan(root);
  const selectors = root.get('selectors');
  if (Array.isArray(selectors)) for (const s of selectors) scan(replyFields(s));
  return { readsEveryKey, described };
}

const READS_EVERY_KEY = new Set(['~*', '%R~*', '%RW~*', '%WR~*']);

/**
 * Whether `next` starts the change feeds, so that their user is checked first: at start (`current`
 * null) in double-write or read-new, and when a reload or `PROXY MIGRATION PHASE` moves into
 * double-write from no migration or another phase.
 */
export function startsChangeFeeds(current: Placement | null, next: Placement): boolean {
  if (!next.converges) return false;
  if (current === null || current.to === null) return true;
  return next.phase === 'double-write' && current.phase !== 'double-write';
}

/** At start: throws with the reason when the change feeds' user cannot read every key of side A. */
export async function checkFeedPermissionsAtStart(pool: BackendPool, placement: Placement, timeoutMs: number): Promise<void> {
  if (!startsChangeFeeds(null, placement)) return;
  const problem = await feedPermissionProblem(pool, placement, timeoutMs, 'pass');
  if (problem !== null) throw new Error(`migration.phase ${placement.phase ?? ''} refused: ${problem}`);
}
