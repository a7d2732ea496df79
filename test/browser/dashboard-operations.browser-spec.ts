import 'reflect-metadata';
import type { INestApplication } from '@nestjs/common';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { AddressInfo } from 'node:net';
import { Client } from 'pg';
import type { Page } from 'playwright-core';
import { assertBuilt } from '../support/built';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { launchChromium, type Browser } from './browser';

// The dashboard's operator actions in Chromium, against the built package and real PostgreSQL:
// the header's search box (by id, by unique key, nothing found) and an action over every job
// matching the tab's filter, run only after its confirmation names the count.

assertBuilt();
const pgq = require('../../dist') as typeof import('../../lib');
const dash = require('../../dist/dashboard') as typeof import('../../lib/dashboard');

const WAIT_MS = 20_000;
const HOUR = 3_600_000;

describe('dashboard operator actions in a real browser (Chromium, the built package, real PostgreSQL)', () => {
  let db: TestDatabase;
  let sql: Client;
  let app: INestApplication;
  let dashboard: string;
  let browser: Browser;
  let page: Page;
  const ids: { keyed: string; other: string } = { keyed: '', other: '' };

  const queue = () => app.get<import('../../lib').Queue>(pgq.getQueueToken('ops'));
  const dueNames = async (): Promise<string[]> =>
    (
      await sql.query<{ name: string }>(
        `SELECT name FROM pgqueue.jobs WHERE queue = 'ops' AND state = 'waiting' AND run_at <= now() ORDER BY name`,
      )
    ).rows.map((r) => r.name);

  beforeAll(async () => {
    db = await createTestDatabase();
    @Module({
      imports: [
        // No workers: every job stays where the test puts it.
        pgq.PgQueueModule.forRoot({ connection: db.url, workers: false }),
        pgq.PgQueueModule.registerQueue({ name: 'ops' }),
        dash.PgQueueDashboardModule.register({ public: true, refreshIntervalMs: 500 }),
      ],
    })
    class OperationsBrowserModule {}
    app = await NestFactory.create(OperationsBrowserModule, { logger: false, abortOnError: false });
    await app.listen(0, '127.0.0.1');
    dashboard = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}/queues`;
    sql = new Client({ connectionString: db.url });
    await sql.connect();

    ids.keyed = (await queue().add('invoice', { n: 1 }, { uniqueKey: 'invoice:2026-117', delayMs: HOUR })).id;
    ids.other = (await queue().add('invoice', { n: 2 }, { delayMs: HOUR })).id;
    for (let i = 0; i < 3; i++) await queue().add('remind', { i }, { delayMs: HOUR });
    await queue().add('report', {}, { delayMs: HOUR });

    browser = await launchChromium();
    page = browser.context.pages()[0] ?? (await browser.context.newPage());
  });

  afterAll(async () => {
    await browser?.close();
    await sql?.end();
    await app?.close();
    await db?.drop();
  });

  const search = async (text: string): Promise<void> => {
    const box = page.locator('[data-testid="search-input"]');
    await box.waitFor({ timeout: WAIT_MS });
    await box.fill(text);
    await box.press('Enter');
  };
  const jobTitle = (id: string) =>
    page.waitForFunction((want) => document.querySelector('.page-title')?.textContent?.includes(`Job ${want}`) ?? false, id, {
      timeout: WAIT_MS,
    });

  it('the search box opens a job by its id', async () => {
    await page.goto(dashboard);
    await search(ids.other);
    await page.waitForURL(new RegExp(`/queues/jobs/${ids.other}$`), { timeout: WAIT_MS });
    await jobTitle(ids.other);
  });

  it('the search box finds the live job holding a unique key and opens it', async () => {
    await page.goto(`${dashboard}/nodes`);
    await search('invoice:2026-117');
    await page.waitForURL(new RegExp(`/queues/jobs/${ids.keyed}$`), { timeout: WAIT_MS });
    await jobTitle(ids.keyed);
  });

  it('promotes a delayed job from its page', async () => {
    await page.goto(`${dashboard}/jobs/${ids.keyed}`);
    await page.locator('[data-testid="promote-job"]').click();
    await page.locator('.notice.ok').waitFor({ timeout: WAIT_MS });
    expect(await page.locator('.notice.ok').innerText()).toBe(`Job ${ids.keyed} is due now`);
    expect(await dueNames()).toEqual(['invoice']);
    await page.waitForFunction(() => document.querySelector('.page-title .badge')?.textContent === 'waiting', undefined, {
      timeout: WAIT_MS,
    });
    expect(await page.locator('[data-testid="promote-job"]').count()).toBe(0);
  });

  it('says clearly when nothing has that id or key', async () => {
    await page.goto(dashboard);
    await search('no-such-key');
    await page.waitForURL(/\/queues\/search\?q=no-such-key$/, { timeout: WAIT_MS });
    const none = page.locator('[data-testid="search-none"]');
    await none.waitFor({ timeout: WAIT_MS });
    expect(await none.innerText()).toMatch(
      /^Not found: no job has the id “no-such-key”, and no waiting, delayed or running job holds/,
    );
  });

  it('promotes every delayed job of one name only after a confirmation that names the count', async () => {
    await page.goto(`${dashboard}/queues/ops?state=delayed&name=remind`);
    await page.locator('[data-testid="promote-all"]').click();
    const confirmation = page.locator('[data-testid="promote-all-confirmation"]');
    await confirmation.waitFor({ timeout: WAIT_MS });
    expect(await confirmation.locator('.confirm-text').innerText()).toBe('Make 3 delayed job(s) named “remind” due now?');
    // Nothing has moved before the confirmation.
    expect(await dueNames()).toEqual(['invoice']);
    await page.locator('[data-testid="promote-all-confirm"]').click();
    await page.locator('.notice.ok').waitFor({ timeout: WAIT_MS });
    expect(await page.locator('.notice.ok').innerText()).toBe('3 delayed job(s) due now');
    expect(await dueNames()).toEqual(['invoice', 'remind', 'remind', 'remind']);
  });

  it('removes every failed job of one name after its confirmation; other names stay', async () => {
    await sql.query(
      `INSERT INTO pgqueue.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors, created_at, finished_at)
       SELECT g, 'ops', CASE WHEN g < 9000002 THEN 'export' ELSE 'other' END, '{}', 'failed', 0, now(), 1, 1, '[]', now(), now()
       FROM generate_series(9000000, 9000002) g`,
    );
    const failed = async (): Promise<string[]> =>
      (
        await sql.query<{ name: string }>(
          `SELECT name FROM pgqueue.job_history WHERE queue = 'ops' AND state = 'failed' ORDER BY id`,
        )
      ).rows.map((r) => r.name);
    await page.goto(`${dashboard}/queues/ops?state=failed&name=export`);
    await page.locator('[data-testid="remove-matching"]').click();
    const confirmation = page.locator('[data-testid="remove-matching-confirmation"]');
    await confirmation.waitFor({ timeout: WAIT_MS });
    expect(await confirmation.locator('.confirm-text').innerText()).toBe('Remove 2 failed job(s) named “export” for good?');
    expect(await failed()).toEqual(['export', 'export', 'other']);
    await page.locator('[data-testid="remove-matching-confirm"]').click();
    await page.locator('.notice.ok').waitFor({ timeout: WAIT_MS });
    expect(await page.locator('.notice.ok').innerText()).toBe('Removed 2 failed job(s) named “export”');
    expect(await failed()).toEqual(['other']);
  });

  it('"Keep them" at the confirmation runs nothing', async () => {
    await page.goto(`${dashboard}/queues/ops?state=delayed&name=report`);
    await page.locator('[data-testid="promote-all"]').click();
    await page.locator('[data-testid="promote-all-confirmation"]').waitFor({ timeout: WAIT_MS });
    await page.getByRole('button', { name: 'Keep them' }).click();
    await page.locator('[data-testid="promote-all"]').waitFor({ timeout: WAIT_MS });
    expect(await dueNames()).toEqual(['invoice', 'remind', 'remind', 'remind']);
  });

  it('shows the stored global cap and sets it after a confirmation; the value is stored', async () => {
    const stored = async (): Promise<number | null> =>
      (await sql.query<{ g: number | null }>(`SELECT global_concurrency AS g FROM pgqueue.queues WHERE name = 'ops'`)).rows[0]
        ?.g ?? null;
    const capText = (want: string) =>
      page.waitForFunction(
        (w) => document.querySelector('[data-testid="global-cap"]')?.textContent?.startsWith(w) ?? false,
        want,
        { timeout: WAIT_MS },
      );
    await queue().setGlobalConcurrency(2);
    await page.goto(`${dashboard}/queues/ops`);
    await capText('2 stored');
    expect(await page.locator('[data-testid="global-cap-option"]').innerText()).toBe('none');
    // No worker in this app: the panel says so rather than showing an empty table.
    expect(await page.locator('[data-testid="concurrency-panel"] .empty').innerText()).toBe(
      'No live node runs a worker for this queue.',
    );

    await page.locator('[data-testid="set-global-cap-input"]').fill('4');
    await page.locator('[data-testid="set-global-cap"]').click();
    // The first click only arms the button with the question; nothing is stored yet.
    expect(await page.locator('[data-testid="set-global-cap"]').innerText()).toBe('Cap ops at 4 across every node?');
    expect(await stored()).toBe(2);
    await page.locator('[data-testid="set-global-cap"]').click();
    await page.locator('.notice.ok').waitFor({ timeout: WAIT_MS });
    expect(await page.locator('.notice.ok').innerText()).toBe('Queue ops: at most 4 job(s) run at once across every node');
    expect(await stored()).toBe(4);
    await capText('4 stored');

    await page.locator('[data-testid="remove-global-cap"]').click();
    await page.locator('[data-testid="remove-global-cap"]').click();
    await capText('none');
    expect(await stored()).toBeNull();
  });

  it("sets a node's concurrency from its row after a confirmation; the request is stored in the node's registry row", async () => {
    // The registry row a live node's heartbeat writes (this app runs no worker); that the node
    // then applies the stored value is the worker's own test (stored limits), not the page's.
    const node = 'web-1:4242:9f1c2a3b';
    await sql.query(
      `INSERT INTO pgqueue.nodes (id, host, pid, started_at, heartbeat_ms, queues)
       VALUES ($1, 'web-1', 4242, now(), 3600000, '[{"name":"ops","concurrency":5}]')`,
      [node],
    );
    const desired = async (): Promise<unknown> =>
      (await sql.query<{ d: unknown }>(`SELECT desired_concurrency AS d FROM pgqueue.nodes WHERE id = $1`, [node])).rows[0].d;
    await page.goto(`${dashboard}/queues/ops`);
    const row = page.locator(`[data-testid="concurrency-nodes"] tr[data-node-id="${node}"]`);
    await row.waitFor({ timeout: WAIT_MS });
    expect(await row.locator('td.num').innerText()).toBe('5');

    await row.locator('[data-testid="set-node-concurrency-input"]').fill('1001');
    expect(await row.locator('.field-error').innerText()).toBe('A whole number from 1 to 1,000');
    expect(await row.locator('[data-testid="set-node-concurrency"]').isDisabled()).toBe(true);
    await row.locator('[data-testid="set-node-concurrency-input"]').fill('2');
    await row.locator('[data-testid="set-node-concurrency"]').click();
    expect(await row.locator('[data-testid="set-node-concurrency"]').innerText()).toBe('Run 2 at once on web-1:4242?');
    expect(await desired()).toEqual({});
    await row.locator('[data-testid="set-node-concurrency"]').click();
    await page.locator('.notice.ok').waitFor({ timeout: WAIT_MS });
    expect(await page.locator('.notice.ok').innerText()).toBe(
      'Node web-1:4242 asked to run 2 job(s) of ops at once; its next heartbeat shows it',
    );
    expect(await desired()).toEqual({ ops: 2 });
  });
});
