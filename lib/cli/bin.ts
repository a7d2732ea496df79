#!/usr/bin/env node
// `npx nestjs-pg-queue <command>` (package.json "bin"): the process around runCli (main.ts).
import { createInterface } from 'node:readline/promises';
import { runCli } from './main';

async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await rl.question(question)).trim());
  } finally {
    rl.close();
  }
}

runCli(process.argv.slice(2), {
  out: (t) => process.stdout.write(`${t}\n`),
  err: (t) => process.stderr.write(`${t}\n`),
  env: process.env,
  interactive: process.stdin.isTTY === true,
  confirm,
}).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`nestjs-pg-queue: ${String(err)}\n`);
    process.exitCode = 1;
  },
);
