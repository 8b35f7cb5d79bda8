/**
 * The building blocks of the config schema (config/schema.ts and its sections): host:port parsing,
 * strict objects whose unknown keys name the closest field, choices, integers, and a reporter
 * for checks that span fields. Messages name what a field holds; config/load.ts words the rest.
 */
import { isIPv6 } from 'node:net';
import * as v from 'valibot';

export interface HostPort {
  /** Without brackets for IPv6, as `net.connect` and `server.listen` want it. */
  host: string;
  port: number;
}

// Unbracketed hosts are names or IPv4 literals; a bare IPv6 literal is ambiguous ("::1:7777").
const HOSTNAME = /^[A-Za-z0-9._-]+$/;
const PORT = /^[0-9]{1,5}$/;

/** A JSON-ish rendering of a user's value for error messages: `"localhost"`, `7777`, `null`. */
export function describeInput(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a mapping';
  if (typeof v === 'string') return JSON.stringify(v.length > 80 ? `${v.slice(0, 77)}...` : v);
  if (typeof v === 'bigint') return `${v.toString()}n`;
  return String(v);
}

/** The reason `s` is not a host:port (`minPort` 0 allows an ephemeral listen port), or the parts. */
function splitHostPort(s: string, minPort: number): HostPort | string {
  const expected = `expected host:port, got ${describeInput(s)}`;
  let host: string;
  let portText: string;
  if (s.startsWith('[')) {
    const close = s.indexOf(']');
    if (close < 0 || s[close + 1] !== ':') return expected;
    host = s.slice(1, close);
    portText = s.slice(close + 2);
    if (!isIPv6(host)) return `expected [IPv6]:port, got ${describeInput(s)}`;
  } else {
    const colon = s.lastIndexOf(':');
    if (colon < 0) return expected;
    host = s.slice(0, colon);
    portText = s.slice(colon + 1);
    if (host.includes(':')) {
      return `expected host:port (write IPv6 as [::1]:7777), got ${describeInput(s)}`;
    }
    if (!HOSTNAME.test(host)) return expected;
  }
  if (!PORT.test(portText)) return expected;
  const port = Number(portText);
  if (port < minPort || port > 65535) {
    return `expected host:port with a port from ${minPort} to 65535, got ${describeInput(s)}`;
  }
  return { host, port };
}

/**
 * Splits "host:port" or "[v6]:port". Throws on anything else; the config schema has already
 * rejected bad addresses, so a throw here means a caller skipped validation.
 */
export function parseHostPort(s: string): HostPort {
  const r = splitHostPort(s, 0);
  if (typeof r === 'string') throw new Error(r);
  return r;
}

/** "required" for a missing value, else `expected <what>, got <value>`. */
function expected(what: string) {
  return (iss: v.BaseIssue<unknown>): string =>
    iss.input === undefined ? 'required' : `expected ${what}, got ${describeInput(iss.input)}`;
}

/** Adds a problem, at a field below the checked value when keys are given (`'users', 2, 'name'`). */
export type Report = (message: string, ...keys: (string | number)[]) => void;

type IssuePath = [v.IssuePathItem, ...v.IssuePathItem[]];

/** A Report on `value`, from the `addIssue` of a valibot rawCheck or rawTransform. */
export function reporter(value: unknown, addIssue: (info: { message: string; path?: IssuePath }) => void): Report {
  return (message, ...keys) => {
    const path: v.IssuePathItem[] = [];
    let input = value;
    for (const key of keys) {
      const child: unknown = (input as Record<string | number, unknown>)[key];
      path.push({ type: 'unknown', origin: 'value', input, key, value: child });
      input = child;
    }
    addIssue({ message, path: path.length > 0 ? (path as IssuePath) : undefined });
  };
}

/** valibot's strictObject issue for a key that is not a field. */
function isUnknownKey(iss: v.BaseIssue<unknown>): boolean {
  return iss.type === 'strict_object' && iss.expected === 'never';
}

/**
 * Further checks of a value, skipped while something in it has the wrong type or is missing (its
 * fields cannot be trusted then). Other problems do not stop them: a number out of range, or an
 * unknown field, which valibot counts as a wrong type but which leaves every known field as checked.
 */
