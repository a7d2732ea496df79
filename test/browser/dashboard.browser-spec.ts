import 'reflect-metadata';
import type { INestApplication } from '@nestjs/common';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { AddressInfo } from 'node:net';
import { Client } from 'pg';
import type { Page } from 'playwright-core';
import { assertBuilt } from '../support/built';
import { createTestDatabase, waitFor, type TestDatabase } from '../support/database';
import { launchChromium, type Browser } from './browser';

// The built package, as an app installs it: the pages and their bundle are served from
// dist/dashboard/assets, which `npm run build` fills (lib/ has only their sources).
assertBuilt();
const pgq = require('../../dist') as typeof import('../../lib');
const dash = require('../../dist/dashboard') as typeof import('../../lib/dashboard');

const XSS = '<img src=x onerror=alert(1)>';
const COOKIE = 'pgq_test_user';
const WAIT_MS = 20_000;

/**
 * Handlers whose outcome the test steers: `flaky` throws its payload's note while `failing`, and
 * otherwise completes once `gate` resolves.
 */
const behaviour: { failing: boolean; gate: Promise<void> } = { failing: true, gate: Promise.resolve() };

@pgq.Processor('work')
class WorkProcessor {
  @pgq.Process('flaky')
  async flaky(job: {
    payload: { note: string };
    attempt: number;
    updateProgress(v: number): Promise<void>;
    log(line: string): void;
  }) {
    job.log(`attempt ${job.attempt}: ${job.payload.note}`);
    if (behaviour.failing) throw new Error(job.payload.note);
    await job.updateProgress(60);
    await behaviour.gate;
    return { ok: true, note: job.payload.note };
  }
}

@pgq.Processor('idle')
class IdleProcessor {
  @pgq.Process('report')
  report() {
    return 'done';
  }
}

/** An app on `url` with the queue module and the dashboard at /queues, listening on a free port. */
async function startApp(url: string, dashboard: Parameters<typeof dash.PgQueueDashboardModule.register>[0], workers: boolean) {
  @Module({
    imports: [
      pgq.PgQueueModule.forRoot({ connection: url, workers, pollIntervalMs: 200, heartbeatIntervalMs: 500 }),
      pgq.PgQueueModule.registerQueue({ name: 'work', defaultJobOptions: { attempts: 1 } }, { name: 'idle' }),
      dash.PgQueueDashboardModule.register(dashboard),
    ],
    providers: workers ? [WorkProcessor, IdleProcessor] : [],
  })
  class BrowserTestModule {}
  const app = await NestFactory.create(BrowserTestModule, {
    logger: process.env.PGQUEUE_TEST_LOGS ? undefined : false,
    abortOnError: false,
  });
  await app.listen(0, '127.0.0.1');
  const base = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
  return { app, base, dashboard: `${base}/queues` };
}

/** Only requests carrying the test's cookie may use the dashboard. */
const authorize = (req: { headers: Readonly<Record<string, string | string[] | undefined>> }): boolean =>
  new RegExp(`(?:^|;\\s*)${COOKIE}=ops(?:;|$)`).test(String(req.headers.cookie ?? ''));

