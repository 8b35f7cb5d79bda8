// ClientAuth: which credentials pass, and that a failure never signs a session out.

import { ClientAuth, authenticate } from '../../proxy/security/auth';
import { ConfigError, parseConfig } from '../../config/load';

const b = (s: string): Buffer => Buffer.from(s);

describe('ClientAuth.check', () => {
  const auth = new ClientAuth({ password: 'pw', users: [{ name: 'app', password: 'app-pw' }] });

  test.each([
    [null, 'pw', true],
    ['default', 'pw', true],
    ['app', 'app-pw', true],
    [null, 'app-pw', false],
    ['app', 'pw', false],
    ['App', 'app-pw', false], // user names are case-sensitive, as in Redis
    ['ghost', 'pw', false],
    [null, '', false],
    [null, 'pw\0', false],
    [null, 'p', false],
    [null, 'pw'.repeat(1000), false],
  ])('user %j password %j -> %j', (user, password, ok) => {
    expect(auth.check(user === null ? null : b(user), b(password))).toBe(ok);
  });

  test('with only users, AUTH <password> (the default user) is refused', () => {
    const usersOnly = new ClientAuth({ users: [{ name: 'app', password: 'x' }] });
    expect(usersOnly.check(null, b('x'))).toBe(false);
    expect(usersOnly.check(b('app'), b('x'))).toBe(true);
  });
});

describe('CONFIG SET requirepass', () => {
  test('sets the default user\'s one password; "" makes it nopass, and new connections need no AUTH', () => {
    const auth = new ClientAuth(undefined);
    expect(auth.requiresAuth).toBe(false);
    auth.setRequirepass('temp');
    expect(auth.requiresAuth).toBe(true);
    expect(auth.requirepass).toBe('temp');
    expect(auth.check(null, b('temp'))).toBe(true);
    expect(auth.check(null, b('other'))).toBe(false);
    auth.setRequirepass('');
    expect(auth.requiresAuth).toBe(false);
    expect(auth.defaultNopass).toBe(true);
    expect(auth.check(b('default'), b('anything'))).toBe(true);
  });

  test('an auth section with users only: the default user has no password until one is set', () => {
    const auth = new ClientAuth({ users: [{ name: 'app', password: 'x' }] });
    expect(auth.requiresAuth).toBe(true);
    expect(auth.defaultNopass).toBe(false);
    expect(auth.check(null, b(''))).toBe(false);
    auth.setRequirepass('pw');
    expect(auth.check(null, b('pw'))).toBe(true);
    expect(auth.check(b('app'), b('x'))).toBe(true);
  });
});

describe('authenticate', () => {
  test('counts failures; a failure leaves an authenticated session authenticated', () => {
    const auth = new ClientAuth({ password: 'pw' });
    const counters = { authFailures: 0 };
    const session = { authenticated: false, user: 'default' };
    expect(authenticate(auth, counters, session, null, b('no'))).toBe(false);
    expect(session.authenticated).toBe(false);
    expect(authenticate(auth, counters, session, null, b('pw'))).toBe(true);
    expect(authenticate(auth, counters, session, null, b('no'))).toBe(false);
    expect(session).toEqual({ authenticated: true, user: 'default' });
    expect(counters.authFailures).toBe(2);
  });

  test('without an auth section the default user takes any password and no other user exists', () => {
    const counters = { authFailures: 0 };
    const session = { authenticated: true, user: 'default' };
    const open = new ClientAuth(undefined);
    expect(open.requiresAuth).toBe(false);
    expect(authenticate(open, counters, session, b('default'), b('anything'))).toBe(true);
    expect(authenticate(open, counters, session, b('app'), b('anything'))).toBe(false);
  });
});

describe('config errors about passwords', () => {
  test.each([
    [{ auth: { password: 123456 } }, 'auth.password: expected a string (value not shown)'],
    [{ auth: { users: [{ name: 'a', password: 987654 }] } }, 'auth.users[0].password: expected a string (value not shown)'],
    [{ backend: { password: 555111 } }, 'backend.password: expected a string (value not shown)'],
  ])('%j never quotes the value', (extra, problem) => {
    let problems: string[] = [];
    try {
      parseConfig({ cluster: { seeds: ['127.0.0.1:7001'] }, ...extra });
    } catch (err) {
      if (err instanceof ConfigError) problems = err.problems;
    }
    expect(problems).toEqual([problem]);
  });
});
