// SLOTPROXY_REDIS_BIN: the Redis tools come from one folder, whose pointer files (a few bytes naming
// a sibling, standing in for symlinks) are followed to the real binary.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { findRedisExecutable, redisSentinelCommand } from '../../cmd/sandbox/executables';

let dir = '';
const saved = process.env.SLOTPROXY_REDIS_BIN;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slotproxy-bin-'));
  fs.writeFileSync(path.join(dir, 'valkey-server'), '#!/bin/sh\n', { mode: 0o755 });
  fs.writeFileSync(path.join(dir, 'redis-server'), 'valkey-server\n', { mode: 0o444 });
  fs.writeFileSync(path.join(dir, 'valkey-sentinel'), 'valkey-server', { mode: 0o444 });
  fs.writeFileSync(path.join(dir, 'redis-sentinel'), 'valkey-sentinel', { mode: 0o444 });
  fs.writeFileSync(path.join(dir, 'redis-cli'), 'not a pointer: a text of several words', { mode: 0o444 });
  fs.writeFileSync(path.join(dir, 'redis-benchmark'), 'missing-benchmark', { mode: 0o444 });
  process.env.SLOTPROXY_REDIS_BIN = dir;
});

afterAll(() => {
  if (saved === undefined) delete process.env.SLOTPROXY_REDIS_BIN;
  else process.env.SLOTPROXY_REDIS_BIN = saved;
  fs.rmSync(dir, { recursive: true, force: true });
});

test('a pointer file is followed to the executable it names, through several steps', () => {
  expect(findRedisExecutable('redis-server')).toBe(path.join(dir, 'valkey-server'));
  expect(findRedisExecutable('redis-sentinel')).toBe(path.join(dir, 'valkey-server'));
});

test('a text that is not one name, or names nothing, is no tool', () => {
  expect(findRedisExecutable('redis-cli')).toBeNull();
  expect(findRedisExecutable('redis-benchmark')).toBeNull();
});

test('a sentinel runs as the server binary with --sentinel', () => {
  expect(redisSentinelCommand('/x/sentinel.conf')).toEqual({ bin: path.join(dir, 'valkey-server'), args: ['/x/sentinel.conf', '--sentinel'] });
});

test('unset, the tools come from PATH', () => {
  process.env.SLOTPROXY_REDIS_BIN = '';
  try {
    expect(findRedisExecutable('redis-server')).toMatch(/\/redis-server$/);
  } finally {
    process.env.SLOTPROXY_REDIS_BIN = dir;
  }
});
