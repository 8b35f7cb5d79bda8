/** A one-off request made by the proxy itself (topology, command table, fan-out), as a promise. */
import { BackendConnection } from './connection';
import { command } from '../resp/encode';

/** The proxy's own request (not in nutcracker's counts). Resolves with the raw reply frame (an error reply is a frame too); rejects when no reply came. */
export function request(conn: BackendConnection, args: readonly (Buffer | string)[], timeoutMs = 0): Promise<Buffer> {
  return requestRaw(conn, command(args), timeoutMs, String(args[0]), true);
}

/** The same for a request already encoded (a client's own bytes, sent as they are: counted for the node unless `internal`). */
export function requestRaw(
  conn: BackendConnection,
  payload: Buffer,
  timeoutMs = 0,
  what = 'the request',
  internal = false,
  /** Whose request it is (BackendRequest.owner); a converging burst open on `conn` reads it. */
  owner?: { readonly id: number },
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let timer: NodeJS.Timeout | null = null;
    if (timeoutMs > 0) {
      timer = setTimeout(() => reject(new Error(`${conn.address} did not answer ${what} within ${timeoutMs} ms`)), timeoutMs);
    }
    conn.send({
      payload,
      internal,
      owner,
      onReply: (frame) => {
        if (timer !== null) clearTimeout(timer);
        resolve(frame);
      },
      onFailure: (message) => {
        if (timer !== null) clearTimeout(timer);
        reject(new Error(message));
      },
    });
  });
}
