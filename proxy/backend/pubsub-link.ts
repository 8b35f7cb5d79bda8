/**
 * One connection to one node in subscribed mode. Unlike a BackendConnection, replies do not pair
 * with requests: a subscribed connection receives messages whenever they are published, and one
 * SUBSCRIBE of n channels answers with n frames. So every frame after the handshake goes to
 * `onFrame`, in arrival order, and the owner (dispatch/pubsub.ts) makes sense of it.
 *
 * Writes made before the connection is ready are buffered and sent, in order, once it is.
 */
import net from 'node:net';
import { ConnectionOptions, splitAddress } from './connection';
import { ReplyFramer } from '../resp/reply-framer';
import { backendSocket } from '../security/tls';
import { inBatch } from '../client/reply-flusher';
import { connectTimeoutText, socketErrorText } from './socket-error';

export class PubSubLink {
  private readonly socket: net.Socket;
  private readonly framer = new ReplyFramer();
  private pendingWrites: Buffer[] | null = [];
  private handshakeReplies: number;
  private closed = false;
  private connectTimer: NodeJS.Timeout | null;

  constructor(
    readonly address: string,
    options: ConnectionOptions,
    private readonly onFrame: (frame: Buffer) => void,
    private readonly onClose: (reason: string) => void,
  ) {
    const [host, port] = splitAddress(address);
    const opened = backendSocket(host, options.tls, (chunk) => this.onData(chunk));
    this.socket = opened.socket;
    this.socket.setNoDelay(true);
    this.socket.setKeepAlive(true, 10_000);
    this.handshakeReplies = options.handshake.length;
    this.socket.on('error', (err: Error) => this.fail(socketErrorText(err)));
    this.socket.on('close', () => this.fail('connection closed'));
    this.connectTimer = setTimeout(() => this.fail(connectTimeoutText(options.connectTimeoutMs)), options.connectTimeoutMs);
    opened.connect(port, host, () => {
      if (this.connectTimer !== null) clearTimeout(this.connectTimer);
      this.connectTimer = null;
      if (this.closed) return;
      const first = [...options.handshake, ...(this.pendingWrites ?? [])];
      this.pendingWrites = null;
      if (first.length > 0) this.socket.write(Buffer.concat(first));
    });
  }

  get isClosed(): boolean {
    return this.closed;
  }

  write(payload: Buffer): void {
    if (this.closed) return;
    if (this.pendingWrites !== null) this.pendingWrites.push(payload);
    else this.socket.write(payload);
  }

  close(): void {
    this.closed = true;
    if (this.connectTimer !== null) clearTimeout(this.connectTimer);
    this.socket.destroy();
  }

  private readonly frame = (chunk: Buffer): void => this.framer.push(chunk, this.deliver);

  private readonly deliver = (frame: Buffer): void => {
    if (this.handshakeReplies > 0) {
      this.handshakeReplies--;
      if (frame[0] === 45) this.fail(`handshake refused: ${frame.toString('utf8', 1, frame.length - 2)}`);
      return;
    }
    if (!this.closed) this.onFrame(frame);
  };

  private onData(chunk: Buffer): void {
    try {
      inBatch(this.frame, chunk);
    } catch (err) {
      this.fail((err as Error).message);
    }
  }

  private fail(reason: string): void {
    if (this.closed) return;
    this.close();
    this.onClose(reason);
  }
}
