/**
 * ACL LOG: the proxy's refusals (failed AUTH, and commands, keys and channels a user's rules
 * refused), kept as Redis 7.0 keeps them (ACLAddLogEntry): newest first, at most 128 entries
 * (Redis's acllog-max-len default), and an entry like one of the 10 newest, within 60 seconds,
 * counted into it rather than added. Redis 7.2 added each entry's id (counted from the start,
 * RESET or not) and when it was created and last counted. Nothing here runs unless something is refused.
 */
import * as encode from '../resp/encode';

export type AclLogReason = 'auth' | 'command' | 'key' | 'channel';

interface Entry {
  count: number;
  readonly reason: AclLogReason;
  readonly context: 'toplevel' | 'multi';
  readonly object: string;
  readonly username: string;
  /** When it last happened (ms). */
  createdMs: number;
  /** 7.2's entry-id and timestamp-created (ms). */
  readonly id: number;
  readonly firstMs: number;
  /** The client's CLIENT LIST line then. */
  clientInfo: string;
}

const MAX_ENTRIES = 128;
const GROUPING_MS = 60_000;
const SCANNED = 10;

export class AclLog {
  private entries: Entry[] = [];
  private added = 0;

  add(reason: AclLogReason, context: 'toplevel' | 'multi', object: string, username: string, clientInfo: string): void {
    const now = Date.now();
    for (let i = 0; i < Math.min(SCANNED, this.entries.length); i++) {
      const e = this.entries[i];
      if (e.reason === reason && e.context === context && e.object === object && e.username === username && now - e.createdMs <= GROUPING_MS) {
        e.count++;
        e.createdMs = now;
        e.clientInfo = clientInfo;
        this.entries.splice(i, 1);
        this.entries.unshift(e);
        return;
      }
    }
    this.entries.unshift({ count: 1, reason, context, object, username, createdMs: now, clientInfo, id: this.added++, firstMs: now });
    if (this.entries.length > MAX_ENTRIES) this.entries.length = MAX_ENTRIES;
  }

  reset(): void {
    this.entries = [];
  }

  /** ACL LOG's reply: the `count` newest entries (all: null), each with Redis 7.0's seven fields, or 7.2's ten (`as72`). */
  reply(count: number | null, protocol: 2 | 3, as72 = false): Buffer {
    const now = Date.now();
    const shown = count === null ? this.entries : this.entries.slice(0, count);
    const frames = shown.map((e) => {
      const fields = [
        encode.bulk('count'), encode.integer(e.count),
        encode.bulk('reason'), encode.bulk(e.reason),
        encode.bulk('context'), encode.bulk(e.context),
        encode.bulk('object'), encode.bulk(e.object),
        encode.bulk('username'), encode.bulk(e.username),
        encode.bulk('age-seconds'), encode.double((now - e.createdMs) / 1000, protocol),
        encode.bulk('client-info'), encode.bulk(e.clientInfo),
      ];
      if (as72) {
        fields.push(
          encode.bulk('entry-id'), encode.integer(e.id),
          encode.bulk('timestamp-created'), encode.integer(e.firstMs),
          encode.bulk('timestamp-last-updated'), encode.integer(e.createdMs),
        );
      }
      return protocol === 3 ? encode.mapOfFrames(fields) : encode.arrayOfFrames(fields);
    });
    return encode.arrayOfFrames(frames);
  }
}
