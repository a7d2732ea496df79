import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { assertBuilt } from '../support/built';
import { useTestDatabase } from '../support/database';

// A missing optional peer is named, with the command that installs it. Each case runs the built
// package in a child process whose preload makes exactly the given packages unresolvable, as if
// they were not installed (test/fixtures/unresolvable-modules.js).

const fixtures = path.join(__dirname, '..', 'fixtures');

interface Outcome {
  ok: boolean;
  name?: string;
  message?: string;
  peer?: string;
  causeCode?: string;
  causeMessage?: string;
}

async function load(unresolvable: string[], ...args: string[]): Promise<Outcome> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--require', path.join(fixtures, 'unresolvable-modules.js'), path.join(fixtures, 'load-entry-point.js'), ...args],
    { env: { ...process.env, PGQ_UNRESOLVABLE: unresolvable.join(',') }, timeout: 60_000 },
  );
  const line = stdout.trim().split('\n').pop() ?? '';
  return JSON.parse(line) as Outcome;
}

describe('missing optional peers', () => {
  beforeAll(() => assertBuilt());

  it('nestjs-pg-queue/metrics without prom-client says to npm install prom-client', async () => {
    const out = await load(['prom-client'], 'metrics');
    expect(out).toMatchObject({ ok: false, name: 'PgQueueMissingPeerError', peer: 'prom-client', causeCode: 'MODULE_NOT_FOUND' });
    expect(out.message).toContain('nestjs-pg-queue/metrics needs the package "prom-client"');
    expect(out.message).toContain('npm install prom-client');
    expect(out.causeMessage).toContain("Cannot find module 'prom-client'");
  });

  it('nestjs-pg-queue/health without @nestjs/terminus says to npm install @nestjs/terminus', async () => {
    const out = await load(['@nestjs/terminus'], 'health');
    expect(out).toMatchObject({
      ok: false,
      name: 'PgQueueMissingPeerError',
      peer: '@nestjs/terminus',
      causeCode: 'MODULE_NOT_FOUND',
    });
    expect(out.message).toContain('nestjs-pg-queue/health needs the package "@nestjs/terminus"');
    expect(out.message).toContain('npm install @nestjs/terminus');
  });

  it('the entry points load when their peers are there (the preload blocks nothing else)', async () => {
    expect(await load(['an-unrelated-package'], 'metrics')).toEqual({ ok: true });
    expect(await load(['an-unrelated-package'], 'health')).toEqual({ ok: true });
  });

  describe('@opentelemetry/api, looked up at the first enqueue', () => {
    const t = useTestDatabase();

    it('without it a job is enqueued, reports progress and completes; the tracing code finds no API', async () => {
      expect(await load(['@opentelemetry/api'], 'run', t.db.url)).toEqual({
        ok: true,
        state: 'completed',
        result: 'ran',
        progress: 7,
        api: false,
      });
    });

    it('with it installed (and no SDK registered) the same job runs the same way', async () => {
      expect(await load(['an-unrelated-package'], 'run', t.db.url)).toEqual({
        ok: true,
        state: 'completed',
        result: 'ran',
        progress: 7,
        api: true,
      });
    });
  });

  describe('@nestjs-cls/transactional, looked up at bootstrap', () => {
    const t = useTestDatabase();

    it('boots without it: the peer is optional', async () => {
      expect(await load(['@nestjs-cls/transactional'], 'boot', t.db.url)).toEqual({ ok: true });
    });

    it('installed but not used by the app: not loaded, so nestjs-cls never turns on promise hooks for the process', async () => {
      // nestjs-cls calls AsyncLocalStorage.enterWith() as it loads: every promise of every job
      // then pays the hooks (issue 30). An app that uses @Transactional() has loaded it itself.
      expect(await load([], 'boot-loaded', t.db.url)).toEqual({ ok: true, loaded: [] });
    });

    it('installed without its own peer nestjs-cls fails the boot, saying to npm install nestjs-cls', async () => {
      const out = await load(['nestjs-cls'], 'boot', t.db.url);
      expect(out).toMatchObject({
        ok: false,
        name: 'PgQueueMissingPeerError',
        peer: 'nestjs-cls',
        causeCode: 'MODULE_NOT_FOUND',
      });
      expect(out.message).toContain('@nestjs-cls/transactional (installed in this app) needs the package "nestjs-cls"');
      expect(out.message).toContain('npm install nestjs-cls');
    });
  });
});
