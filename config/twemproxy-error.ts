/** A nutcracker.yml that cannot be taken as it is (config/twemproxy.ts, config/twemproxy-fields.ts). */
export class TwemproxyConfigError extends Error {
  override readonly name = 'TwemproxyConfigError';
}
