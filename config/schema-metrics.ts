/**
 * The `metrics` section of the config schema: the HTTP listener of /metrics, /healthz, /readyz and
 * the console, and how it is protected (HTTP Basic, TLS of its own). Field names are a contract;
 * each default is stated next to its field.
 */
import * as v from 'valibot';
import { clientTlsSchema } from './schema-connections';
import { Report, describeInput, isMapping, listenAddr, nonEmpty, strictObject } from './schema-kit';

/** Who may read /metrics and /console.json (/healthz and /readyz stay open, for orchestrators' probes). */
const httpAuthSchema = v.union(
  [v.literal('users'), strictObject({ password: nonEmpty })],
  (iss) => `expected users (the proxy's auth users allowed to run INFO) or { password: ... }, got ${describeInput(iss.input)}`,
);

export const metricsSchema = strictObject({
  /** Where the listener binds, host:port. Required. */
  listen: listenAddr,
  /** The web console (GET /) and its JSON (GET /console.json) on the same listener; false serves neither. Default true. */
  console: v.optional(v.boolean(), true),
  /**
   * HTTP Basic for /metrics and /console.json. `users`: a user of the `auth` section (or the
   * default user's `auth.password`) whose rules allow INFO; `{ password }`: that password, any
   * user name. Optional: absent, /metrics is open and /console.json asks for a user allowed INFO
   * only when the proxy has `auth`.
   */
  auth: v.optional(httpAuthSchema),
  /** TLS for this listener (HTTPS), as `tls` is for clients. Optional: absent, plain HTTP. */
  tls: v.optional(clientTlsSchema),
});
export type MetricsConfig = v.InferOutput<typeof metricsSchema>;
export type MetricsAuthConfig = NonNullable<MetricsConfig['auth']>;

/** `metrics.auth: users` needs users to check: an `auth` section. */
export function checkMetricsAuth(c: { metrics?: unknown; auth?: unknown }, report: Report): void {
  if (!isMapping(c.metrics)) return;
  if ((c.metrics as { auth?: unknown }).auth === 'users' && c.auth === undefined) report('users needs an auth section (the users, or auth.password) to check', 'metrics', 'auth');
}
