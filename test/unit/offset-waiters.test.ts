import { OffsetWaiters } from '../../proxy/migration/offset-waiters';

const settled = (): Promise<void> => new Promise((r) => setImmediate(r));

test('a release resolves exactly the waits at or below the applied offset, whatever order they came in', async () => {
  const w = new OffsetWaiters();
  const done: number[] = [];
  const wait = (o: number): void => void w.wait(o).then(() => done.push(o));
  for (const o of [50, 10, 30, 30, 70, 20]) wait(o);
  w.release(30);
  await settled();
  expect(done).toEqual([10, 20, 30, 30]);
  wait(40);
  w.release(60);
  await settled();
  expect(done).toEqual([10, 20, 30, 30, 40, 50]);
  w.releaseAll();
  await settled();
  expect(done).toEqual([10, 20, 30, 30, 40, 50, 70]);
});

test('releases past many waits keep the rest waiting, and releaseAll resolves them', async () => {
  const w = new OffsetWaiters();
  const done: number[] = [];
  for (let i = 0; i < 5000; i++) void w.wait(i).then(() => done.push(i));
  for (let i = 0; i < 3000; i += 7) w.release(i);
  await settled();
  expect(done.length).toBe(2997);
  expect(done.every((o, k) => o === k)).toBe(true);
  w.releaseAll();
  await settled();
  expect(done.length).toBe(5000);
});
