// CommandInfo.traits: the flags the request path reads as bits instead of Set lookups, and the
// script-call names it looks up only when a command's name says it may be one.
import { BLOCKING, CommandTable, READONLY, SCRIPT_NAMED } from '../../proxy/commands/table';
import { SCRIPT_CALLS } from '../../proxy/dispatch/script-call';
import { WAIT_FOR_SWITCH_CARRY } from '../../proxy/migration/carry';

const table = CommandTable.fallback();

describe('CommandInfo.traits', () => {
  test('READONLY and BLOCKING are set exactly when the flags are, for every command and subcommand', () => {
    let checked = 0;
    for (const info of table.all()) {
      expect([info.name, (info.traits & READONLY) !== 0]).toEqual([info.name, info.flags.has('readonly')]);
      expect([info.name, (info.traits & BLOCKING) !== 0]).toEqual([info.name, info.flags.has('blocking')]);
      checked++;
    }
    expect(checked).toBeGreaterThan(300);
    expect(table.get('get')?.traits).toBe(READONLY);
    expect(table.get('blpop')?.traits).toBe(BLOCKING);
    expect(table.get('set')?.traits).toBe(0);
  });

  test('every script call and every command held for a phase switch is SCRIPT_NAMED', () => {
    const names = [...SCRIPT_CALLS.keys(), ...WAIT_FOR_SWITCH_CARRY];
    expect(names.length).toBeGreaterThan(5);
    for (const name of names) expect([name, (table.get(name)?.traits ?? 0) & SCRIPT_NAMED]).toEqual([name, SCRIPT_NAMED]);
  });
});
