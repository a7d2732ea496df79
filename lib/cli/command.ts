import type { FlagValues, Flags } from './args';
import type { CliDatabase } from './database';
import type { CliIo } from './output';

/** Exit codes: 0 done (and nothing to report), 1 an error or a finding, 2 bad usage. */
export const EXIT = { ok: 0, failed: 1, usage: 2 } as const;

/** What a command's run gets: the parsed flags, the database, and where to write. */
export interface CommandRun {
  readonly values: FlagValues;
  readonly positionals: readonly string[];
  readonly db: CliDatabase;
  readonly io: CliIo;
  readonly json: boolean;
  /** Writes the command's result: `json` as one document with --json, else `human()`'s text. */
  print(json: unknown, human: () => string): void;
}

/** One command of the CLI (`status`, `jobs list`, ...): its flags, its help, and what it does. */
export interface Command {
  /** As typed: `status`, `jobs list`. */
  readonly name: string;
  /** One line, for the command list. */
  readonly summary: string;
  /** The synopsis after `nestjs-pg-queue `. */
  readonly usage: string;
  /** More help: what it does, exit codes, examples. */
  readonly details?: string;
  /** Its own flags (the common ones are added). */
  readonly flags: Flags;
  /** Positional arguments: how many at least and at most. @default none */
  readonly positionals?: { readonly min: number; readonly max: number; readonly name: string };
  /** Removes or cancels jobs: needs --yes, or a yes on a terminal. */
  readonly destructive?: boolean;
  /** Runs on a schema at the current version (every command but migrate and doctor). @default true */
  readonly needsCurrentSchema?: boolean;
  /** What a destructive run is about to do, for the confirmation. */
  confirmText?(run: CommandRun): string;
  run(run: CommandRun): Promise<number>;
}
