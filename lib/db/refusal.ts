/**
 * The database refused the values, not the connection: a data exception (class 22, e.g. an
 * interval or timestamp out of range), an integrity violation (23), or a program limit (54).
 * Writing the same rows again would fail again. Anything else (no SQLSTATE: the socket; 08
 * connection, 57 shutdown, 53 resources, 40 serialization) may pass on a retry.
 */
export function isRefusal(err: Error): boolean {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && /^(22|23|54)[0-9A-Z]{3}$/.test(code);
}
