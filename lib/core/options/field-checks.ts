import { PgQueueConfigError } from '../errors';
import { quote } from '../input-text';

// One check per kind of field. Each answers `fallback` (a value of DEFAULTS, ./defaults.ts) for a
// field left out, and throws PgQueueConfigError, saying what to use, for anything else that does
// not fit: null included, which a `value ?? fallback` would have taken for "left out".

export function int(where: string, value: unknown, fallback: number, min: number, max = 2 ** 31 - 1): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    const why =
      typeof value !== 'number'
        ? `it is ${value === null ? 'null' : `a ${typeof value}`}, not a number`
        : !Number.isFinite(value)
          ? 'it is not a finite number'
          : !Number.isInteger(value)
            ? 'it is not a whole number'
            : value < min
              ? `it is below ${min}`
              : `it is above ${max}`;
    throw new PgQueueConfigError(
      `Invalid ${where}: ${quote(value)} (${why}). Use a whole number from ${min} to ${max}, or leave it out ` +
        `for the default (${fallback}).`,
    );
  }
  return value;
}

export function bool(where: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') {
    throw new PgQueueConfigError(`Invalid ${where}: ${quote(value)}. Use true or false.`);
  }
  return value;
}

export function oneOf<T extends string>(where: string, value: unknown, allowed: readonly T[], fallback: T): T {
  if (value === undefined) return fallback;
  if (!allowed.includes(value as T)) {
    throw new PgQueueConfigError(
      `Invalid ${where}: ${JSON.stringify(value) ?? String(value)}. Use one of ${allowed.map((a) => `'${a}'`).join(', ')}, ` +
        `or leave it out for the default ('${fallback}').`,
    );
  }
  return value as T;
}
