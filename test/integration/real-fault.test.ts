// A real segmentation fault (not `kill -SEGV`) ends the process: a shared object whose constructor
// writes through a null pointer, loaded with process.dlopen by a process that has installed
// slotproxy's signal handlers (cmd/signals.ts). With a SIGSEGV handler there, libuv's C handler
// returns to the faulting instruction for ever and the process spins (measured: still running
// after 10 s); without one it dies by SIGSEGV.
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { tempDir } from '../helpers/cli';

const SIGNALS = path.resolve(__dirname, '..', '..', 'dist', 'cmd', 'signals.js');

test('a null-pointer write in native code, under slotproxy\'s signal handlers: the process dies by SIGSEGV', async () => {
  const dir = tempDir('slotproxy-fault-');
  try {
    fs.writeFileSync(path.join(dir, 'crash.c'), '__attribute__((constructor)) static void crash(void) { volatile int *p = (int *)0; *p = 1; }\n');
    execFileSync('gcc', ['-shared', '-fPIC', '-o', 'crash.so', 'crash.c'], { cwd: dir });
    const script = `require(${JSON.stringify(SIGNALS)}).handleNutcrackerSignals(); setTimeout(() => process.dlopen({ exports: {} }, ${JSON.stringify(path.join(dir, 'crash.so'))}), 100);`;
    const child = spawn(process.execPath, ['-e', script], { stdio: 'ignore' });
    // A spinning process would never exit: killed after 15 s, it would end by SIGKILL, failing the test.
    const guard = setTimeout(() => child.kill('SIGKILL'), 15_000);
    const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
    clearTimeout(guard);
    expect({ code, signal }).toEqual({ code: null, signal: 'SIGSEGV' });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 30_000);
