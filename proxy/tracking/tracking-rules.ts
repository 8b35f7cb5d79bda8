/** Small rules of client tracking that client-caching.ts applies per command. */
import { CommandInfo } from '../commands/table';
import { keyPositions } from '../commands/keys';
import { ClientTracking } from './tracking-state';

export /** Whether the command names keys (a command the proxy answers itself runs nothing on a node that could evict). */
function hasKeys(info: CommandInfo, args: Buffer[]): boolean {
  const positions = keyPositions(info, args);
  return positions !== null && positions.length > 0;
}

/**
 * Whether the client's own changes reach it on its own connection right after the reply that made
 * them: RESP3, no REDIRECT, default mode (BCAST pushes come once the event loop turn ends), and not
 * NOLOOP (which hides them).
 */
export function holdsOwnPushes(protocol: number, tracking: ClientTracking): boolean {
  return protocol === 3 && tracking.redirect === 0 && !tracking.bcast && !tracking.noloop;
}
