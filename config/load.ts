/**
 * Config file -> validated, deeply frozen `Config`.
 *
 * Every failure is a ConfigError whose lines read `<field.path>: <reason>`, so `check-config`, a
 * failed start and a rejected SIGHUP reload all tell the user which field to fix and why. The
 * result is frozen because one Config is shared by every module of a running proxy and swapped
 * whole on reload; an in-place edit would be a reload nobody validated.
 */
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { LineCounter, parseDocument } from 'yaml';
import * as v from 'valibot';
import { configSchema, describeInput, type Config } from './schema';

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly problems: string[];
  /** The file the problems were found in, when there was one. */
  readonly file: string | undefined;

  constructor(problems: string[], file?: string) {
    super(problems.join('\n'));
    this.problems = problems;
    this.file = file;
  }
}

/** Command-line flags; they win over the file. */
export interface ConfigOverrides {
  listen?: string;
  logLevel?: string;
  /** An absolute path (the command line resolves it against the working directory). */
  logFile?: string;
  seeds?: string[];
  workers?: number;
  /** nutcracker's stats port (`slotproxy nutcracker -s/-a/-i`): replaces the file's `stats`. */
  stats?: { listen: string; intervalMs: number };
}

// valibot's schema types whose wrong-type problems are worded here; the others (mappings, integers,
// host:port, choices) get their wording from config/schema.ts.
const TYPE_NAMES: Record<string, string> = {
  number: 'a number',
  string: 'a string',
  boolean: 'true or false',
  array: 'a list',
};

/**
 * Wording for issues whose schema gave no message of its own. Returning undefined keeps valibot's
 * text for kinds a config cannot produce.
 */
function reason(iss: v.BaseIssue<unknown>): string | undefined {
  if (iss.kind === 'schema' && Object.hasOwn(TYPE_NAMES, iss.type)) {
    if (iss.input === undefined) return 'required';
    return `expected ${TYPE_NAMES[iss.type]}, got ${describeInput(iss.input)}`;
  }
  switch (iss.type) {
    case 'min_length': {
      const min = String(iss.requirement);
      if (iss.requirement === 1) return 'must not be empty';
      return Array.isArray(iss.input) ? `must have at least ${min} entries` : `must be at least ${min} characters`;
    }
    case 'max_length': {
      const max = String(iss.requirement);
      return Array.isArray(iss.input) ? `must have at most ${max} entries` : `must be at most ${max} characters`;
    }
    default:
      return undefined;
  }
}

function formatPath(p: readonly unknown[]): string {
  let out = '';
  for (const seg of p) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else if (typeof seg === 'string' && /^[A-Za-z_$][\w$-]*$/.test(seg)) out += out === '' ? seg : `.${seg}`;
    else out += `[${JSON.stringify(String(seg))}]`;
  }
  return out === '' ? 'config' : out;
}

/** The unfrozen Config, so loadConfigFile can still resolve paths before freezing. */
function validate(raw: unknown, file?: string): Config {
  const result = v.safeParse(configSchema, raw, { message: (iss) => reason(iss) ?? iss.message });
  if (result.success) return result.output;
  const problems = result.issues.map((iss) => {
    const p = iss.path?.map((item) => item.key) ?? [];
    // Config problems end up in logs (a refused SIGHUP reload): never quote a password's value.
    const secret = p[p.length - 1] === 'password';
    return `${formatPath(p)}: ${secret ? iss.message.replace(/, got .*$/s, ' (value not shown)') : iss.message}`;
  });
  throw new ConfigError(problems, file);
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/** Validates a config already read into plain data; relative `scripts` stay relative to the cwd. */
export function parseConfig(raw: unknown): Config {
  return deepFreeze(validate(raw));
}

// Errors from node:fs may come from another realm (jest's sandbox), so no `instanceof Error`.
function errorField(err: unknown, field: 'code' | 'message'): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const v: unknown = Reflect.get(err, field);
  return typeof v === 'string' ? v : undefined;
}

function readProblem(file: string, err: unknown): string {
  switch (errorField(err, 'code')) {
    case 'ENOENT':
      return `${file}: no such file`;
    case 'EISDIR':
      return `${file}: is a folder, not a config file`;
    case 'EACCES':
      return `${file}: permission denied`;
    default:
      return `${file}: cannot read (${errorField(err, 'message') ?? String(err)})`;
  }
}

