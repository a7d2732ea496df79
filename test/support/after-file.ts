/**
 * Runs `fn` once the test file's every afterAll has run (test/support/after-file-setup.ts, a
 * jest setup file, runs them from the root block's afterAll; a setup file shares the test file's
 * module registry, so both see this one list). jest-circus runs one block's afterAll hooks in the
 * order they were declared, so a drop declared at the top of a describe would come before the
 * file's own afterAll that closes its app: the app then shut down against a dropped database,
 * waited out its bounded shutdown waits (10 s in flows.int-spec) and left handles that kept jest
 * from exiting.
 */
export function afterFile(fn: () => Promise<void>): void {
  hooks.push(fn);
}

/** Runs the hooks afterFile() registered, last-registered first, like a stack. */
export async function runAfterFileHooks(): Promise<void> {
  while (hooks.length) await hooks.pop()!();
}

const hooks: (() => Promise<void>)[] = [];
