// The proxy's users under ACL SETUSER (security/acl-user.ts), as ACL LIST writes them
// (security/acl-describe.ts), and ACL LOG's grouping (security/acl-log.ts). The byte-for-byte
// comparison with a real Redis is test/integration/acl.test.ts.
import { CommandTable } from '../../proxy/commands/table';
import { ClientAuth } from '../../proxy/security/auth';
import { userLine } from '../../proxy/security/acl-describe';
import { AclLog } from '../../proxy/security/acl-log';
import { ProxyUser } from '../../proxy/security/acl-user';
import { double } from '../../proxy/resp/encode';

const table = CommandTable.fallback();
const b = (...rules: string[]): Buffer[] => rules.map((r) => Buffer.from(r));

function line(auth: ClientAuth, name: string): string {
  return userLine(auth.user(name) as ProxyUser, table);
}

describe('ACL SETUSER', () => {
  test('a new user is off with no rule; a failed rule changes nothing', () => {
    const auth = new ClientAuth(undefined, { table, mode: 'cluster' });
    expect(auth.setUser('u', [], table)).toBeNull();
    expect(line(auth, 'u')).toBe('user u off resetchannels -@all');
    expect(auth.setUser('u', b('on', '+nosuch'), table)).toBe("ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL");
    expect(line(auth, 'u')).toBe('user u off resetchannels -@all');
    expect(auth.setUser('u', b('(~a +get)'), table)).toMatch(/^ERR Error in ACL SETUSER modifier '\(~a \+get\)': slotproxy does not support selectors/);
  });

  test('passwords: added once, removed, nopass and resetpass; the sign-in follows them', () => {
    const auth = new ClientAuth(undefined, { table, mode: 'cluster' });
    expect(auth.setUser('u', b('on', '>a', '>a', '>b', '<a'), table)).toBeNull();
    expect(auth.check(Buffer.from('u'), Buffer.from('a'))).toBe(false);
    expect(auth.check(Buffer.from('u'), Buffer.from('b'))).toBe(true);
    expect(auth.setUser('u', b('<a'), table)).toBe("ERR Error in ACL SETUSER modifier '<a': The password you are trying to remove from the user does not exist");
    expect(auth.setUser('u', b('nopass'), table)).toBeNull();
    expect(auth.check(Buffer.from('u'), Buffer.from('anything'))).toBe(true);
    expect(auth.setUser('u', b('off'), table)).toBeNull();
    expect(auth.check(Buffer.from('u'), Buffer.from('anything'))).toBe(false);
  });

  test('rules: permissions compiled at once; allcommands starts the list again', () => {
    const auth = new ClientAuth(undefined, { table, mode: 'cluster' });
    expect(auth.setUser('u', b('on', 'nopass', '~k*', '+@all', '-get', 'nocommands', '+set'), table)).toBeNull();
    expect(line(auth, 'u')).toBe('user u on nopass ~k* resetchannels -@all +set');
    const perms = auth.permissionsOf('u');
    expect(perms).not.toBeNull();
    expect(auth.setUser('u', b('allkeys', 'allchannels', 'allcommands'), table)).toBeNull();
    expect(auth.permissionsOf('u')).toBeNull(); // everything again: one null check per command
    expect(auth.delUser('u')).toBe(true);
    expect(auth.delUser('default')).toBe(false);
  });

  test('a config user reads back as Redis would write it', () => {
    const auth = new ClientAuth({ users: [{ name: 'app', password: 'pw', commands: '+@all -@admin', keys: ['~app:*'] }] }, { table, mode: 'cluster' });
    expect(line(auth, 'app')).toMatch(/^user app on #[0-9a-f]{64} ~app:\* &\* \+@all -@admin/);
    expect(line(auth, 'default')).toBe('user default on ~* &* +@all');
  });
});

describe('ACL LOG', () => {
  test('the same refusal within a minute counts into one entry, newest first', () => {
    const log = new AclLog();
    log.add('command', 'toplevel', 'flushall', 'u', 'id=1');
    log.add('key', 'toplevel', 'k', 'u', 'id=1');
    log.add('command', 'toplevel', 'flushall', 'u', 'id=2');
    const reply = log.reply(null, 2).toString();
    expect(reply.startsWith('*2\r\n*14\r\n$5\r\ncount\r\n:2\r\n$6\r\nreason\r\n$7\r\ncommand\r\n')).toBe(true);
    expect(reply).toContain('$4\r\nid=2\r\n');
    expect(log.reply(1, 3).toString()).toMatch(/^\*1\r\n%7\r\n/);
    log.reset();
    expect(log.reply(null, 2).toString()).toBe('*0\r\n');
  });

  test('ages are written as Redis writes a double (%.17g)', () => {
    expect(double(0.04, 2).toString()).toBe('$20\r\n0.040000000000000001\r\n');
    expect(double(0.113, 2).toString()).toBe('$5\r\n0.113\r\n');
    expect(double(0, 3).toString()).toBe(',0\r\n');
  });
});
