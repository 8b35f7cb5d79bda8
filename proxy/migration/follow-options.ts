/** What a follower of a node of side A (follow.ts) is told, and the states it reports. */
import os from 'node:os';
import type { PeerFollow } from './follow-handoff';

export type FollowState = 'connecting' | 'full-sync' | 'loading' | 'live' | 'lost' | 'stopped' | 'failed';

export interface FollowOptions {
  /** Stream bytes kept in the spool file while B is behind; once full, the link is not read until B catches up. */
  spoolBytes: number;
  /** Where snapshots and the stream's spool are written. */
  spoolDir: string;
  announcePort: number;
  /** Another node of A's follower in this proxy (a slot moving between them, follow-handoff.ts). */
  peer?: (address: string) => PeerFollow | undefined;
  /** Called before stream bytes are handled or applied (copier-lease.ts checkStall: a stalled proxy stops its follows first). */
  beforeApply?: () => void;
}
export const DEFAULT_FOLLOW_OPTIONS: FollowOptions = { spoolBytes: 1024 * 1024 * 1024, spoolDir: os.tmpdir(), announcePort: 0 };
