import { runCli } from '../../lib/cli/main';

/** What one in-process run of the CLI wrote, and its exit code. */
export interface CliResult {
  code: number;
  out: string;
  err: string;
  /** stdout parsed as JSON (for --json runs). */
  json<T = Record<string, unknown>>(): T;
}

/**
 * Runs `nestjs-pg-queue <argv>` in this process (lib/cli/main.ts's runCli, what bin.ts runs) with
 * DATABASE_URL `url`, stdin not a terminal unless `answer` is given (then the confirmation gets it).
 */
export async function cli(url: string | undefined, argv: readonly string[], answer?: boolean): Promise<CliResult> {
  const out: string[] = [];
  const err: string[] = [];
  const asked: string[] = [];
  const code = await runCli(argv, {
    out: (t) => out.push(t),
    err: (t) => err.push(t),
    env: url === undefined ? {} : { DATABASE_URL: url },
    interactive: answer !== undefined,
    confirm: async (q) => {
      asked.push(q);
      return answer === true;
    },
  });
  const stdout = out.join('\n');
  return {
    code,
    out: stdout,
    err: [...asked, ...err].join('\n'),
    json: <T>() => JSON.parse(stdout) as T,
  };
}