describe('dashboard in a real browser (Chromium, the built package, real PostgreSQL)', () => {
  let db: TestDatabase;
  let sql: Client;
  let main: { app: INestApplication; base: string; dashboard: string };
  let readOnly: { app: INestApplication; base: string; dashboard: string };
  let browser: Browser;
  let page: Page;
  const dialogs: string[] = [];
  const ids: { disk: string; xss: string } = { disk: '', xss: '' };

  const jobState = async (id: string): Promise<string | null> => {
    const r = await sql.query<{ state: string }>(
      `SELECT state::text FROM pgqueue.jobs WHERE id = $1 UNION ALL SELECT state::text FROM pgqueue.job_history WHERE id = $1`,
      [id],
    );
    return r.rows[0]?.state ?? null;
  };
  const isPaused = async (queue: string): Promise<boolean> => pgqQueue(queue).isPaused();
  const pgqQueue = (name: string) => main.app.get<import('../../lib').Queue>(pgq.getQueueToken(name));

  /** The page's answer to a fetch it makes itself (same origin, its cookies). */
  const fetchIn = (p: Page, path: string, init?: { method: string; body: string }) =>
    p.evaluate(
      async ([u, i]) => {
        const res = await fetch(
          u,
          i
            ? { method: i.method, body: i.body, headers: { 'content-type': 'application/json', 'X-PgQueue-Dashboard': '1' } }
            : undefined,
        );
        return { status: res.status, body: await res.text() };
      },
      [path, init] as const,
    );

  beforeAll(async () => {
    db = await createTestDatabase();
    main = await startApp(db.url, { path: '/queues', authorize, refreshIntervalMs: 500 }, true);
    readOnly = await startApp(db.url, { path: '/queues', authorize, readOnly: true, refreshIntervalMs: 500 }, false);
    sql = new Client({ connectionString: db.url });
    await sql.connect();

    // idle: paused before its jobs arrive, so they stay put: 3 waiting, 1 delayed.
    await pgqQueue('idle').pause();
    for (let i = 0; i < 3; i++) await pgqQueue('idle').add('report', { n: i });
    await pgqQueue('idle').add('report', { n: 3 }, { delayMs: 3_600_000 });
    // work: two jobs that fail (one attempt each); one's payload and error are markup.
    ids.disk = (await pgqQueue('work').add('flaky', { note: 'disk full on /var/spool' })).id;
    ids.xss = (await pgqQueue('work').add('flaky', { note: XSS })).id;
    await waitFor(async () => (await jobState(ids.disk)) === 'failed' && (await jobState(ids.xss)) === 'failed', {
      timeoutMs: WAIT_MS,
      message: 'both work jobs to fail',
    });

    browser = await launchChromium();
    page = browser.context.pages()[0] ?? (await browser.context.newPage());
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
  });

  afterAll(async () => {
    await browser?.close();
    await sql?.end();
    await readOnly?.app.close();
    await main?.app.close();
    await db?.drop();
  });

  const signIn = () => browser.context.addCookies([{ name: COOKIE, value: 'ops', url: main.base }]);

  it('answers 403 to a browser that authorize() refuses: the page, the API and an action', async () => {
    await browser.context.clearCookies();
    const res = await page.goto(`${main.dashboard}`);
    expect(res?.status()).toBe(403);
    expect(await page.content()).not.toContain('flaky');
    expect((await fetchIn(page, '/queues/api/overview')).status).toBe(403);
    expect((await fetchIn(page, '/queues/api/queues/idle/resume', { method: 'POST', body: '{}' })).status).toBe(403);
    expect(await isPaused('idle')).toBe(true);
  });

  it('overview: every queue with its counts, paused state and the throughput chart', async () => {
    await signIn();
    const res = await page.goto(main.dashboard);
    expect(res?.status()).toBe(200);
    const idle = page.locator('tr[data-queue="idle"]');
    await idle.waitFor({ timeout: WAIT_MS });
    const cells = async (row: typeof idle) => (await row.locator('td').allInnerTexts()).map((t) => t.trim());
    // Queue, waiting, delayed, waiting children, active, stalled, failed, cancelled, parked, oldest waiting, state.
    const i = await cells(idle);
    expect(i.slice(1, 9)).toEqual(['3', '1', '0', '0', '0', '0', '0', '0']);
    expect(i[10]).toBe('paused');
    const w = await cells(page.locator('tr[data-queue="work"]'));
    expect(w.slice(1, 9)).toEqual(['0', '0', '0', '0', '0', '2', '0', '0']);
    expect(w[10]).toBe('running');
    await page.locator('[data-testid="throughput-chart"] canvas').waitFor({ timeout: WAIT_MS });
    expect(await page.locator('[data-testid="refresh"]').innerText()).toMatch(/updated/);
  });

  it('renders a payload and an error of <img src=x onerror=alert(1)> as text: no element, no script', async () => {
    await page.goto(`${main.dashboard}/jobs/${ids.xss}`);
    const payload = page.locator('pre.json').first();
    await payload.waitFor({ timeout: WAIT_MS });
    expect(await payload.textContent()).toContain(XSS);
    await page.locator('[data-testid="errors"]').waitFor({ timeout: WAIT_MS });
    expect(await page.locator('[data-testid="errors"] .err-msg').first().textContent()).toBe(XSS);
    // In the list too (payload preview and last error).
    await page.goto(`${main.dashboard}/queues/work?state=failed`);
    const row = page.locator(`tr[data-job-id="${ids.xss}"]`);
    await row.waitFor({ timeout: WAIT_MS });
    expect(await row.innerText()).toContain(XSS);
    expect(await page.locator('img').count()).toBe(0);
    expect(dialogs).toEqual([]);
  });

  it('a failed job: open it from the overview, read its error and stack, retry it, watch it complete without a reload', async () => {
    await page.goto(main.dashboard);
    await page.locator('tr[data-queue="work"] td:nth-child(7) a').click();
    await page.waitForURL(/\/queues\/queues\/work\?state=failed$/);
    await page.locator(`tr[data-job-id="${ids.disk}"] a`).first().click();
    await page.waitForURL(new RegExp(`/queues/jobs/${ids.disk}$`));
    const errors = page.locator('[data-testid="errors"]');
    await errors.waitFor({ timeout: WAIT_MS });
    expect(await errors.locator('.err-msg').first().textContent()).toBe('disk full on /var/spool');
    expect(await errors.locator('pre.stack').first().textContent()).toMatch(/^Error: disk full on \/var\/spool\n\s+at /);
    expect(await page.locator('.page-title .badge').textContent()).toBe('failed');

    await page.evaluate(() => ((window as unknown as { notReloaded: boolean }).notReloaded = true));
    let release = (): void => undefined;
    behaviour.gate = new Promise<void>((r) => (release = r));
    behaviour.failing = false;
    const badge = (state: string) =>
      page.waitForFunction((s) => document.querySelector('.page-title .badge')?.textContent === s, state, { timeout: WAIT_MS });
    await page.locator('[data-testid="retry-job"]').click();
    // The handler holds the job active until released: the page shows it running, then (only by
    // polling: every read it made before happened before the job completed) finished.
    await badge('active');
    expect(await jobState(ids.disk)).toBe('active');
    // Its progress shows while it runs (stored by the handler's updateProgress(60)).
    await page.locator('[data-testid="job-progress"]').waitFor({ timeout: WAIT_MS });
    expect(await page.locator('[data-testid="job-progress"]').innerText()).toBe('60 %');
    expect(await page.locator('[data-testid="job-progress"] [role="progressbar"]').getAttribute('aria-valuenow')).toBe('60');
    // Its log: the failed attempt's line, then the running one's, written by the worker within
    // its flush interval and shown by the page's polling.
    await page.waitForFunction(
      () => document.querySelector('[data-testid="job-logs"]')?.textContent?.split('\n').length === 2,
      null,
      { timeout: WAIT_MS },
    );
    expect(await page.locator('[data-testid="job-logs"]').textContent()).toBe(
      'attempt 1: disk full on /var/spool\nattempt 1: disk full on /var/spool',
    );
    release();
    await badge('completed');
    expect(await page.locator('[data-testid="job-progress"]').innerText()).toBe('60 %');
    expect(await jobState(ids.disk)).toBe('completed');
    expect(await page.evaluate(() => (window as unknown as { notReloaded?: boolean }).notReloaded)).toBe(true);
    expect(await page.locator('pre.json').nth(1).textContent()).toContain('"ok": true');

    // The timeline: created, then each attempt once, in order, started -> ended: the failed one
    // (its end from its error), then the completed one, on the database's clock with its duration.
    await page.waitForFunction(
      () => document.querySelector('[data-testid="timeline"] li:last-child')?.textContent?.includes('completed'),
      null,
      { timeout: WAIT_MS },
    );
    const lines = await page
      .locator('[data-testid="timeline"] li')
      .evaluateAll((lis) =>
        lis.map(
          (li) =>
            `${li.getAttribute('data-event')}: ${li.querySelector('.ev-name')?.textContent}${li.querySelector('.ev-outcome')?.textContent ?? ''}`,
        ),
      );
    expect(lines).toEqual(['created: Created', 'attempt: Attempt 1 failed', 'attempt: Attempt 1 completed']);
    const last = await page.locator('[data-testid="timeline"] li').last().locator('[data-testid="attempt-span"]').innerText();
    expect(last).toMatch(
      /^\d{4}-\d{2}-\d{2} [\d:.]+ [+-]\d{2}:\d{2} -> \d{4}-\d{2}-\d{2} [\d:.]+ [+-]\d{2}:\d{2} \(\d[\d.]* (ms|s)\)$/,
    );
    // A completed job can be retried (run again, as Bull Board's retry) and removed, not cancelled.
    expect(await page.locator('[data-testid="retry-job"]').count()).toBe(1);
    expect(await page.locator('[data-testid="cancel-job"]').count()).toBe(0);
    expect(await page.locator('[data-testid="remove-job"]').count()).toBe(1);
  });

  it('a tab shows only the selection actions that can act on its jobs', async () => {
    const buttons = async (state: string) => {
      await page.goto(`${main.dashboard}/queues/work?state=${state}`);
      await page.locator('[data-testid="selection-actions"]').waitFor({ timeout: WAIT_MS });
      return page
        .locator('[data-testid="selection-actions"] button')
        .evaluateAll((bs) => bs.map((b) => b.getAttribute('data-testid')).filter((t): t is string => !!t));
    };
    expect(await buttons('completed')).toEqual(['retry-selected', 'remove-selected']);
    expect(await buttons('failed')).toEqual(['retry-selected', 'remove-selected']);
  });

  it('a job enqueued under a trace shows its trace id; an object progress shows as JSON', async () => {
    await sql.query(`UPDATE pgqueue.job_history SET progress = '{"done": 3, "stage": "upload"}', trace = $2 WHERE id = $1`, [
      ids.xss,
      { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
    ]);
    await page.goto(`${main.dashboard}/jobs/${ids.xss}`);
    await page.locator('[data-testid="job-trace"]').waitFor({ timeout: WAIT_MS });
    expect(await page.locator('[data-testid="job-trace"]').innerText()).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    expect(await page.locator('[data-testid="job-progress"]').innerText()).toBe('{"done":3,"stage":"upload"}');
  });

  it('pauses and resumes a queue from its page', async () => {
    await page.goto(`${main.dashboard}/queues/work`);
    await page.locator('[data-testid="pause"]').click();
    await page.locator('.page-title .badge.paused').waitFor({ timeout: WAIT_MS });
    expect(await isPaused('work')).toBe(true);
    await page.locator('[data-testid="resume"]').click();
    await page.locator('.page-title .badge.running').waitFor({ timeout: WAIT_MS });
    expect(await isPaused('work')).toBe(false);
  });

  it('a queue with grouped jobs shows its busiest groups (a markup group key as text); a queue without shows no Groups panel', async () => {
    await signIn();
    // Grouped with SQL (migration 17's group_key): a queue no worker here claims.
    await sql.query(
      `INSERT INTO pgqueue.jobs (queue, name, payload, group_key, run_at)
       SELECT 'tenants', 'sync', '{}', CASE WHEN g <= 3 THEN 'tenant-a' ELSE $1 END, now() - interval '5 seconds'
       FROM generate_series(1, 4) g`,
      [XSS],
    );
    await page.goto(`${main.dashboard}/queues/tenants`);
    const table = page.locator('[data-testid="groups-table"]');
    await table.waitFor({ timeout: WAIT_MS });
    const rows = await table
      .locator('tbody tr')
      .evaluateAll((rs) => rs.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent?.trim())));
    expect(rows).toEqual([
      ['tenant-a', '0', '3', expect.stringMatching(/^[\d.]+ s$/)],
      [XSS, '0', '1', expect.stringMatching(/^[\d.]+ s$/)],
    ]);
    expect(await table.locator('img').count()).toBe(0);

    // A group's name links to the queue's jobs of that group: the list API's group filter.
    await table.locator('tr[data-group="tenant-a"] a').click();
    await page.waitForURL(/\/queues\/tenants\?state=waiting&group=tenant-a$/, { timeout: WAIT_MS });
    await page.locator('[data-testid="group-filter"]').waitFor({ timeout: WAIT_MS });
    await waitFor(async () => (await page.locator('[data-testid="jobs-table"] tbody tr').count()) === 3, {
      timeoutMs: WAIT_MS,
      message: "the list to show tenant-a's 3 waiting jobs only",
    });
    expect(await page.locator('[data-testid="filter-group"]').inputValue()).toBe('tenant-a');
    expect(await page.locator('[data-testid="matching-actions"]').count()).toBe(0);
    // A job's page names its group, linked to the same list.
    await page.locator('[data-testid="jobs-table"] tbody tr a').first().click();
    const shown = page.locator('[data-testid="job-group"]');
    await shown.waitFor({ timeout: WAIT_MS });
    expect(await shown.textContent()).toBe('tenant-a');

    const answered = page.waitForResponse((r) => r.url().endsWith('/queues/api/queues/idle/groups'), { timeout: WAIT_MS });
    await page.goto(`${main.dashboard}/queues/idle`);
    expect((await answered).status()).toBe(200);
    await page.locator('[data-testid="enqueue-form"]').waitFor({ timeout: WAIT_MS });
    expect(await page.locator('[data-testid="groups-table"]').count()).toBe(0);
  });

  it('enqueue from the JSON editor: the validation message of the API is shown, then the job is created', async () => {
    await page.goto(`${main.dashboard}/queues/idle`);
    const form = page.locator('[data-testid="enqueue-form"]');
    await form.waitFor({ timeout: WAIT_MS });
    await form.locator('input').first().fill('report');
    await form.locator('textarea').nth(0).fill('{"n": 42, "from": "browser"}');
    await form.locator('textarea').nth(1).fill('{"bogus": 1}');
    await form.locator('button[type="submit"]').click();
    const problem = form.locator('.field-error');
    await problem.waitFor({ timeout: WAIT_MS });
    expect(await problem.textContent()).toMatch(/Unknown job option\(s\) bogus/);
    await form.locator('textarea').nth(1).fill('');
    await form.locator('button[type="submit"]').click();
    const created = form.getByText(/^job \d+$/);
    await created.waitFor({ timeout: WAIT_MS });
    const id = (await created.textContent())!.replace('job ', '');
    const job = await pgqQueue('idle').getJob(id);
    expect(job).toMatchObject({ name: 'report', payload: { n: 42, from: 'browser' }, state: 'waiting' });
  });

  it('pages a long list by keyset: "Next page" shows the jobs after the last one, "Newest" goes back', async () => {
    await pgqQueue('idle').addBulk(Array.from({ length: 55 }, (_, i) => ({ name: 'report', payload: { page: i } })));
    await page.goto(`${main.dashboard}/queues/idle?state=waiting`);
    const rows = page.locator('[data-testid="jobs-table"] tbody tr');
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="jobs-table"] tbody tr').length === 50, null, {
      timeout: WAIT_MS,
    });
    const first = await rows.evaluateAll((rs) => rs.map((r) => r.getAttribute('data-job-id')));
    await page.getByText('Next page ⟶').click();
    await page.waitForURL(/[?&]before=/);
    await page.waitForFunction(
      (ids) => {
        const now = [...document.querySelectorAll('[data-testid="jobs-table"] tbody tr')].map((r) =>
          r.getAttribute('data-job-id'),
        );
        return now.length > 0 && now.every((id) => !ids.includes(id));
      },
      first,
      { timeout: WAIT_MS },
    );
    const second = await rows.evaluateAll((rs) => rs.map((r) => r.getAttribute('data-job-id')));
    const waiting = (await pgqQueue('idle').getCounts()).waiting;
    expect(first.length + second.length).toBe(waiting);
    expect(await page.getByText('Next page ⟶').count()).toBe(0);
    await page.getByText('⟵ Newest').click();
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="jobs-table"] tbody tr').length === 50, null, {
      timeout: WAIT_MS,
    });
  });

  it('read-only: no action button on any page, and the API refuses every action', async () => {
    await browser.context.addCookies([{ name: COOKIE, value: 'ops', url: readOnly.base }]);
    for (const path of ['', '/queues/idle', '/queues/work?state=failed', `/jobs/${ids.xss}`]) {
      await page.goto(`${readOnly.dashboard}${path}`);
      await page.locator('.card').first().waitFor({ timeout: WAIT_MS });
      await page
        .locator('[data-testid="refresh"]')
        .getByText(/updated/)
        .waitFor({ timeout: WAIT_MS });
      // The concurrency panel polls on its own: wait for it, so its (hidden) forms are counted.
      if (path.startsWith('/queues/')) await page.locator('[data-testid="concurrency-panel"]').waitFor({ timeout: WAIT_MS });
      // Every button left is a search one (filter the list, open a job by id): nothing that writes.
      const buttons = await page
        .locator('main button')
        .evaluateAll((bs) => bs.filter((b) => !b.closest('.filters')).map((b) => b.textContent));
      expect({ path, buttons }).toEqual({ path, buttons: [] });
      expect({ path, checkboxes: await page.locator('main input[type="checkbox"]').count() }).toEqual({ path, checkboxes: 0 });
      expect({ path, forms: await page.locator('[data-testid="enqueue-form"]').count() }).toEqual({ path, forms: 0 });
      expect({
        path,
        inputs: await page.locator('main [data-testid$="concurrency-input"], main [data-testid$="cap-input"]').count(),
      }).toEqual({
        path,
        inputs: 0,
      });
    }
    expect(await page.locator('.badge.readonly').count()).toBe(1);
    expect((await fetchIn(page, '/queues/api/overview')).status).toBe(200);
    const refused = await fetchIn(page, '/queues/api/queues/idle/resume', { method: 'POST', body: '{}' });
    expect(refused.status).toBe(403);
    expect(
      (await fetchIn(page, '/queues/api/jobs/remove', { method: 'POST', body: JSON.stringify({ ids: [ids.xss] }) })).status,
    ).toBe(403);
    expect(await isPaused('idle')).toBe(true);
    expect(await jobState(ids.xss)).toBe('failed');
    expect(dialogs).toEqual([]);
  });
  it('a flow: the parent lists its children with states, each child links back to its parent, the queue lists parents waiting', async () => {
    await signIn();
    // idle is paused: the children wait, so the parent waits on them.
    const flow = await main.app.get(pgq.QueueService).addFlow({
      queue: 'idle',
      name: 'report',
      payload: { flow: 'parent' },
      children: [
        { queue: 'idle', name: 'report', payload: { flow: 'a' } },
        { queue: 'idle', name: 'report', payload: { flow: 'b' } },
      ],
    });
    const [a, b] = flow.children.map((c) => c.job.id);
    await page.goto(`${main.dashboard}/jobs/${flow.job.id}`);
    const children = page.locator('[data-testid="flow-children"] li');
    await children.first().waitFor({ timeout: WAIT_MS });
    expect(await children.evaluateAll((li) => li.map((l) => l.textContent))).toEqual([
      expect.stringMatching(new RegExp(`^${a} idle/report waiting`)),
      expect.stringMatching(new RegExp(`^${b} idle/report waiting`)),
    ]);
    expect(await page.getByText('Children (2, 2 not finished)').count()).toBe(1);
    await page.locator('[data-testid="flow-children"] a').first().click();
    await page.waitForURL(new RegExp(`/jobs/${a}$`));
    const parents = page.locator('[data-testid="flow-parents"] li');
    await parents.first().waitFor({ timeout: WAIT_MS });
    expect(await parents.first().textContent()).toMatch(new RegExp(`^${flow.job.id} idle/report waiting-children`));
    await page.locator('[data-testid="flow-parents"] a').first().click();
    await page.waitForURL(new RegExp(`/jobs/${flow.job.id}$`));
    // The overview counts the parent under waiting children, and links to that tab.
    await page.goto(main.dashboard);
    const waitingChildren = page.locator('tr[data-queue="idle"] td:nth-child(4) a');
    await page.waitForFunction(
      () => document.querySelector('tr[data-queue="idle"] td:nth-child(4)')?.textContent?.trim() === '1',
      undefined,
      { timeout: WAIT_MS },
    );
    await waitingChildren.click();
    await page.waitForURL(/\/queues\/queues\/idle\?state=waiting-children$/);
    await page.waitForFunction(
      (id) =>
        [...document.querySelectorAll('[data-testid="jobs-table"] tbody tr')].some((r) => r.getAttribute('data-job-id') === id),
      flow.job.id,
      { timeout: WAIT_MS },
    );
    const listed = await page
      .locator('[data-testid="jobs-table"] tbody tr')
      .evaluateAll((rs) => rs.map((r) => r.getAttribute('data-job-id')));
    expect(listed).toEqual([flow.job.id]);
  });
});
