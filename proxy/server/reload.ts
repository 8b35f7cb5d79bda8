/**
 * Which config changes a running proxy cannot take on SIGHUP. Everything not listed here is either
 * applied live (ProxyServer.prepareReload: limits, log level, auth, the TLS certificate, back-end
 * credentials) or by its owner's reload hook (ring and migration, scripts).
 */
import { isDeepStrictEqual } from 'node:util';
import { Config } from '../../config/schema';

const RESTART_ONLY = ['listen', 'mode', 'cluster', 'backend', 'metrics', 'workers', 'crossSlot'] as const;

/** The top-level fields that differ between `running` and `next` and need a restart. */
export function restartOnlyChanges(running: Config, next: Config): string[] {
  return RESTART_ONLY.filter((field) =>
    field === 'backend' ? !isDeepStrictEqual(withoutCredentials(running.backend), withoutCredentials(next.backend)) : !isDeepStrictEqual(running[field], next[field]),
  );
}

/** Back-end credentials are applied live (to connections opened after the reload). */
function withoutCredentials(backend: Config['backend']): object {
  const { username: _u, password: _p, ...rest } = backend;
  return rest;
}
