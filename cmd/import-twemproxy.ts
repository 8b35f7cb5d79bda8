/**
 * `slotproxy import-twemproxy FILE [-o DIR]`: prints (or writes, one file per pool) the slotproxy
 * configs that serve a nutcracker.yml's pools with every key where twemproxy put it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Command } from 'commander';
import { stringify } from 'yaml';
import { convertTwemproxy } from '../config/twemproxy';

export function registerImportTwemproxy(program: Command, fail: (err: unknown) => never): void {
  program
    .command('import-twemproxy')
    .description('convert a twemproxy (nutcracker) config to slotproxy ring configs, one per pool')
    .argument('<file>', 'nutcracker.yml')
    .option('-o, --out-dir <dir>', 'write <pool>.yaml files here instead of printing them')
    .action((file: string, opts: { outDir?: string }) => {
      try {
        const pools = convertTwemproxy(fs.readFileSync(file, 'utf8'));
        for (const { pool, config, notes } of pools) {
          const header = [`# slotproxy config for twemproxy pool "${pool}" (from ${path.basename(file)})`, ...notes.map((n) => `# ${n}`)];
          const text = `${header.join('\n')}\n${stringify(config)}`;
          if (opts.outDir === undefined) {
            process.stdout.write(`${pools.length > 1 ? '---\n' : ''}${text}`);
          } else {
            fs.mkdirSync(opts.outDir, { recursive: true });
            const out = path.join(opts.outDir, `${pool}.yaml`);
            fs.writeFileSync(out, text);
            process.stderr.write(`wrote ${out}\n`);
          }
        }
      } catch (err) {
        fail(err);
      }
    });
}
