// SIGTTIN / SIGTTOU steps of the log level, as nutcracker's log_level_up / log_level_down.
import { stepLogLevel } from '../../proxy/telemetry/log-level';

test('up: one step more verbose, stopping at trace', () => {
  expect(stepLogLevel('fatal', 'up')).toBe('error');
  expect(stepLogLevel('warn', 'up')).toBe('info');
  expect(stepLogLevel('info', 'up')).toBe('debug');
  expect(stepLogLevel('debug', 'up')).toBe('trace');
  expect(stepLogLevel('trace', 'up')).toBe('trace');
});

test('down: one step less verbose, stopping at fatal', () => {
  expect(stepLogLevel('trace', 'down')).toBe('debug');
  expect(stepLogLevel('info', 'down')).toBe('warn');
  expect(stepLogLevel('error', 'down')).toBe('fatal');
  expect(stepLogLevel('fatal', 'down')).toBe('fatal');
});

test('silent is below the ladder: up is fatal, down stays silent', () => {
  expect(stepLogLevel('silent', 'up')).toBe('fatal');
  expect(stepLogLevel('silent', 'down')).toBe('silent');
});

test('six steps up from fatal reach trace; six down come back', () => {
  let level: string = 'fatal';
  const seen = [level];
  for (let i = 0; i < 5; i++) seen.push((level = stepLogLevel(level, 'up')));
  expect(seen).toEqual(['fatal', 'error', 'warn', 'info', 'debug', 'trace']);
  for (let i = 0; i < 6; i++) level = stepLogLevel(level, 'down');
  expect(level).toBe('fatal');
});
