import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { BrowserContext } from 'playwright-core';

/** Debian's Chromium: the one browser these tests drive (playwright-core downloads none). */
export const CHROMIUM = process.env.PGQUEUE_CHROMIUM ?? '/usr/bin/chromium';

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-quic',
];

export interface Browser {
  readonly context: BrowserContext;
  close(): Promise<void>;
}

/**
 * Chromium with a fresh profile in a temp dir (removed on close). Throws, never skips, when the
 * browser is missing: the browser tests are part of `npm test`.
 */
export async function launchChromium(viewport = { width: 1280, height: 900 }): Promise<Browser> {
  if (!fs.existsSync(CHROMIUM)) {
    throw new Error(
      `No Chromium at ${CHROMIUM}: the dashboard's browser tests need it. Install it with \`apt-get install chromium\` ` +
        '(.ci/run does, when it is missing), or point PGQUEUE_CHROMIUM at a Chromium binary.',
    );
  }
  const { chromium } = await import('playwright-core');
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'pgq-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport,
    locale: 'en-US',
    timezoneId: 'UTC',
  });
  return {
    context,
    async close() {
      await context.close();
      fs.rmSync(profile, { recursive: true, force: true });
    },
  };
}
