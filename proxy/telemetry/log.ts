/**
 * Structured JSON logs (pino) on stderr, so stdout stays for what commands print.
 * Never log a request's arguments or a password: they are user data and secrets.
 */
import pino from 'pino';

export const log = pino({ base: { name: 'slotproxy' }, level: process.env.SLOTPROXY_LOG_LEVEL ?? 'info' }, pino.destination(2));

export function setLogLevel(level: string): void {
  log.level = level;
}
