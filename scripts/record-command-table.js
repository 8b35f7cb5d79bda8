// Records a Redis node's COMMAND reply as proxy/commands/fallback-table.json (the table used only
// when no back end answers COMMAND). Usage: node scripts/record-command-table.js [port]
const net = require('node:net');
const fs = require('node:fs');
const path = require('node:path');
const Parser = require('redis-parser');

const port = Number(process.argv[2] || 6379);
const sock = net.connect(port, '127.0.0.1');
const parser = new Parser({
  returnReply(reply) {
    // Keep what routing needs: name, arity, flags, first/last/step, (no ACL categories or tips), key specs, subcommands.
    const trim = (c) => [c[0], c[1], c[2], c[3], c[4], c[5], [], [], c[8] || [], (c[9] || []).map(trim)];
    const table = reply.map(trim).sort((a, b) => (a[0] < b[0] ? -1 : 1));
    fs.writeFileSync(path.join(__dirname, '..', 'proxy', 'commands', 'fallback-table.json'), JSON.stringify(table) + '\n');
    console.log(`recorded ${table.length} commands`);
    sock.end();
  },
  returnError(err) {
    console.error(err.message);
    process.exit(1);
  },
});
sock.on('data', (d) => parser.execute(d));
sock.write('*1\r\n$7\r\nCOMMAND\r\n');
