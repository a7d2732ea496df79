import { parseArgs } from 'node:util';

/** Bad command-line input: the message says what to write instead; the CLI exits with 2. */
export class UsageError extends Error {}

/** One flag of a command. */
export interface FlagSpec {
  readonly type: 'string' | 'boolean';
  /** May be given more than once (the values are collected). */
  readonly multiple?: boolean;
  readonly short?: string;
  /** The value's placeholder in --help (`<queue>`). */
  readonly arg?: string;
  readonly help: string;
  /** Must be given: checked before the CLI connects. @default false */
  readonly required?: boolean;
}

export type Flags = Record<string, FlagSpec>;

/** `--queue <name>`, required: the flag of every command that acts on one queue. */
export const QUEUE = { queue: { type: 'string', arg: '<name>', help: 'the queue (required)', required: true } } as const;
export type FlagValues = Record<string, string | boolean | string[] | undefined>;

/** The flags every command takes. */
export const COMMON_FLAGS: Flags = {
  url: { type: 'string', arg: '<url>', help: 'PostgreSQL connection string (default: $DATABASE_URL)' },
  schema: { type: 'string', arg: '<name>', help: "the queue's schema, as the module's `schema` option (default: pgqueue)" },
  json: { type: 'boolean', help: 'machine-readable output on stdout (one JSON document)' },
  help: { type: 'boolean', short: 'h', help: 'this help' },
};

/**
 * Parses `argv` against `flags` (node:util parseArgs, strict): an unknown flag, a flag without
 * its value or a value given to a switch is a UsageError naming the flag.
 */
export function parseFlags(
  command: string,
  argv: readonly string[],
  flags: Flags,
): { values: FlagValues; positionals: string[] } {
  try {
    const { values, positionals } = parseArgs({
      args: [...argv],
      options: Object.fromEntries(
        Object.entries(flags).map(([k, f]) => [
          k,
          { type: f.type, ...(f.multiple ? { multiple: true } : {}), ...(f.short ? { short: f.short } : {}) },
        ]),
      ),
      allowPositionals: true,
      strict: true,
    });
    return { values: values as FlagValues, positionals };
  } catch (err) {
    const e = err as { code?: string; message: string };
    const flag = /'(-[^']*)'/.exec(e.message)?.[1];
    const help = `Run \`nestjs-pg-queue ${command} --help\` for its flags.`;
    if (e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION')
      throw new UsageError(`Unknown flag ${flag ?? e.message} for \`${command}\`. ${help}`);
    if (e.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE')
      throw new UsageError(`Flag ${flag ?? ''} of \`${command}\`: ${e.message} ${help}`);
    throw new UsageError(`${e.message} ${help}`);
  }
}

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** `90s`, `15m`, `1d`, `2w`, `500ms` or a bare number of ms, as ms. */
export function parseDuration(flag: string, text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d|w)?$/.exec(text.trim());
  if (!m) throw new UsageError(`--${flag} ${JSON.stringify(text)}: write a duration such as 500ms, 90s, 15m, 12h, 1d or 2w.`);
  const ms = Math.round(Number(m[1]) * UNITS[m[2] ?? 'ms']);
  if (!Number.isSafeInteger(ms)) throw new UsageError(`--${flag} ${JSON.stringify(text)} is too large.`);
  return ms;
}

/** A whole number of at least `min`. */
export function parseCount(flag: string, text: string, min = 1): number {
  const n = /^\d+$/.test(text.trim()) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n) || n < min)
    throw new UsageError(`--${flag} ${JSON.stringify(text)}: write a whole number of at least ${min}.`);
  return n;
}

/** The value of a string flag, or undefined. */
export function str(values: FlagValues, key: string): string | undefined {
  const v = values[key];
  return typeof v === 'string' ? v : undefined;
}

/** The value of a string flag that must be given. */
export function required(command: string, values: FlagValues, key: string): string {
  const v = str(values, key);
  if (v === undefined || v === '')
    throw new UsageError(`\`${command}\` needs --${key}. Run \`nestjs-pg-queue ${command} --help\`.`);
  return v;
}

/** The values of a flag that may repeat, each also split on commas (`--state failed,cancelled`). */
export function list(values: FlagValues, key: string): string[] {
  const v = values[key];
  const all = Array.isArray(v) ? v : typeof v === 'string' ? [v] : [];
  return all
    .flatMap((x) => x.split(','))
    .map((x) => x.trim())
    .filter((x) => x !== '');
}
