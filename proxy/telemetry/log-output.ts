/**
 * Where log lines go: stderr (human-readable lines on a terminal, pino-pretty; JSON lines
 * otherwise; SLOTPROXY_LOG_FORMAT=json|pretty overrides the choice), or a file (`log.file`, nutcracker's
 * `-o`), always JSON lines, appended.
 *
 * The logger writes to one LogOutput for its whole life; `to(file)` swaps what is behind it. That
 * is also how a file is reopened after logrotate renamed it: a new stream is opened under the name
 * (synchronously, so a file that cannot be opened throws and nothing changes), then the old one is
 * flushed and closed. File writes are synchronous: a line is on disk when the call returns, and a
 * reopen never splits a line between two files.
 */
import fs from 'node:fs';
import pino from 'pino';

type Target = pino.DestinationStream & { flush?: (cb?: (err?: Error) => unknown) => void };
type FileStream = ReturnType<typeof pino.destination>;

function stderrTarget(): Target {
  const format = process.env.SLOTPROXY_LOG_FORMAT ?? (process.stderr.isTTY === true ? 'pretty' : 'json');
  if (format === 'pretty') {
    // Loaded only for a terminal: a proxy logging JSON does not carry it in memory.
    const pretty = require('pino-pretty') as typeof import('pino-pretty');
    return pretty({ destination: 2, sync: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' });
  }
  return pino.destination(2);
}

function openFile(file: string): FileStream {
  const stream = pino.destination({ dest: file, sync: true, append: true });
  let reported = false;
  // A write that fails (disk full, the file's disk gone) must not crash the proxy: say so once on stderr.
  stream.on('error', (err: Error) => {
    if (reported) return;
    reported = true;
    process.stderr.write(`slotproxy: cannot write the log file ${file}: ${err.message}\n`);
  });
  return stream;
}

export class LogOutput implements pino.DestinationStream {
  private stderr: Target | null = null;
  private target: Target;
  private stream: FileStream | null = null;
  private path: string | null = null;

  constructor() {
    this.target = this.stderrStream();
  }

  /** The file logs go to; null: stderr. */
  get file(): string | null {
    return this.path;
  }

  /**
   * Logs go to `file` from now on (opened anew even when it is the current one: a reopen), or to
   * stderr for null. Throws, changing nothing, when the file cannot be opened.
   */
  to(file: string | null): void {
    const next = file === null ? null : openFile(file);
    const previous = this.stream;
    this.stream = next;
    this.path = file;
    this.target = next ?? this.stderrStream();
    previous?.end();
  }

  write(line: string): void {
    this.target.write(line);
  }

  /**
   * `line` written before this returns: to the file (whose writes are synchronous), or straight to
   * fd 2, not through stderr's asynchronous stream, whose queued lines may still come after it.
   */
  writeNow(line: string): void {
    if (this.stream !== null) this.stream.write(line);
    else fs.writeSync(2, line);
  }

  flush(cb?: (err?: Error) => unknown): void {
    if (this.target.flush !== undefined) this.target.flush(cb);
    else cb?.();
  }

  private stderrStream(): Target {
    this.stderr ??= stderrTarget();
    return this.stderr;
  }
}
