/**
 * The end of a migration in its config file (`slotproxy migrate finish`): side B (`migration.to`)
 * becomes the back end and `migration:` goes, every other setting kept as written (comments, order
 * and formatting of YAML, with the yaml library's Document; JSON stays JSON). A ring B replaces
 * `ring.nodes` (and the hash, tag and distribution it names); a cluster B becomes `mode: cluster`
 * and `cluster.seeds`, in the place of `ring:`.
 */
import fs from 'node:fs';
import { Document, isMap, isScalar, parseDocument, YAMLMap } from 'yaml';

/** What the rewrite dropped with side A, for the operator to read (a ring's Sentinel settings, say). */
export interface FinishedText {
  text: string;
  dropped: string[];
}

/** The config's text with side B as its back end; throws when it has no `migration.to`. */
export function finishedConfigText(file: string, text: string): FinishedText {
  return file.endsWith('.json') ? finishJson(text) : finishYaml(text);
}

const RING_SHAPE = ['hash', 'hashTag', 'distribution'] as const;

type Plain = Record<string, unknown>;

function isPlain(v: unknown): v is Plain {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function finishJson(text: string): FinishedText {
  const json = JSON.parse(text.replace(/^\uFEFF/, '')) as Plain;
  const migration = json.migration;
  if (!isPlain(migration) || !isPlain(migration.to)) throw new Error('the config has no migration.to section');
  const to = migration.to;
  const dropped: string[] = [];
  // Rebuilt key by key, so that side B takes side A's place in the file.
  const out: Plain = {};
  const wasRing = json.mode === 'ring';
  for (const [key, value] of Object.entries(json)) {
    if (key === 'migration') continue;
    if (key === 'mode') out.mode = isPlain(to.cluster) ? 'cluster' : 'ring';
    else if (key === (wasRing ? 'ring' : 'cluster')) Object.assign(out, sideB(wasRing, isPlain(value) ? value : {}, to, dropped));
    else out[key] = value;
  }
  if (out.mode === undefined && !isPlain(to.cluster)) out.mode = 'ring';
  return { text: `${JSON.stringify(out, null, 2)}\n`, dropped };
}

/** Side B as the back-end section(s) of a plain config: `{ ring }` or `{ cluster }`. */
function sideB(wasRing: boolean, sideA: Plain, to: Plain, dropped: string[]): Plain {
  if (isPlain(to.cluster)) {
    if (wasRing) dropped.push(...Object.keys(sideA).filter((k) => k !== 'nodes' && !(RING_SHAPE as readonly string[]).includes(k)).map((k) => `ring.${k}`));
    return { cluster: wasRing ? { seeds: to.cluster.seeds } : { ...sideA, seeds: to.cluster.seeds } };
  }
  if (!wasRing) dropped.push(...Object.keys(sideA).filter((k) => k !== 'seeds').map((k) => `cluster.${k}`));
  const ring: Plain = wasRing ? { ...sideA } : {};
  for (const k of RING_SHAPE) if (to[k] !== undefined) ring[k] = to[k];
  ring.nodes = to.nodes;
  return { ring };
}

function finishYaml(text: string): FinishedText {
  const doc = parseDocument(text);
  const root = doc.contents;
  if (!isMap(root)) throw new Error('the config is not a mapping');
  const to = doc.getIn(['migration', 'to'], true);
  if (!isMap(to)) throw new Error('the config has no migration.to section');
  const wasRing = doc.get('mode') === 'ring';
  const intoCluster = to.has('cluster');
  const dropped: string[] = [];
  const sideAKey = wasRing ? 'ring' : 'cluster';
  const sideA = doc.get(sideAKey, true);
  const sideAMap = isMap(sideA) ? sideA : new YAMLMap();
  let section: YAMLMap;
  if (intoCluster) {
    section = wasRing ? new YAMLMap() : sideAMap;
    if (wasRing) dropped.push(...keysOf(sideAMap).filter((k) => k !== 'nodes' && !(RING_SHAPE as readonly string[]).includes(k)).map((k) => `ring.${k}`));
    section.set('seeds', to.getIn(['cluster', 'seeds'], true));
  } else {
    section = wasRing ? sideAMap : new YAMLMap();
    if (!wasRing) dropped.push(...keysOf(sideAMap).filter((k) => k !== 'seeds').map((k) => `cluster.${k}`));
    for (const k of RING_SHAPE) if (to.has(k)) section.set(k, to.get(k, true));
    section.set('nodes', to.get('nodes', true));
  }
  replaceSection(doc, root, sideAKey, intoCluster ? 'cluster' : 'ring', section);
  doc.set('mode', intoCluster ? 'cluster' : 'ring');
  doc.delete('migration');
  // No folding of long lines, no padding inside [ ] and { }: as close to the file as written.
  return { text: doc.toString({ lineWidth: 0, flowCollectionPadding: false }), dropped };
}

function keysOf(map: YAMLMap): string[] {
  return map.items.flatMap((p) => (isScalar(p.key) ? [String(p.key.value)] : []));
}

/** `section` under `name`, in the place (and with the comments) of the `was` entry, when there is one. */
function replaceSection(doc: Document, root: YAMLMap, was: string, name: string, section: YAMLMap): void {
  const pair = root.items.find((p) => isScalar(p.key) && p.key.value === was);
  if (pair === undefined) {
    doc.set(name, section);
    return;
  }
  if (isScalar(pair.key)) pair.key.value = name;
  pair.value = section;
}

/** Writes `text` to `file` whole (a temp file renamed), so a proxy reloading then never reads half of it. */
export function replaceFile(file: string, text: string): void {
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, text);
  fs.renameSync(tmp, file);
}
