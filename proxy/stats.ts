/** Counters about the proxy itself, for INFO's proxy section (and later /metrics). */
export class ProxyStats {
  readonly startedAt = Date.now();
  connectedClients = 0;
  totalConnections = 0;
  rejectedConnections = 0;
  commands = 0;
  protocolErrors = 0;
  crossSlotErrors = 0;
  moved = 0;
  ask = 0;
  retries = 0;
  backendErrors = 0;
}
