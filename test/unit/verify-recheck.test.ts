// How `migrate verify` judges a key that differed at its first read (proxy/migration/tools/recheck.ts),
// over scripted observations: the versions each side keeps tell a copy in flight from a lasting
// difference. Against real nodes under load: test/integration/migration-verify-live.test.ts.
import { KeyState, compareStates } from '../../proxy/migration/tools/key-state';
import { Observation, RecheckPolicy, recheck } from '../../proxy/migration/tools/recheck';

const POLICY: RecheckPolicy = { times: 5, firstDelayMs: 1 };

function state(value: string, version: number, changedSinceSnapshot = false): KeyState {
  return { type: 'string', pttl: -1, dump: Buffer.from(value), version, changedSinceSnapshot, content: value };
}

/** A: value, version, whether it changed since that snapshot; B: value and version. */
function seen(a: [string, number, boolean?], b: [string, number]): Observation {
  const sa = state(...a);
  const sb = state(...b);
  const diff = compareStates(sa, sb, { a: 'A', b: 'B' }, 2000);
  return { a: sa, b: sb, diff: diff === 'by content' ? 'values differ' : diff };
}

/** Plays `rest` to the rechecks, one per read (the last one repeated). */
function script(rest: Observation[]): { observe: () => Promise<Observation>; reads: () => number } {
  let n = 0;
  return { observe: async () => rest[Math.min(n++, rest.length - 1)], reads: () => n };
}

test('a copy that lands between two reads: the same', async () => {
  const s = script([seen(['2', 2], ['2', 2])]);
  expect(await recheck(s.observe, seen(['2', 2], ['1', 1]), POLICY)).toEqual({ kind: 'same' });
  expect(s.reads()).toBe(1);
});

test('equal versions, A as its snapshot took it, different values, nothing moving: lasting, found at the first recheck', async () => {
  const s = script([seen(['1', 1], ['x', 1])]);
  const v = await recheck(s.observe, seen(['1', 1], ['x', 1]), POLICY);
  expect(v).toEqual({ kind: 'differs', why: 'string values differ (A at version 1, B at 1)' });
  expect(s.reads()).toBe(1);
});

test('A written straight on its node: the change feed snapshots it, then B applies it: the same', async () => {
  const s = script([seen(['2', 2], ['1', 1]), seen(['2', 2], ['2', 2])]);
  expect(await recheck(s.observe, seen(['2', 1, true], ['1', 1]), POLICY)).toEqual({ kind: 'same' });
  expect(s.reads()).toBe(2);
});

test('A changed since its snapshot and nothing copies it (a feed down): lasting once the rechecks are out', async () => {
  const s = script([seen(['2', 1, true], ['1', 1])]);
  const v = await recheck(s.observe, seen(['2', 1, true], ['1', 1]), POLICY);
  expect(v).toEqual({ kind: 'differs', why: 'string values differ (A at version 1, B at 1; A changed since that snapshot)' });
  expect(s.reads()).toBe(5);
});

test('a key written straight on A without pause: A always ahead of its snapshot, B keeps taking them: in flight', async () => {
  const s = script([2, 3, 4, 5, 6].map((v) => seen([String(v + 1), v, true], [String(v), v])));
  expect(await recheck(s.observe, seen(['2', 1, true], ['1', 1]), POLICY)).toEqual({ kind: 'in-flight' });
});

test('a hot key never caught equal, but B keeps taking newer copies: in flight, not a difference', async () => {
  const s = script([2, 3, 4, 5, 6].map((v) => seen([String(v + 1), v + 1], [String(v), v])));
  expect(await recheck(s.observe, seen(['2', 2], ['1', 1]), POLICY)).toEqual({ kind: 'in-flight' });
  expect(s.reads()).toBe(5);
});

test('B behind and not moving (a copy lost) while A goes on: lasting', async () => {
  const s = script([2, 3, 4, 5, 6].map((v) => seen([String(v), v], ['1', 1])));
  const v = await recheck(s.observe, seen(['2', 2], ['1', 1]), POLICY);
  expect(v).toEqual({ kind: 'differs', why: 'string values differ (A at version 6, B at 1, not advancing)' });
});

test('B advanced early but stopped behind A: lasting', async () => {
  const s = script([seen(['3', 3], ['2', 2]), seen(['3', 3], ['2', 2])]);
  expect((await recheck(s.observe, seen(['3', 3], ['1', 1]), POLICY)).kind).toBe('differs');
  expect(s.reads()).toBe(5);
});

test('B ahead of A: versions A never handed out, lasting', async () => {
  const s = script([seen(['1', 1], ['9', 9])]);
  expect((await recheck(s.observe, seen(['1', 1], ['9', 9]), POLICY)).kind).toBe('differs');
});

test('no rechecks: the first difference as it is, nothing read again', async () => {
  const s = script([seen(['2', 2], ['2', 2])]);
  const v = await recheck(s.observe, seen(['2', 2], ['1', 1]), { times: 0, firstDelayMs: 1 });
  expect(v).toEqual({ kind: 'differs', why: 'string values differ (A at version 2, B at 1)' });
  expect(s.reads()).toBe(0);
});

test('a key missing in B keeps the words the CLI test looks for', async () => {
  const o: Observation = { a: state('1', 1), b: { type: 'none', pttl: -2, dump: null, version: 0, changedSinceSnapshot: false, content: null }, diff: 'missing in B' };
  const v = await recheck(script([o]).observe, o, POLICY);
  expect(v).toEqual({ kind: 'differs', why: 'missing in B (A at version 1, B at 0, not advancing)' });
});
