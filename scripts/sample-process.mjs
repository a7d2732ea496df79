// Runs `npm start` (or scripts/start-sample.mjs) as a terminal would, for the checks that drive it
// (scripts/check-quick-start.mjs, scripts/check-private-clone.mjs): in its own process group, so
// that `interrupt()` is a real Ctrl-C (SIGINT to the whole group, as a terminal sends it).

import { spawn } from 'node:child_process';

// Nest colours its log even when stdout is not a terminal.
const ANSI_COLOUR = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g');
export const stripAnsi = (text) => text.replace(ANSI_COLOUR, '');

/**
 * @param {string} command
 * @param {string[]} args
 * @param {{ cwd: string, env: NodeJS.ProcessEnv, echo?: boolean }} opts
 */
export function startInGroup(command, args, { cwd, env, echo = false }) {
  const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let output = '';
  const waiters = new Set();
  const onData = (chunk) => {
    const text = chunk.toString('utf8');
    output += text;
    if (echo) process.stdout.write(text);
    for (const w of waiters) w();
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const exited = new Promise((resolve) => {
    child.on('error', (err) => resolve({ code: null, signal: null, error: err }));
    child.on('close', (code, signal) => resolve({ code, signal }));
  });
  let done = null;
  exited.then((r) => {
    done = r;
    for (const w of waiters) w();
  });

  const describe = () => `${command} ${args.join(' ')}`;
  const text = () => stripAnsi(output);

  return {
    text,
    exited,
    /** Resolves with the match of `pattern` in the output; rejects at the deadline or if the process ends first. */
    waitFor(pattern, deadlineMs) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const m = text().match(pattern);
          if (m) finish(() => resolve(m));
          else if (done)
            finish(() =>
              reject(
                new Error(
                  `${describe()} ended (${done.code ?? done.signal ?? done.error?.message}) before printing ${pattern}:\n${text()}`,
                ),
              ),
            );
        };
        const timer = setTimeout(
          () => finish(() => reject(new Error(`${describe()}: no ${pattern} within ${deadlineMs} ms:\n${text()}`))),
          deadlineMs,
        );
        const finish = (fn) => {
          clearTimeout(timer);
          waiters.delete(check);
          fn();
        };
        waiters.add(check);
        check();
      });
    },
    /** Ctrl-C: SIGINT to the process group; resolves with the exit and the output printed after the signal. */
    async interrupt(deadlineMs) {
      const before = text().length;
      if (!done) process.kill(-child.pid, 'SIGINT');
      let timer;
      const result = await Promise.race([
        exited,
        new Promise((resolve) => (timer = setTimeout(() => resolve(null), deadlineMs))),
      ]);
      clearTimeout(timer);
      if (!result) {
        this.kill();
        throw new Error(`${describe()} still running ${deadlineMs} ms after SIGINT (killed it):\n${text()}`);
      }
      return { ...result, after: text().slice(before) };
    },
    /** SIGKILL to the whole group (clean-up after a failure). */
    kill() {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    },
  };
}
