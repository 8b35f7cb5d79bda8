/**
 * After `slotproxy migrate phase PHASE`: the config files the fleet's proxies run from (as each
 * registered its host and file, fleet.ts) that do not say PHASE. The tool writes only the file it
 * was given; a proxy that reloads (SIGHUP) or restarts from another file takes that file's phase,
 * so each such file is named with its host. A file on this host is read to see what it says; one on
 * another host cannot be, and is named as not checked.
 */
import os from 'node:os';
import { ConfigError, readConfigSource } from '../../../config/load';
import { ProxyRecord } from '../fleet';

/** The phase `file` says (`none` without a migration: section); throws when it cannot be read. */
export function phaseInFile(file: string): string {
  const { raw } = readConfigSource(file);
  const migration = (raw as { migration?: { phase?: unknown } }).migration;
  return migration === undefined || migration === null ? 'none' : String(migration.phase);
}

/** One line per registered config file that does not say `phase` (or may not), naming its proxies. */
export function filesNotSaying(proxies: readonly ProxyRecord[], phase: string, host = os.hostname()): string[] {
  const byFile = new Map<string, ProxyRecord[]>();
  for (const p of proxies) {
    const key = p.config === '-' ? `-\0${p.addr}` : `${p.host}\0${p.config}`;
    byFile.set(key, [...(byFile.get(key) ?? []), p]);
  }
  const lines: string[] = [];
  for (const records of byFile.values()) {
    const { host: on, config: file } = records[0];
    const who = `proxy ${[...new Set(records.map((r) => r.addr))].join(', ')}`;
    if (file === '-') {
      lines.push(`${who}: its registration names no config file (a slotproxy older than this tool): make the file it runs from say phase: ${phase}`);
      continue;
    }
    if (on !== host) {
      lines.push(`${on}:${file} (${who}): on another host, not read from here`);
      continue;
    }
    let says: string;
    try {
      says = phaseInFile(file);
    } catch (err) {
      lines.push(`${on}:${file} (${who}): cannot be read here (${err instanceof ConfigError ? err.problems.join('; ') : String(err)})`);
      continue;
    }
    if (says !== phase) lines.push(`${on}:${file} (${who}): still says phase: ${says}`);
  }
  return lines;
}
