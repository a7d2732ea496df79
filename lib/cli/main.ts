import { PgQueueConfigError } from '../core/errors';
import { COMMON_FLAGS, parseFlags, UsageError, type Flags } from './args';
import { EXIT, type Command, type CommandRun } from './command';
import { CLEAN_COMMANDS } from './commands/clean';
import { DOCTOR_COMMANDS } from './commands/doctor';
import { JOBS_CHANGE_COMMANDS } from './commands/jobs-change';
import { JOBS_READ_COMMANDS } from './commands/jobs-read';
import { MIGRATE_COMMANDS } from './commands/migrate';
import { QUEUE_COMMANDS } from './commands/queues';
import { SCHEDULER_COMMANDS } from './commands/schedulers';
import { STATUS_COMMANDS } from './commands/status';
import { CliDatabase } from './database';
import { toJson, type CliIo } from './output';

/** Every command, in the order `--help` lists them. */
export const COMMANDS: readonly Command[] = [
  ...MIGRATE_COMMANDS,
  ...STATUS_COMMANDS,
  ...JOBS_READ_COMMANDS,
  ...JOBS_CHANGE_COMMANDS,
  ...QUEUE_COMMANDS,
  ...SCHEDULER_COMMANDS,
  ...CLEAN_COMMANDS,
  ...DOCTOR_COMMANDS,
];

const YES: Flags = { yes: { type: 'boolean', short: 'y', help: 'run without asking (required when stdin is not a terminal)' } };

function mainHelp(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  return [
    'Usage: nestjs-pg-queue <command> [flags]',
    '',
    'Commands:',
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    'Every command takes --url (default $DATABASE_URL), --schema (default pgqueue), --json and --help.',
    'Exit codes: 0 done, 1 an error (or a finding, for doctor), 2 bad usage.',
  ].join('\n');
}

function commandHelp(c: Command, flags: Flags): string {
  const rows = Object.entries(flags).map(([k, f]) => [
    `${f.short ? `-${f.short}, ` : ''}--${k}${f.arg ? ` ${f.arg}` : ''}`,
    f.help,
  ]);
  const width = Math.max(...rows.map(([a]) => a.length));
  return [
    `Usage: nestjs-pg-queue ${c.usage}`,
    '',
    c.summary,
    ...(c.details ? ['', c.details] : []),
    '',
    'Flags:',
    ...rows.map(([a, b]) => `  ${a.padEnd(width)}  ${b}`),
  ].join('\n');
}

/** Common flags that take a value: skipped with it when they come before the command's name. */
const VALUED = new Set(['--url', '--schema']);

/**
 * The command `argv` names, and its arguments: the common flags may come first
 * (`nestjs-pg-queue --url ... status`), so they are skipped to find the name and kept as arguments.
 */
function findCommand(argv: readonly string[]): { command: Command; rest: string[] } | { unknown: string } {
  let i = 0;
  while (i < argv.length && argv[i].startsWith('-')) i += VALUED.has(argv[i]) ? 2 : 1;
  const before = argv.slice(0, i);
  for (const words of [2, 1]) {
    const name = argv.slice(i, i + words).join(' ');
    const command = COMMANDS.find((c) => c.name === name);
    if (command) return { command, rest: [...before, ...argv.slice(i + words)] };
  }
  const group = argv[i] === 'jobs' || argv[i] === 'schedulers';
  return { unknown: group && argv[i + 1] !== undefined ? `${argv[i]} ${argv[i + 1]}` : (argv[i] ?? '') };
}

/**
 * Runs the CLI on `argv` (the arguments after the program's name) and answers the exit code.
 * Never throws: every error is written to `io.err` (and, with --json, as `{ "error" }` on `io.out`).
 */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const json = argv.includes('--json');
  const fail = (code: number, message: string): number => {
    io.err(`nestjs-pg-queue: ${message}`);
    if (json) io.out(toJson({ error: message, exitCode: code }));
    return code;
  };
  if (argv.length === 0 || argv[0] === 'help' || argv[0] === '--help' || argv[0] === '-h') {
    (argv.length === 0 ? io.err : io.out)(mainHelp());
    return argv.length === 0 ? EXIT.usage : EXIT.ok;
  }
  const found = findCommand(argv);
  if ('unknown' in found) {
    const names = COMMANDS.map((c) => c.name);
    if (found.unknown === 'jobs' || found.unknown === 'schedulers') {
      const group = found.unknown;
      const subs = names.filter((n) => n.startsWith(`${group} `)).map((n) => n.slice(group.length + 1));
      return fail(EXIT.usage, `\`${group}\` needs one of ${subs.join(', ')}: nestjs-pg-queue ${group} list --queue <name>.`);
    }
    const what = found.unknown === '' ? 'no command' : `unknown command "${found.unknown}"`;
    return fail(EXIT.usage, `${what}. Commands: ${names.join(', ')}. Run nestjs-pg-queue --help.`);
  }
  const { command, rest } = found;
  const flags: Flags = { ...command.flags, ...(command.destructive ? YES : {}), ...COMMON_FLAGS };
  let db: CliDatabase | null = null;
  try {
    const { values, positionals } = parseFlags(command.name, rest, flags);
    if (values.help) {
      io.out(commandHelp(command, flags));
      return EXIT.ok;
    }
    const p = command.positionals ?? { min: 0, max: 0, name: '' };
    if (positionals.length < p.min || positionals.length > p.max) {
      const what = p.max === 0 ? 'no arguments' : p.min === p.max ? `${p.min} ${p.name}` : `${p.min} to ${p.max} ${p.name}`;
      throw new UsageError(
        `\`${command.name}\` takes ${what}, not ${positionals.length === 0 ? 'none' : JSON.stringify(positionals.join(' '))}. Usage: nestjs-pg-queue ${command.usage}`,
      );
    }
    for (const [k, f] of Object.entries(flags)) {
      if (f.required && (values[k] === undefined || values[k] === '')) {
        throw new UsageError(`\`${command.name}\` needs --${k}. Usage: nestjs-pg-queue ${command.usage}`);
      }
    }
    db = await CliDatabase.open(
      typeof values.url === 'string' ? values.url : io.env.DATABASE_URL,
      typeof values.schema === 'string' ? values.schema : undefined,
      (m) => io.err(m),
    );
    if (command.needsCurrentSchema !== false) db.requireCurrent();
    const run: CommandRun = {
      values,
      positionals,
      db,
      io,
      json: values.json === true,
      print: (doc, human) => io.out(values.json === true ? toJson(doc) : human()),
    };
    if (command.destructive && values.yes !== true) {
      const what = command.confirmText?.(run) ?? `Run ${command.name}?`;
      if (!io.interactive) {
        throw new UsageError(`${what} Refused without --yes: stdin is not a terminal, so there is no one to ask. Add --yes.`);
      }
      if (!(await io.confirm(`${what} [y/N] `))) return fail(EXIT.failed, 'not confirmed; nothing was changed.');
    }
    return await command.run(run);
  } catch (err) {
    if (err instanceof UsageError || err instanceof PgQueueConfigError) return fail(EXIT.usage, err.message);
    return fail(EXIT.failed, (err as Error).message ?? String(err));
  } finally {
    await db?.close().catch(() => undefined);
  }
}
