/** The message of the error reply `promise` is rejected with; fails the test if it resolves. */
export async function errorOf(promise: Promise<unknown>): Promise<string> {
  let value: unknown;
  try {
    value = await promise;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
  throw new Error(`expected an error reply, got ${JSON.stringify(value)}`);
}
