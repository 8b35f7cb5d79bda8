/**
 * Decodes one whole back-end reply frame into JS values, for the replies the proxy acts on
 * (topology, the command table, fan-out merges, redirections). Uses redis-parser; never used for
 * replies that are only forwarded, because decoding loses RESP types.
 */
import Parser from 'redis-parser';
import { ReplyError } from 'redis-errors';

export type Reply = Buffer | string | number | null | ReplyError | Reply[];

export function decodeReply(frame: Buffer, returnBuffers = false): Reply {
  let result: Reply | undefined;
  let fatal: Error | undefined;
  const parser = new Parser({
    returnBuffers,
    returnReply: (r: Reply) => {
      result = r;
    },
    returnError: (e: ReplyError) => {
      result = e;
    },
    returnFatalError: (e: Error) => {
      fatal = e;
    },
  });
  parser.execute(frame);
  if (fatal !== undefined) throw new Error(`undecodable back-end reply: ${fatal.message}`);
  if (result === undefined) throw new Error('undecodable back-end reply: incomplete frame');
  return result;
}

/** The text of an error frame (`-ERR ...\r\n` -> `ERR ...`), or null when the frame is not an error. */
export function errorText(frame: Buffer): string | null {
  if (frame[0] !== 45) return null;
  return frame.toString('utf8', 1, frame.length - 2);
}

export function asString(r: Reply): string {
  if (typeof r === 'string') return r;
  if (Buffer.isBuffer(r)) return r.toString();
  if (typeof r === 'number') return String(r);
  throw new Error(`expected a string in a back-end reply, got ${describe(r)}`);
}

export function asArray(r: Reply): Reply[] {
  if (Array.isArray(r)) return r;
  throw new Error(`expected an array in a back-end reply, got ${describe(r)}`);
}

/** A decoded map reply (RESP2's flat array: name, value, ...) as name -> value; empty for a reply that is no array. */
export function replyFields(r: Reply): Map<string, Reply> {
  const out = new Map<string, Reply>();
  if (!Array.isArray(r)) return out;
  for (let i = 0; i + 1 < r.length; i += 2) out.set(String(r[i]), r[i + 1]);
  return out;
}

export function asNumber(r: Reply): number {
  if (typeof r === 'number') return r;
  throw new Error(`expected an integer in a back-end reply, got ${describe(r)}`);
}

function describe(r: Reply): string {
  if (r instanceof ReplyError) return `error "${r.message}"`;
  return r === null ? 'null' : Array.isArray(r) ? 'array' : typeof r;
}

/** A nil reply: `*-1` or `$-1` in RESP2, `_` in RESP3 (a blocking command that timed out, a missing key). */
export function isNullReply(frame: Buffer): boolean {
  return (frame.length === 5 && (frame[0] === 42 || frame[0] === 36) && frame[1] === 45) || (frame.length === 3 && frame[0] === 95);
}
