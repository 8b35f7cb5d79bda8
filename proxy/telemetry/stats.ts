import { LatencyHistogram } from './latency-histogram';

/**
 * Counters about the proxy itself, for INFO's proxy section and /metrics. The hot path only
 * increments plain fields; metrics.ts reads them when Prometheus scrapes.
 */
export class ProxyStats {
  readonly startedAt = Date.now();
  connectedClients = 0;
  totalConnections = 0;
  rejectedConnections = 0;
  /** Client connections ended by the client (EOF), and ended by a socket error (nutcracker's client_eof, client_err). */
  clientEof = 0;
  clientErr = 0;
  commands = 0;
  protocolErrors = 0;
  crossSlotErrors = 0;
  /** Requests split per shard under `crossSlot: split`. */
  splitCommands = 0;
  moved = 0;
  ask = 0;
  retries = 0;
  backendErrors = 0;
  /** AUTH / HELLO AUTH with a wrong user or password. */
  authFailures = 0;
  /** Commands refused with NOAUTH (sent before AUTH). */
  noauthErrors = 0;
  /** Requests refused by a user's permissions (NOPERM), by what was refused: the command, a key, a channel. */
  readonly aclDenied = { command: 0, key: 0, channel: 0 };
  /** Client connections whose TLS handshake failed. */
  tlsHandshakeErrors = 0;
  /** Error replies to forwarded commands: the nodes' (WRONGTYPE, OOM ...) and the proxy's (node lost, timeout). */
  replyErrors = 0;
  /** Clients waiting for a WAIT's reply (INFO's blocked_clients counts them with the blocked ones). */
  waitingClients = 0;
  /**
   * During a migration: requests refused (CROSSSLOT) only because side B's rules refuse them (their
   * keys share a node or slot of side A but not of B), by command: what B alone would refuse.
   */
  readonly targetRefusals = new Map<string, number>();
  /** Latency of commands forwarded to a node. */
  readonly latency = new LatencyHistogram();

  /** CONFIG RESETSTAT: every counter back to 0, as Redis resets its own; gauges (clients now, waiting now) stay. */
  resetCounters(): void {
    this.totalConnections = 0;
    this.rejectedConnections = 0;
    this.clientEof = 0;
    this.clientErr = 0;
    this.commands = 0;
    this.protocolErrors = 0;
    this.crossSlotErrors = 0;
    this.splitCommands = 0;
    this.moved = 0;
    this.ask = 0;
    this.retries = 0;
    this.backendErrors = 0;
    this.authFailures = 0;
    this.noauthErrors = 0;
    this.aclDenied.command = 0;
    this.aclDenied.key = 0;
    this.aclDenied.channel = 0;
    this.tlsHandshakeErrors = 0;
    this.replyErrors = 0;
    this.targetRefusals.clear();
    this.latency.reset();
  }
}
