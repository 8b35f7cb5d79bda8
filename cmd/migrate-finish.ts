/**
 * `slotproxy migrate finish -c FILE`: after `done`, side B becomes the file's back end
 * (config/write-finish.ts) and `migration:` goes, every other setting kept; each proxy then takes it
 * on SIGHUP with its clients connected (proxy/server/finish-reload.ts). Refused until every live
 * proxy of the fleet is in `done`: one still writing to side A would be left behind.
 */
import { Command } from 'commander';
import fs from 'node:fs';
import path from 'node:path';
import { loadConfigFile } from '../config/load';
import { finishedConfigText, replaceFile } from '../config/write-finish';
import { ProxyRecord, describeProxies, readFleet } from '../proxy/migration/fleet';
import { NodeClient } from '../proxy/migration/tools/node-client';

/** The live proxies of the fleet (registered on side A's nodes) that are not in done. */
export async function proxiesNotDone(nodes: NodeClient): Promise<ProxyRecord[]> {
  const fleet = await readFleet((addr, args) => nodes.call(addr, args), nodes.placement().from.masters());
  return fleet.filter((p) => p.phase !== 'done');
}

export function registerFinish(migrate: Command, fail: (err: unknown) => never): void {
  migrate
    .command('finish')
    .description('after done: write side B into the config file as the back end (migration: removed, every other setting kept); then SIGHUP every proxy')
    .requiredOption('-c, --config <file>', 'the proxies\' config file')
    .action(async (opts: { config: string }) => {
      try {
        const file = opts.config;
        const config = loadConfigFile(file);
        if (config.migration === undefined) throw new Error(`${file} has no migration: section (finished already?)`);
        if (config.migration.phase !== 'done') throw new Error(`the config says phase ${config.migration.phase}: finish writes side B as the back end, only once every proxy is in done (slotproxy migrate phase done -c FILE)`);
        const nodes = new NodeClient(config);
        try {
          await nodes.start();
          const behind = await proxiesNotDone(nodes);
          if (behind.length > 0) throw new Error(`refused: live proxies are not in done: ${describeProxies(behind)}; switch them first (slotproxy migrate phase done -c FILE)`);
        } finally {
          nodes.close();
        }
        const { text, dropped } = finishedConfigText(file, fs.readFileSync(file, 'utf8'));
        // Checked as the proxies will load it (relative paths from the same folder) before it replaces the file.
        const check = path.join(path.dirname(file), `.${path.basename(file)}.finish-check${path.extname(file)}`);
        fs.writeFileSync(check, text);
        let mode: string;
        try {
          mode = loadConfigFile(check).mode;
        } finally {
          fs.rmSync(check, { force: true });
        }
        replaceFile(file, text);
        const to = config.migration.to;
        const backEnd = 'cluster' in to ? `mode cluster, cluster.seeds ${to.cluster.seeds.join(', ')}` : `mode ${mode}, ring of ${to.nodes.length} node(s)`;
        process.stdout.write(`finish: ${file} now names side B as its back end (${backEnd}); migration: removed, every other setting kept\n`);
        if (dropped.length > 0) process.stdout.write(`finish: side A's own settings dropped with it: ${dropped.join(', ')}\n`);
        process.stdout.write('finish: send SIGHUP to every proxy (kill -HUP PID): each switches to side B alone with its clients connected\n');
      } catch (err) {
        fail(err);
      }
    });
}
