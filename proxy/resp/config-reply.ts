/**
 * CONFIG GET replies whose value the proxy answers itself for some parameters (tracking-table-max-keys,
 * requirepass): a node's reply with one value replaced, everything else as the node wrote it.
 */

/**
 * A node's CONFIG GET reply (a RESP2 array or RESP3 map of bulk strings) with the value of `param`
 * replaced by `value`; the frame itself when it does not list it (the pattern did not match it).
 */
export function withConfigValue(frame: Buffer, param: string, value: string): Buffer {
  if (frame[0] !== 42 /* * */ && frame[0] !== 37 /* % */) return frame;
  const name = Buffer.from(`$${param.length}\r\n${param}\r\n`);
  let at = frame.indexOf(13) + 2;
  let isName = true;
  while (at < frame.length && frame[at] === 36 /* $ */) {
    const end = bulkEnd(frame, at);
    if (isName && frame.subarray(at, end).equals(name)) {
      const valueEnd = bulkEnd(frame, end);
      const bytes = Buffer.byteLength(value);
      return Buffer.concat([frame.subarray(0, end), Buffer.from(`$${bytes}\r\n${value}\r\n`), frame.subarray(valueEnd)]);
    }
    isName = !isName;
    at = end;
  }
  return frame;
}

/** Where the bulk string starting at `at` ends. */
function bulkEnd(frame: Buffer, at: number): number {
  const lineEnd = frame.indexOf(13, at);
  return lineEnd + 2 + Number(frame.toString('latin1', at + 1, lineEnd)) + 2;
}