function parseYaml(file: string, text: string): unknown {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false });
  if (doc.errors.length > 0) {
    throw new ConfigError(
      doc.errors.map((e) => {
        const { line, col } = lineCounter.linePos(e.pos[0]);
        return `${file}: YAML syntax error at line ${line}, column ${col}: ${e.message}`;
      }),
      file,
    );
  }
  try {
    return doc.toJS();
  } catch (err) {
    // toJS refuses alias bombs ("billion laughs") and unresolvable aliases.
    throw new ConfigError([`${file}: ${errorField(err, 'message') ?? String(err)}`], file);
  }
}

function parseJson(file: string, text: string): unknown {
  try {
    // JSON.parse rejects the byte-order mark that some Windows editors write.
    return JSON.parse(text.replace(/^\uFEFF/, ''));
  } catch (err) {
    throw new ConfigError([`${file}: JSON syntax error: ${errorField(err, 'message') ?? String(err)}`], file);
  }
}

/**
 * Reads a `.json` file as JSON and anything else as YAML. Relative `scripts` entries (and TLS
 * files, and `log.file`) are resolved against the file's folder, so a config means the same
 * whatever directory the proxy starts in.
 */
export function loadConfigFile(file: string): Config {
  return configFromSource(file, readConfigSource(file).raw);
}

/** A config file's text and its parsed data (YAML, or JSON for `.json`), not validated yet. */
export function readConfigSource(file: string): { text: string; raw: unknown } {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError([readProblem(file, err)], file);
  }
  const raw = path.extname(file).toLowerCase() === '.json' ? parseJson(file, text) : parseYaml(file, text);
  if (raw === null || raw === undefined) {
    throw new ConfigError([`${file}: the file is empty`], file);
  }
  return { text, raw };
}

/** loadConfigFile's second half: validates data read from `file` and resolves its paths. */
export function configFromSource(file: string, raw: unknown): Config {
  const cfg = validate(raw, file);
  const dir = path.dirname(path.resolve(file));
  const within = <T extends { cert?: string; key?: string; ca?: string }>(files: T | undefined): T | undefined => (files === undefined ? undefined : resolveFiles(dir, files));
  return deepFreeze({
    ...cfg,
    scripts: cfg.scripts.map((p) => path.resolve(dir, p)),
    log: cfg.log.file === undefined ? cfg.log : { ...cfg.log, file: path.resolve(dir, cfg.log.file) },
    tls: within(cfg.tls),
    backend: { ...cfg.backend, tls: within(cfg.backend.tls) },
    metrics: cfg.metrics?.tls === undefined ? cfg.metrics : { ...cfg.metrics, tls: within(cfg.metrics.tls) },
    ...(cfg.migration?.spool?.dir === undefined ? {} : { migration: { ...cfg.migration, spool: { ...cfg.migration.spool, dir: path.resolve(dir, cfg.migration.spool.dir) } } }),
  });
}

/** TLS file fields (cert, key, ca) resolved against the config file's folder, like `scripts`. */
function resolveFiles<T extends { cert?: string; key?: string; ca?: string }>(dir: string, section: T): T {
  const at = (p: string | undefined): string | undefined => (p === undefined ? undefined : path.resolve(dir, p));
  return { ...section, cert: at(section.cert), key: at(section.key), ca: at(section.ca) };
}

/**
 * Flags on top of a loaded config. The merge is validated again, so a bad flag is reported the
 * way a bad file field is (under the field the flag sets).
 */
export function applyOverrides(cfg: Config, o: ConfigOverrides): Config {
  const merged: Record<string, unknown> = { ...cfg };
  if (o.listen !== undefined) merged.listen = o.listen;
  if (o.logLevel !== undefined) merged.log = { ...cfg.log, level: o.logLevel };
  if (o.logFile !== undefined) merged.log = { ...(merged.log as Config['log']), file: o.logFile };
  if (o.workers !== undefined) merged.workers = o.workers;
  if (o.stats !== undefined) merged.stats = { ...cfg.stats, ...o.stats };
  if (o.seeds !== undefined) {
    if (cfg.mode !== 'cluster') {
      throw new ConfigError([`cluster.seeds: seeds only apply in cluster mode (mode is "${cfg.mode}")`]);
    }
    merged.cluster = { ...cfg.cluster, seeds: o.seeds };
  }
  return parseConfig(merged);
}
