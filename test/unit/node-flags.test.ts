// cmd/node-flags.ts is the one list of V8 flags slotproxy runs with; the bin's shebang and the npm
// sandbox script have to spell it out, so they are checked against it here.
import fs from 'node:fs';
import path from 'node:path';
import { NODE_FLAGS } from '../../cmd/node-flags';

const root = path.join(__dirname, '../..');

describe('node flags', () => {
  test('the bin\'s shebang passes exactly NODE_FLAGS to node', () => {
    const firstLine = fs.readFileSync(path.join(root, 'cmd/slotproxy.ts'), 'utf8').split('\n')[0];
    expect(firstLine).toBe(`#!/usr/bin/env -S node ${NODE_FLAGS.join(' ')}`);
  });

  test('npm run sandbox starts node with NODE_FLAGS', () => {
    const scripts = (JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    expect(scripts.sandbox).toContain(`node ${NODE_FLAGS.join(' ')} dist/cmd/slotproxy.js`);
  });

  test('the young generation is sized for requests in flight (bench/NOTES.md, round 4)', () => {
    expect(NODE_FLAGS).toContain('--max-semi-space-size=16');
  });
});
