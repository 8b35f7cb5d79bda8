/**
 * Writes a migration phase into a config file, keeping everything else of it (comments, order,
 * formatting of YAML; JSON stays JSON), so a proxy restarted later starts in the phase the fleet
 * runs in (`slotproxy migrate phase`).
 */
import fs from 'node:fs';
import { parseDocument } from 'yaml';
import { MigrationPhase } from './schema';

export function writePhase(file: string, phase: MigrationPhase): void {
  const text = fs.readFileSync(file, 'utf8');
  let next: string;
  if (file.endsWith('.json')) {
    const json = JSON.parse(text) as { migration?: { phase?: string } };
    if (json.migration === undefined) throw new Error(`${file} has no migration section`);
    json.migration.phase = phase;
    next = `${JSON.stringify(json, null, 2)}\n`;
  } else {
    const doc = parseDocument(text);
    if (!doc.hasIn(['migration'])) throw new Error(`${file} has no migration section`);
    doc.setIn(['migration', 'phase'], phase);
    next = doc.toString();
  }
  // Written whole and renamed, so a proxy reloading at that moment never reads half a file.
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, next);
  fs.renameSync(tmp, file);
}