export function refine<T>(check: (value: T, report: Report) => void) {
  return v.rawCheck<T>(({ dataset, addIssue }) => {
    if (dataset.issues?.some((iss) => iss.kind === 'schema' && !isUnknownKey(iss))) return;
    check(dataset.value as T, reporter(dataset.value, addIssue));
  });
}

/**
 * The other half of `v.minLength(1)`, which checks values of the right type only: a value of the
 * wrong type that has a length anyway (`seeds: ""`, `name: []`) gets this problem too.
 */
export function emptyOfWrongType<T>() {
  return v.rawCheck<T>(({ dataset, addIssue }) => {
    if (dataset.typed) return;
    const x = dataset.value as { length?: unknown } | null | undefined;
    if (x === null || x === undefined || x.length === undefined || (x.length as number) >= 1) return;
    addIssue({ message: Array.isArray(x) || typeof x === 'string' ? 'must not be empty' : 'must be at least 1' });
  });
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length];
}

/** "unknown field", with the field `key` is most likely a typo of. */
function unknownField(key: string, known: readonly string[]): string {
  const lower = key.toLowerCase();
  let best: string | undefined;
  let bestDistance = Math.max(1, Math.floor(key.length / 3)) + 1;
  for (const k of known) {
    const d = k.toLowerCase() === lower ? 0 : editDistance(lower, k.toLowerCase());
    if (d < bestDistance) {
      best = k;
      bestDistance = d;
    }
  }
  return best === undefined ? 'unknown field' : `unknown field (did you mean "${best}"?)`;
}

export function isMapping(x: unknown): boolean {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

/**
 * A mapping holding `entries` and nothing else: every other key is an "unknown field" problem.
 * valibot's strictObject takes lists for mappings (hence the first check) and reports only the
 * first unknown key (hence the last: it reports the others, after it and in the file's order).
 */
export function strictObject<const E extends v.ObjectEntries>(entries: E) {
  const known = Object.keys(entries);
  return v.pipe(
    v.custom<v.InferInput<v.StrictObjectSchema<E, undefined>>>(isMapping, expected('a mapping')),
    // Its issues are a missing field (no input) or the first unknown key (the key as input).
    v.strictObject(entries, (iss) => (iss.input === undefined ? 'required' : unknownField(String(iss.input), known))),
    v.rawCheck(({ dataset, addIssue }) => {
      const first = dataset.issues?.find((iss) => isUnknownKey(iss) && iss.path?.length === 1);
      if (first?.path === undefined) return;
      const { input, key: firstKey } = first.path[0] as v.ObjectPathItem;
      for (const key in input) {
        if (key === firstKey || Object.hasOwn(entries, key)) continue;
        addIssue({ message: unknownField(key, known), path: [{ type: 'object', origin: 'key', input, key, value: input[key] }] });
      }
    }),
  );
}

/** One of `options`; any other value is named in the problem. */
export function oneOf<const T extends readonly [string, ...string[]]>(options: T) {
  return v.picklist(options, expected(`one of ${options.join(' | ')}`));
}

function hostPort(minPort: number) {
  return v.pipe(
    v.string(expected('host:port')),
    refine((s, report) => {
      const r = splitHostPort(s, minPort);
      if (typeof r === 'string') report(r);
    }),
  );
}

/** Something we listen on: port 0 asks the OS for a free port (tests, sandboxes). */
export const listenAddr = hostPort(0);
/** Something we connect to: port 0 cannot be reached. */
export const remoteAddr = hostPort(1);

export const nonEmpty = v.pipe(v.string(), v.minLength(1), emptyOfWrongType());

/**
 * An integer in [min, max]. Anything but a finite number is a wrong type (not `v.number()`, which
 * takes Infinity), so the checks of the enclosing mapping wait for it; a fraction or a number out
 * of range is a problem of this field only, and one problem at most is reported.
 */
export function int(min: number, max: number = Number.MAX_SAFE_INTEGER) {
  return v.pipe(
    v.custom<number>((n) => typeof n === 'number' && Number.isFinite(n), expected('an integer')),
    refine((n, report) => {
      if (!Number.isSafeInteger(n)) {
        report(`expected an integer, got ${describeInput(n)}`);
      } else if (n < min) {
        report(`must be at least ${min}`);
      } else if (n > max) {
        report(`must be at most ${max}`);
      }
    }),
  );
}
