import { PgQueueConfigError } from './errors';
import { nameProblem, quote } from './input-text';

const SCHEMA_RE = /^[a-z_][a-z0-9_]{0,47}$/;
const QUEUE_RE = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$/;

/** The first character of `s` that `allowed` refuses, said for a message (`s` is already storable text). */
function badCharacter(s: string, allowed: RegExp): string {
  let i = 0;
  for (const c of s) {
    if (!allowed.test(c)) return `character ${quote(c)} at index ${i} is not allowed`;
    i += c.length;
  }
  return 'it is not allowed';
}

/** Throws unless `schema` is a plain lower-case identifier (it is also always quoted in SQL). */
export function validateSchemaName(schema: unknown): string {
  if (typeof schema !== 'string' || !SCHEMA_RE.test(schema)) {
    const why =
      nameProblem(schema, 48) ??
      (/^[0-9]/.test(schema as string) ? 'it starts with a digit' : badCharacter(schema as string, /[a-z0-9_]/));
    throw new PgQueueConfigError(
      `Invalid schema ${quote(schema)}: ${why}. Use 1-48 characters of lower-case letters, digits ` +
        `and "_", not starting with a digit (for example "pgqueue").`,
    );
  }
  return schema;
}

/** Throws unless `name` is a valid queue name. */
export function validateQueueName(name: unknown): string {
  if (typeof name !== 'string' || !QUEUE_RE.test(name)) {
    const why =
      nameProblem(name, 100) ??
      (/^[_.:-]/.test(name as string)
        ? `it starts with ${quote((name as string)[0])}`
        : badCharacter(name as string, /[A-Za-z0-9_.:-]/));
    throw new PgQueueConfigError(
      `Invalid queue name ${quote(name)}: ${why}. Use 1-100 characters of letters, digits, "_", "-", ` +
        `"." or ":", starting with a letter or digit (for example "email").`,
    );
  }
  return name;
}

const CONNECTION_RE = /^[A-Za-z][A-Za-z0-9_-]{0,62}$/;

/** Throws unless `name` is a valid connection name (a key of `forRoot({ connections })`). */
export function validateConnectionName(name: unknown, where = 'connection name'): string {
  if (typeof name !== 'string' || !CONNECTION_RE.test(name)) {
    throw new PgQueueConfigError(
      `Invalid ${where} ${quote(name)}: use 1-63 letters, digits, "_" or "-", starting with a letter (for example "bulk").`,
    );
  }
  return name;
}

/**
 * Throws unless `name` is a valid job name: 1 to 200 characters PostgreSQL stores as given (no
 * NUL; no lone surrogate, which a text column would store as U+FFFD, so no handler would match).
 */
export function validateJobName(name: unknown): string {
  const why = nameProblem(name, 200);
  if (why)
    throw new PgQueueConfigError(`Invalid job name ${quote(name)}: ${why}. Use a non-empty string of at most 200 characters.`);
  return name as string;
}

/** True for a string that can be a job id (a positive bigint); anything else matches no job. */
export function isJobId(id: string): boolean {
  return /^\d{1,19}$/.test(id);
}
