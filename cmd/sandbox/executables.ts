import fs from 'node:fs';
import path from 'node:path';

function isExecutableFile(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/**
 * Absolute path of an executable, or null: a path is checked as it is; a bare name is looked up on
 * PATH, then in the sbin folders, because Debian puts nutcracker in /usr/sbin, which is not on an
 * ordinary user's PATH.
 */
export function findExecutable(name: string): string | null {
  if (name.includes('/')) return isExecutableFile(name) ? path.resolve(name) : null;
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter), '/usr/local/sbin', '/usr/sbin', '/sbin'];
  for (const dir of dirs) {
    if (dir === '') continue;
    const candidate = path.join(dir, name);
    if (isExecutableFile(candidate)) return candidate;
  }
  return null;
}
