/**
 * What one back-end node saw, counted as nutcracker counts its server stats (`nutcracker -D`):
 * plain integers, incremented by the node's connections (connection.ts) on paths they take anyway,
 * read when the stats JSON is built (telemetry/nutcracker-stats.ts).
 * - requests / request_bytes: client requests written for this node (a split command's part is one
 *   request, as nutcracker's fragment is); the proxy's own requests (handshake, topology, fleet
 *   registration) are left out, as nutcracker has none.
 * - responses / response_bytes: their replies.
 */
export class NodeCounters {
  requests = 0;
  requestBytes = 0;
  responses = 0;
  responseBytes = 0;
  /** Connections closed by the node (EOF), failed with a socket error, and failed on a timeout. */
  eof = 0;
  err = 0;
  timedOut = 0;
  /** Times the ring ejected the node (auto_eject_hosts; the pool's server_ejects is their sum). */
  ejects = 0;
  /** When the ring last ejected the node, in microseconds since the epoch (0: never). */
  ejectedAtUs = 0;
}
