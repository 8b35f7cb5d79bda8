// A minimal RESP client: one TCP connection per command, enough for PING, INFO and
// CLUSTER * without spawning redis-cli on every poll, plus the INFO text parser.

import net from 'node:net';
import RedisParser from 'redis-parser';
import { LOOPBACK } from './ports';

export type RespReply = string | number | null | RespReply[];

/** An error reply (-ERR ..., -MOVED ..., -LOADING ...) from redis. */
export class RedisReplyError extends Error {
  override name = 'RedisReplyError';
}

function toReply(value: unknown): RespReply {
  if (value === null) return null;
  if (typeof value === 'string' || typeof value === 'number') return value;
  if (Array.isArray(value)) return value.map(toReply);
  if (value instanceof Error) throw new RedisReplyError(value.message);
  throw new Error(`unexpected RESP value of type ${typeof value}`);
}

function encodeCommand(args: readonly (string | number)[]): Buffer {
  const parts: string[] = [`*${args.length}\r\n`];
  for (const arg of args) {
    const s = String(arg);
    parts.push(`$${Buffer.byteLength(s)}\r\n${s}\r\n`);
  }
  return Buffer.from(parts.join(''));
}

export interface SendCommandOptions {
  host?: string;
  timeoutMs?: number;
}

/** Sends one command over a fresh TCP connection and resolves its reply. */
export function sendCommand(
  port: number,
  args: readonly (string | number)[],
  opts: SendCommandOptions = {},
): Promise<RespReply> {
  const host = opts.host ?? LOOPBACK;
  const timeoutMs = opts.timeoutMs ?? 5_000;
  return new Promise((resolve, reject) => {
    let settled = false;
    const socket = net.connect({ host, port });
    const finish = (err: Error | null, reply: RespReply = null): void => {
      if (settled) return;
      settled = true;
      socket.destroy();
      if (err !== null) reject(err);
      else resolve(reply);
    };
    const parser = new RedisParser({
      returnReply: (reply: unknown) => {
        try {
          finish(null, toReply(reply));
        } catch (err) {
          finish(err instanceof Error ? err : new Error(String(err)));
        }
      },
      returnError: (err: Error) => finish(new RedisReplyError(err.message)),
      returnFatalError: (err: Error) => finish(err),
    });
    const what = `${host}:${port} ${String(args[0] ?? '')}`;
    socket.setTimeout(timeoutMs, () => finish(new Error(`${what}: no reply within ${timeoutMs}ms`)));
    socket.once('connect', () => socket.write(encodeCommand(args)));
    socket.on('data', (chunk: Buffer) => parser.execute(chunk));
    socket.once('error', (err) => finish(err));
    socket.once('close', () => finish(new Error(`${what}: connection closed before a reply`)));
  });
}

/** Parses INFO output ("key:value" lines) into a map. */
export function parseInfo(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    if (line === '' || line.startsWith('#')) continue;
    const i = line.indexOf(':');
    if (i > 0) out.set(line.slice(0, i), line.slice(i + 1));
  }
  return out;
}
