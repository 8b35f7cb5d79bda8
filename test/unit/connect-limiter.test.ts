import { ConnectLimiter } from '../../proxy/backend/connect-limiter';

describe('ConnectLimiter', () => {
  test('a burst goes at once, the rest is spaced at the rate', () => {
    let now = 1_000_000;
    const limiter = new ConnectLimiter(10, 3, () => now);
    expect([limiter.reserve(), limiter.reserve(), limiter.reserve()]).toEqual([0, 0, 0]);
    expect(limiter.reserve()).toBeCloseTo(100);
    expect(limiter.reserve()).toBeCloseTo(200);
    now += 1000; // idle long enough: the full burst is back
    expect([limiter.reserve(), limiter.reserve(), limiter.reserve()]).toEqual([0, 0, 0]);
    expect(limiter.reserve()).toBeCloseTo(100);
  });

  test('2,000 reservations at once at 100/s spread over about 19 seconds, none early', () => {
    const now = 5_000;
    const limiter = new ConnectLimiter(100, 100, () => now);
    const delays = Array.from({ length: 2000 }, () => limiter.reserve());
    expect(delays.filter((d) => d === 0)).toHaveLength(100);
    for (let i = 100; i < 2000; i++) expect(delays[i]).toBeCloseTo((i - 99) * 10);
  });
});
