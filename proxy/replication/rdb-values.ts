// The layout of each RDB value type, as the steps that skip over it (redis/redis 7.4 src/rdb.c
// rdbLoadObject; src/rdb.h for the type numbers). The reader never decodes a value: it only needs
// where the value ends, so that the value's bytes can go into a DUMP payload unchanged. A layout is
// a small program the reader runs step by step and can stop between any two steps when the buffer
// runs out, so a value of any size is read in one pass, never from its start again.

/** One string, whatever its encoding (plain, integer, LZF). */
export const STR = 0;
/** One length (its value is not needed). */
export const LEN = 1;
/** A double saved as text (RDB_TYPE_ZSET). */
export const TEXT_DOUBLE = 2;
/** A fixed number of bytes, the next program cell: binary doubles, millisecond times, stream ids. */
export const BYTES = 3;
/** A length N, then the body up to the matching END N times; the next cell is where the END's successor is. */
export const LOOP = 4;
/** The end of a LOOP's body. */
export const END = 5;
/** A module value's annotated fields (src/rdb.c rdbLoadCheckModuleValue) up to its EOF opcode. */
export const MODULE_FIELDS = 6;

type Step = number | Step[];

/** Builds a program from steps, where a nested array is a LOOP's body. */
function program(...steps: Step[]): number[] {
  const out: number[] = [];
  const emit = (list: Step[]): void => {
    for (const step of list) {
      if (typeof step === 'number') {
        out.push(step);
        continue;
      }
      out.push(LOOP, 0);
      const operand = out.length - 1;
      emit(step);
      out.push(END);
      out[operand] = out.length;
    }
  };
  emit(steps);
  return out;
}

const bytes = (n: number): number[] => [BYTES, n];
const loop = (...body: Step[]): Step[] => body;

const MS = bytes(8);
const BINARY_DOUBLE = bytes(8);
const STREAM_ID = bytes(16);

const STRING = program(STR);
const ELEMENTS = program(loop(STR));
const ZSET_TEXT = program(loop(STR, TEXT_DOUBLE));
const ZSET_BINARY = program(loop(STR, ...BINARY_DOUBLE));
const HASH_PAIRS = program(loop(STR, STR));
const QUICKLIST_2 = program(loop(LEN, STR));
const HASH_TTL_TRIPLES = program(loop(LEN, STR, STR));
const HASH_MIN_EXPIRE_TRIPLES = program(...MS, loop(LEN, STR, STR));
const HASH_MIN_EXPIRE_LISTPACK = program(...MS, STR);

/** A stream's layout: listpacks, metadata, consumer groups; what each version adds is marked. */
function streamProgram(version: 1 | 2 | 3): number[] {
  const metadata = version >= 2 ? [LEN, LEN, LEN, LEN, LEN, LEN, LEN, LEN] : [LEN, LEN, LEN]; // length, last id; first id, max deleted id, entries added
  const groupHead = version >= 2 ? [STR, LEN, LEN, LEN] : [STR, LEN, LEN]; // name, last delivered id; its offset
  const consumerHead = version >= 3 ? [STR, ...MS, ...MS] : [STR, ...MS]; // name, seen time; active time
  return program(
    loop(STR, STR), // master id, listpack
    ...metadata,
    loop(
      ...groupHead,
      loop(...STREAM_ID, ...MS, LEN), // the group's PEL: id, delivery time, delivery count
      loop(...consumerHead, loop(...STREAM_ID)), // consumers and their PELs (ids only)
    ),
  );
}

/** The module-aux opcode's payload: module id, when-opcode, when, then the annotated fields. */
export const MODULE_AUX_PROGRAM = program(LEN, LEN, LEN, MODULE_FIELDS);

export const RDB_TYPE_MODULE_PRE_GA = 6;
export const RDB_TYPE_MODULE_2 = 7;

/** What each value type is, for messages. */
export const TYPE_NAMES: ReadonlyMap<number, string> = new Map([
  [0, 'string'],
  [1, 'list'],
  [2, 'set'],
  [3, 'zset'],
  [4, 'hash'],
  [5, 'zset 2'],
  [6, 'module, pre-GA'],
  [7, 'module'],
  [9, 'hash zipmap'],
  [10, 'list ziplist'],
  [11, 'set intset'],
  [12, 'zset ziplist'],
  [13, 'hash ziplist'],
  [14, 'list quicklist'],
  [15, 'stream listpacks'],
  [16, 'hash listpack'],
  [17, 'zset listpack'],
  [18, 'list quicklist 2'],
  [19, 'stream listpacks 2'],
  [20, 'set listpack'],
  [21, 'stream listpacks 3'],
  [22, 'hash metadata, pre-GA'],
  [23, 'hash listpack-ex, pre-GA'],
  [24, 'hash metadata'],
  [25, 'hash listpack-ex'],
]);

/** The program of every value type the reader can carry, by type byte (module types are not here). */
export const VALUE_PROGRAMS: ReadonlyArray<readonly number[] | undefined> = (() => {
  const table: (number[] | undefined)[] = [];
  table[0] = STRING;
  table[1] = ELEMENTS; // list of strings (before 3.2)
  table[2] = ELEMENTS; // set as a hash table
  table[3] = ZSET_TEXT;
  table[4] = HASH_PAIRS;
  table[5] = ZSET_BINARY;
  for (const t of [9, 10, 11, 12, 13, 16, 17, 20, 23]) table[t] = STRING; // one encoded blob
  table[14] = ELEMENTS; // quicklist: one ziplist per node
  table[15] = streamProgram(1);
  table[18] = QUICKLIST_2; // per node: container (plain or packed), then its listpack or element
  table[19] = streamProgram(2);
  table[21] = streamProgram(3);
  table[22] = HASH_TTL_TRIPLES; // per field: absolute TTL, field, value
  table[24] = HASH_MIN_EXPIRE_TRIPLES; // min expire, then per field: TTL relative to it, field, value
  table[25] = HASH_MIN_EXPIRE_LISTPACK; // min expire, then the listpack (field, value, TTL triples)
  return table;
})();
