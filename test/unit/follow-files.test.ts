// The follower's local files (proxy/migration/follow-snapshot.ts, follow-spool.ts): a follower
// starting removes the files of earlier followers of its node on this host whose process is gone,
// and only those; a full spool stops reading the link once per episode, until half is taken.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { followFileOf, removeStaleFollowFiles } from '../../proxy/migration/follow-snapshot';
import { MEMORY_BYTES, StreamIntake } from '../../proxy/migration/follow-spool';
import { ReplicationLink } from '../../proxy/replication/link';

let dir = '';

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slotproxy-follow-files-'));
});

afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

/** The pid of a process that ran and exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
  return Number(child.stdout.toString());
}

test('the files of a dead process following the same node are removed; a live process\'s, another node\'s and another host\'s are kept', () => {
  const mine = path.basename(followFileOf(dir, '10.0.0.1:6379', 'rdb', 1).replace(`.${process.pid}-1.`, `.${process.pid}.`));
  expect(path.basename(followFileOf(dir, '10.0.0.1:6379', 'rdb', 7))).toBe(`slotproxy-follow-10_0_0_1_6379.${os.hostname().replace(/[^0-9a-zA-Z]/g, '_')}.${process.pid}-7.rdb`);
  const dead = deadPid();
  const files = {
    dead: mine.replace(`.${process.pid}.`, `.${dead}.`),
    deadStream: mine.replace(`.${process.pid}.rdb`, `.${dead}.stream`),
    deadNumbered: mine.replace(`.${process.pid}.`, `.${dead}-3.`),
    ownNumbered: mine.replace(`.${process.pid}.`, `.${process.pid}-2.`),
    live: mine.replace(`.${process.pid}.`, `.${process.ppid}.`),
    own: mine,
    otherNode: mine.replace('10_0_0_1_6379', '10_0_0_2_6379').replace(`.${process.pid}.`, `.${dead}.`),
    otherHost: mine.replace(`.${os.hostname().replace(/[^0-9a-zA-Z]/g, '_')}.`, '.elsewhere.').replace(`.${process.pid}.`, `.${dead}.`),
    unrelated: 'dump.rdb',
  };
  for (const f of Object.values(files)) fs.writeFileSync(path.join(dir, f), 'x');
  expect(removeStaleFollowFiles(dir, '10.0.0.1:6379').sort()).toEqual([files.dead, files.deadStream, files.deadNumbered].sort());
  expect(fs.readdirSync(dir).sort()).toEqual([files.live, files.own, files.ownNumbered, files.otherNode, files.otherHost, files.unrelated].sort());
  expect(removeStaleFollowFiles(path.join(dir, 'missing'), '10.0.0.1:6379')).toEqual([]);
});

test('a full spool pauses the link once per episode and reads it again once half of it is taken', () => {
  const KiB = 1024;
  let held = 0;
  const intake = new StreamIntake(path.join(dir, 's.stream'), 2048 * KiB, 'a:1', {
    inMemory: () => held,
    parse: (chunk) => {
      held += chunk.length;
    },
    taking: () => true,
    fail: (reason) => {
      throw new Error(reason);
    },
  });
  const calls: string[] = [];
  const link = { pause: () => calls.push('pause'), resume: () => calls.push('resume'), close: (why: string) => calls.push(`close ${why}`) } as unknown as ReplicationLink;
  held = MEMORY_BYTES; // B far behind: everything is spooled
  for (let i = 0; i < 40; i++) intake.heard(link, Buffer.alloc(64 * KiB), i * 64 * KiB);
  expect(calls).toEqual(['pause']);
  expect(intake.full).toBe(true);
  expect(intake.fulls).toBe(1);
  // B takes 512 KiB in: still more than half full, the link stays paused (no new episode per chunk).
  held = MEMORY_BYTES - 300 * KiB;
  expect(intake.take()).toBe(true);
  expect(intake.spooled).toBe(2560 * KiB - 512 * KiB);
  expect(intake.full).toBe(true);
  expect(calls).toEqual(['pause']);
  // Half taken: read again, and one episode counted in all.
  held = MEMORY_BYTES - 1100 * KiB;
  expect(intake.take()).toBe(true);
  expect(intake.spooled).toBeLessThanOrEqual(1024 * KiB);
  expect(intake.full).toBe(false);
  expect(calls).toEqual(['pause', 'resume']);
  expect(intake.fulls).toBe(1);
  intake.close();
});
