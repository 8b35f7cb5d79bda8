/**
 * EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, FCALL, FCALL_RO: checked and forwarded like any keyed command
 * (their keys come from `numkeys`), plus what makes the proxy's script cache look global:
 * - an EVAL's body is remembered (it may come back as EVALSHA);
 * - a NOSCRIPT for a SHA whose body the proxy knows is healed: SCRIPT LOAD on the same connection,
 *   immediately followed by the same EVALSHA, so nothing can run between them on that lane.
 *   Healed once per request: a second NOSCRIPT (a flush racing the heal) goes to the client.
 */
import { ForwardedCommand } from './forward';
import { ProxyContext } from '../context';
import { ReplyOwner } from '../client/reply-slot';
import { BackendRequest } from '../backend/connection';
import * as encode from '../resp/encode';
import * as errors from '../resp/errors';
import { ScriptStore } from '../scripts/store';
import { Merge } from './fanout';

export type ScriptCallKind = 'eval' | 'evalsha' | 'fcall';

export const SCRIPT_CALLS: ReadonlyMap<string, ScriptCallKind> = new Map<string, ScriptCallKind>([
  ['eval', 'eval'],
  ['eval_ro', 'eval'],
  ['evalsha', 'evalsha'],
  ['evalsha_ro', 'evalsha'],
  ['fcall', 'fcall'],
  ['fcall_ro', 'fcall'],
]);

/**
 * Redis's own reply to a bad `numkeys` of EVAL/EVALSHA (checked before the script is looked up),
 * or null when it is fine. FCALL looks its function up first, so its errors are left to the node.
 */
export function numkeysError(args: readonly Buffer[]): string | null {
  const text = args[2].toString('latin1');
  if (!DECIMAL.test(text)) return errors.NOT_INTEGER;
  // Redis reads it as a long long: beyond 64 bits it is "not an integer", within it is compared.
  const n = BigInt(text);
  if (n > INT64_MAX || n < INT64_MIN) return errors.NOT_INTEGER;
  if (n > BigInt(args.length - 3)) return errors.NUMKEYS_TOO_MANY;
  if (n < 0n) return errors.NUMKEYS_NEGATIVE;
  return null;
}

/** What Redis's string2ll accepts: no sign on 0, no leading zeros, no spaces. */
const DECIMAL = /^(0|-?[1-9][0-9]{0,19})$/;
const INT64_MAX = (1n << 63n) - 1n;
const INT64_MIN = -(1n << 63n);

const NOSCRIPT_PREFIX = '-NOSCRIPT';

export function isNoScript(frame: Buffer): boolean {
  return frame[0] === 45 && frame.length > 9 && frame.toString('latin1', 0, 9) === NOSCRIPT_PREFIX;
}

/** A request whose reply is only checked: SCRIPT LOAD sent by the proxy ahead of a command. */
export function scriptLoadRequest(body: Buffer, onError: (frame: Buffer | string) => void = () => undefined): BackendRequest {
  return {
    payload: encode.command(['SCRIPT', 'LOAD', body]),
    onReply: (frame) => {
      if (frame[0] === 45) onError(frame);
    },
    onFailure: (message) => onError(message),
  };
}

/** An EVALSHA/EVALSHA_RO whose NOSCRIPT is healed when the proxy knows the script. */
export class EvalShaCommand extends ForwardedCommand {
  private healed = false;

  constructor(ctx: ProxyContext, owner: ReplyOwner, payload: Buffer, shard: number, retrySafe: boolean, private readonly sha: Buffer) {
    super(ctx, owner, payload, shard, retrySafe);
  }

  override onReply(frame: Buffer): void {
    if (!this.healed && isNoScript(frame)) {
      const body = this.ctx.scripts.get(this.sha);
      if (body !== undefined) {
        this.healed = true;
        this.ctx.scripts.healed++;
        const conn = this.ctx.pool.connection(this.address, this.owner.id);
        // Adjacent on one connection: the EVALSHA runs right after its script was loaded.
        conn.send(scriptLoadRequest(body));
        conn.send(this);
        return;
      }
    }
    super.onReply(frame);
  }
}

const COMPILE_ERROR = '-ERR Error compiling script';

/** An EVAL whose body the store learnt from it: forgotten again if it does not compile, as Redis keeps no such script. */
class EvalCommand extends ForwardedCommand {
  constructor(ctx: ProxyContext, owner: ReplyOwner, payload: Buffer, shard: number, retrySafe: boolean, private readonly learnt: string) {
    super(ctx, owner, payload, shard, retrySafe);
  }

  override complete(frame: Buffer): void {
    if (frame[0] === 45 && frame.toString('latin1', 0, COMPILE_ERROR.length) === COMPILE_ERROR) this.ctx.scripts.forget(this.learnt);
    super.complete(frame);
  }
}

/** The reply slot for a script call: EVAL bodies are remembered, EVALSHA gets NOSCRIPT healing. */
export function scriptCall(
  ctx: ProxyContext,
  owner: ReplyOwner,
  kind: ScriptCallKind,
  args: readonly Buffer[],
  payload: Buffer,
  shard: number,
  retrySafe: boolean,
): ForwardedCommand {
  if (kind === 'evalsha') return new EvalShaCommand(ctx, owner, payload, shard, retrySafe, args[1]);
  const learnt = kind === 'eval' ? ctx.scripts.learn(args[1]) : null;
  if (learnt !== null) return new EvalCommand(ctx, owner, payload, shard, retrySafe, learnt);
  return new ForwardedCommand(ctx, owner, payload, shard, retrySafe);
}

/**
 * SCRIPT EXISTS sha...: per SHA, whether the proxy holds its body. Those count as existing: to the
 * client there is one script cache, and the proxy loads the script wherever it is missing.
 */
export function heldScripts(store: ScriptStore, args: readonly Buffer[]): boolean[] {
  return args.slice(2).map((sha) => store.has(sha));
}

/** SCRIPT LOAD teaches the store a body once every master took it; SCRIPT FLUSH makes it forget. */
export function rememberingScripts(store: ScriptStore, name: string, args: readonly Buffer[], merge: Merge): Merge {
  if (name === 'script|load') {
    return (frames) => {
      const merged = merge(frames);
      if (merged[0] !== 45) store.add(args[2]);
      return merged;
    };
  }
  if (name === 'script|flush') {
    return (frames) => {
      store.forgetUnpinned();
      return merge(frames);
    };
  }
  return merge;
}
