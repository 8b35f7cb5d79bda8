// Socket failures worded as the OS words them (strerror), as twemproxy's error replies are.
import net from 'node:net';
import { connectTimeoutText, socketErrorText } from '../../proxy/backend/socket-error';
import { nodeUnreachable } from '../../proxy/resp/errors';

function errnoError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

test.each([
  ['ECONNREFUSED', 'Connection refused'],
  ['ETIMEDOUT', 'Connection timed out'],
  ['EHOSTUNREACH', 'No route to host'],
  ['ENETUNREACH', 'Network is unreachable'],
  ['ECONNRESET', 'Connection reset by peer'],
  ['EPIPE', 'Broken pipe'],
  ['ECONNABORTED', 'Software caused connection abort'],
  ['ENOTFOUND', 'Name or service not known'],
])('%s reads %s', (code, text) => {
  expect(socketErrorText(errnoError(code, `connect ${code} 10.0.0.1:6379`))).toBe(text);
});

test("an error without a known code keeps Node's message", () => {
  expect(socketErrorText(errnoError('ERR_SSL_WRONG_VERSION_NUMBER', 'wrong version number'))).toBe('wrong version number');
  expect(socketErrorText(new Error('self-signed certificate'))).toBe('self-signed certificate');
  // A name that is a property of every object is not a code of the table.
  expect(socketErrorText(errnoError('toString', 'odd'))).toBe('odd');
});

test('a connect timeout reads as ETIMEDOUT, with the limit', () => {
  expect(connectTimeoutText(2000)).toBe('Connection timed out: no connection within 2000 ms');
});

test("a refused connection, as a client sees it: slotproxy's prefix, the node, the OS's reason", async () => {
  // A port that was just free: nothing listens on it, so the kernel refuses the connection.
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  const err = await new Promise<Error>((resolve) => net.connect(port, '127.0.0.1').on('error', resolve));
  expect(nodeUnreachable(`127.0.0.1:${port}`, socketErrorText(err))).toBe(`ERR slotproxy: node 127.0.0.1:${port} unreachable (Connection refused)`);
});
