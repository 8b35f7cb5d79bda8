// Runs a value's program (rdb-values.ts) over the bytes the reader holds: step by step, stopping
// between two steps when the bytes run out and going on from that step at the next call, so a
// value of any size is read once. Its state is the step, the open loops and the offset reached.

import { BAD, Scan, reach, readCount, skipLength, skipString, skipTextDouble } from './rdb-lengths';
import { BYTES, END, LEN, LOOP, MODULE_FIELDS, STR, TEXT_DOUBLE } from './rdb-values';

/** The program ran to its end. */
export const DONE = 0;

/** Deepest loop nesting of any program (a stream: groups, consumers, their PELs). */
const MAX_LOOP_DEPTH = 4;

export class ValueSkipper {
  private program: readonly number[] = [];
  private pc = 0;
  private depth = 0;
  private readonly loopBody: number[] = new Array<number>(MAX_LOOP_DEPTH).fill(0);
  private readonly loopLeft: number[] = new Array<number>(MAX_LOOP_DEPTH).fill(0);
  private moduleFieldsEnded = false;
  /** How far the run got, as an offset from the start of the record it reads. */
  progress = 0;

  /** Starts `program` at `progress` bytes into the record. */
  start(program: readonly number[], progress: number): void {
    this.program = program;
    this.pc = 0;
    this.depth = 0;
    this.progress = progress;
  }

  /**
   * Runs on over buf (the record starting at `recordStart`, the bytes ending at `end`). Answers
   * DONE (progress is the value's end), NEED (scan.need says how far the bytes must reach) or BAD
   * (scan.error says why; progress is where).
   */
  run(buf: Buffer, recordStart: number, end: number, scan: Scan): number {
    const program = this.program;
    let p = recordStart + this.progress;
    let pc = this.pc;
    let next = 0;
    while (pc < program.length) {
      switch (program[pc]) {
        case STR:
          next = skipString(buf, p, end, scan);
          break;
        case LEN:
          next = skipLength(buf, p, end, scan);
          break;
        case TEXT_DOUBLE:
          next = skipTextDouble(buf, p, end, scan);
          break;
        case BYTES:
          next = reach(p + program[pc + 1], end, scan);
          break;
        case LOOP:
          next = readCount(buf, p, end, scan);
          break;
        case END:
          next = p;
          break;
        case MODULE_FIELDS:
          next = this.skipModuleField(buf, p, end, scan);
          break;
        default:
          scan.error = `bad value program step ${program[pc]}`;
          next = BAD;
      }
      if (next < 0) {
        this.pc = pc;
        this.progress = p - recordStart;
        return next;
      }
      p = next;
      pc = this.advance(pc, scan.value);
    }
    this.pc = pc;
    this.progress = p - recordStart;
    return DONE;
  }

  /** The step after the one at pc, which has just been read (`count`: what a LOOP read). */
  private advance(pc: number, count: number): number {
    const program = this.program;
    switch (program[pc]) {
      case BYTES:
        return pc + 2;
      case LOOP:
        if (count === 0) return program[pc + 1];
        this.loopBody[this.depth] = pc + 2;
        this.loopLeft[this.depth] = count;
        this.depth++;
        return pc + 2;
      case END:
        if (--this.loopLeft[this.depth - 1] > 0) return this.loopBody[this.depth - 1];
        this.depth--;
        return pc + 1;
      case MODULE_FIELDS:
        return this.moduleFieldsEnded ? pc + 1 : pc;
      default:
        return pc + 1;
    }
  }

  /** One annotated module field (its opcode, then its value), or the EOF opcode that ends them. */
  private skipModuleField(buf: Buffer, p: number, end: number, scan: Scan): number {
    const afterOpcode = readCount(buf, p, end, scan);
    if (afterOpcode < 0) return afterOpcode;
    this.moduleFieldsEnded = scan.value === 0;
    switch (scan.value) {
      case 0: // EOF
        return afterOpcode;
      case 1: // signed integer
      case 2: // unsigned integer
        return skipLength(buf, afterOpcode, end, scan);
      case 3: // float
        return reach(afterOpcode + 4, end, scan);
      case 4: // double
        return reach(afterOpcode + 8, end, scan);
      case 5: // string
        return skipString(buf, afterOpcode, end, scan);
      default:
        scan.error = `unknown module value opcode ${scan.value}`;
        return BAD;
    }
  }
}
