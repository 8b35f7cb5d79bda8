import pkg from '../../package.json';

/** slotproxy's own version, from package.json. */
export const VERSION: string = pkg.version;
