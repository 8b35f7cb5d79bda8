/**
 * Logs (pino) on stderr, so stdout stays for what commands print: human-readable lines when stderr
 * is a terminal (pino-pretty), one JSON object per line otherwise, for log collectors.
 * SLOTPROXY_LOG_FORMAT=json|pretty overrides the choice. Never log a request's arguments or a
 * password: they are user data and secrets.
 */
import pino from 'pino';

function destination(): pino.DestinationStream {
  const format = process.env.SLOTPROXY_LOG_FORMAT ?? (process.stderr.isTTY === true ? 'pretty' : 'json');
  if (format === 'pretty') {
    // Loaded only for a terminal: a proxy logging JSON does not carry it in memory.
    const pretty = require('pino-pretty') as typeof import('pino-pretty');
    return pretty({ destination: 2, sync: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' });
  }
  return pino.destination(2);
}

export const log = pino({ base: { name: 'slotproxy' }, level: process.env.SLOTPROXY_LOG_LEVEL ?? 'info' }, destination());

export function setLogLevel(level: string): void {
  log.level = level;
}
