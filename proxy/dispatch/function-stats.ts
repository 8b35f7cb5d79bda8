/**
 * FUNCTION STATS through the proxy: asked of every master (in the client's protocol) and merged into
 * one server's reply. A script runs on one master at a time at most as on one server:
 * - `running_script` is the running function of whichever master runs one, nil when none does;
 * - a master busy with an EVAL refuses FUNCTION STATS with BUSY, as one Redis does then: that error
 *   is the reply (so is any other master's error);
 * - `engines` counts each engine's libraries and functions as one server's: the largest master's,
 *   not a sum, for the reason info.ts gives for INFO's number_of_libraries (FUNCTION_COUNTS).
 */
import { arrayElements } from '../resp/reply-framer';
import * as encode from '../resp/encode';
import { Merge } from './fanout';

const NULLS = new Set(['$-1\r\n', '*-1\r\n', '_\r\n']);

export const functionStatsMerge: Merge = (frames) => {
  const err = frames.find((f) => f[0] === 45);
  if (err !== undefined) return err;
  const replies = frames.map(fields);
  const resp3 = frames[0][0] === 37; // '%': a RESP3 map
  const running = replies.map((r) => r.get('running_script')).find((f) => f !== undefined && !NULLS.has(f.toString('latin1')));
  const engines = replies.map((r) => (r.has('engines') ? fields(r.get('engines') as Buffer) : new Map<string, Buffer>()));
  const merged = [...engines[0].keys()].map((engine) => {
    const counts = engines.map((e) => (e.has(engine) ? fields(e.get(engine) as Buffer) : new Map<string, Buffer>()));
    const stats = [...counts[0].keys()].flatMap((name) => [encode.bulk(name), encode.integer(Math.max(...counts.map((c) => integerOf(c.get(name)))))]);
    return [encode.bulk(engine), container(resp3, stats)];
  });
  return container(resp3, [
    encode.bulk('running_script'),
    running === undefined ? (resp3 ? encode.RESP3_NULL : encode.NULL_BULK) : inProtocol(running, resp3),
    encode.bulk('engines'),
    container(resp3, merged.flat()),
  ]);
};

/** A map reply (RESP3 `%`, or RESP2's flat array of pairs) as name -> value frame. */
function fields(frame: Buffer): Map<string, Buffer> {
  const elements = arrayElements(frame[0] === 37 ? asArray(frame) : frame) ?? [];
  const out = new Map<string, Buffer>();
  for (let i = 0; i + 1 < elements.length; i += 2) out.set(bulkText(elements[i]), elements[i + 1]);
  return out;
}

/** A RESP3 map frame with an array's header of as many elements (2 per pair). */
function asArray(map: Buffer): Buffer {
  const cr = map.indexOf(13);
  return Buffer.concat([Buffer.from(`*${2 * Number(map.toString('latin1', 1, cr))}`), map.subarray(cr)]);
}

/** A map frame of name/value pairs in the client's protocol. */
function container(resp3: boolean, pairs: Buffer[]): Buffer {
  return resp3 ? encode.mapOfFrames(pairs) : encode.arrayOfFrames(pairs);
}

/** A map element from a master that answered in the other protocol (inside MULTI) made the client's. */
function inProtocol(frame: Buffer, resp3: boolean): Buffer {
  if (resp3 && frame[0] === 42) return container(true, arrayElements(frame) ?? []);
  if (!resp3 && frame[0] === 37) return container(false, arrayElements(asArray(frame)) ?? []);
  return frame;
}

function bulkText(frame: Buffer): string {
  if (frame[0] !== 36) return frame.toString('latin1', 1, frame.length - 2); // +simple
  return frame.toString('latin1', frame.indexOf(10) + 1, frame.length - 2);
}

function integerOf(frame: Buffer | undefined): number {
  return frame === undefined || frame[0] !== 58 ? 0 : Number(frame.toString('latin1', 1, frame.length - 2));
}
