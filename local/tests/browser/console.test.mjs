// Browser tests of the web console: Debian's Chromium driven by Playwright
// (playwright-core), against the release `webhooks-local` and a real
// callback receiver (`webhooks-local listen`), as a person would use it.
// Run by scripts/console-test.sh (which installs Chromium and
// playwright-core); alone: `scripts/console-test.sh`.
//
// Environment: WEBHOOKS_LOCAL_BIN (the binary), PLAYWRIGHT_DIR (where
// playwright-core is installed), CHROMIUM (the browser), SCREENSHOTS (where
// the screenshots go).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { createServer as createHttpServer } from 'node:http';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const BIN = need('WEBHOOKS_LOCAL_BIN');
// moto (scripts/emulators.sh): the customer's account of the AWS destination test.
const MOTO = need('AWS_ENDPOINT_URL_SQS');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const SHOTS = process.env.SCREENSHOTS || 'target/console-screenshots';
const require = createRequire(join(need('PLAYWRIGHT_DIR'), 'node_modules', '/'));
const { chromium } = require('playwright-core');

// What the failing receiver answers: markup that would run script if the
// console ever rendered it as HTML.
const EVIL = '<h1>Internal error</h1><script>window.__xss = "script"; alert("xss")</script>'
  + '<img src="x" onerror="window.__xss = \'img\'; alert(\'xss\')">';

function need(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the browser tests with scripts/console-test.sh`);
  return value;
}

const children = [];
let work;
let browser;
let page;
let context;
let base; // http://127.0.0.1:<port>/prod
let link; // the banner's signed-in console link
let apiKey;
let token;
let receiver; // the callback receiver process
let receiverUri;
let subscriptionId;
const dialogs = [];
const pageErrors = [];
const consoleErrors = [];
const requests = [];

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

/** Starts a process; resolves with it once a line of its output matches. */
function start(args, env, ready) {
  return new Promise((resolve, reject) => {
    const child = spawn(BIN, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let out = '';
    const timer = setTimeout(() => reject(new Error(`${args[0]} did not start:\n${out}`)), 30_000);
    const look = (chunk) => {
      out += chunk;
      if (ready.test(out)) {
        clearTimeout(timer);
        resolve({ child, output: () => out });
      }
    };
    child.stdout.on('data', look);
    child.stderr.on('data', look);
    child.on('exit', (code) => { clearTimeout(timer); if (!ready.test(out)) reject(new Error(`${args[0]} exited ${code}:\n${out}`)); });
  });
}

/**
 * Starts `webhooks-local serve` on a data folder of its own under `work`, signed in as the
 * banner says, with `env` over the tests' defaults; its { base, apiKey, token, link }.
 */
async function serve(data, env) {
  const server = await start(['serve', '--addr', '127.0.0.1:0', '--data-dir', join(work, data)], {
    RUST_LOG: 'warn',
    WEBHOOKS_API_KEYS: '',
    WEBHOOKS_JWT_HS256_SECRET: '',
    WEBHOOKS_JWT_JWKS_URL: '',
    WEBHOOKS_CONSOLE_OAUTH_DOMAIN: '',
    WEBHOOKS_CONSOLE_OAUTH_CLIENT_ID: '',
    ...env,
  }, /Console \(signed in\): +\S+\n/);
  const banner = server.output();
  return {
    base: /listening on (\S+)/.exec(banner)[1],
    apiKey: /API key \(x-api-key\): +(\S+)/.exec(banner)[1],
    token: /Bearer token for org-1: +(\S+)/.exec(banner)[1],
    link: /Console \(signed in\): +(\S+)/.exec(banner)[1],
  };
}

/** Calls the API of the server `on` ({ base, apiKey, token }) as org-1. */
async function call(on, method, path, body) {
  const response = await fetch(`${on.base}/${path}`, {
    method,
    headers: { 'x-api-key': on.apiKey, Authorization: `Bearer ${on.token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  assert.ok(response.ok, `${method} ${path}: ${response.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

/** Calls the API of the first server as org-1. */
const api = (method, path, body) => call({ base, apiKey, token }, method, path, body);

const event = (n) => api('POST', 'events', {
  eventId: `console-evt-${n}`, type: 'message.inbound', organizationId: 'org-1', departmentId: 'dep-1',
  message: { id: `console-msg-${n}`, to: ['+15550100'], from: '+15550199', text: `Hello ${n}` },
});

async function shot(name, on = page) {
  // Without the passing toast, which would cover what the screenshot is of.
  await on.evaluate(() => document.getElementById('toast').classList.remove('visible'));
  await on.waitForTimeout(250);
  await on.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

/** Watches a page for script errors, console errors and dialogs (checked by the last test). */
function watch(p) {
  p.setDefaultTimeout(15_000);
  p.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss().catch(() => {}); });
  p.on('pageerror', (e) => pageErrors.push(String(e)));
  p.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  p.on('request', (r) => requests.push(r.url()));
  return p;
}

/**
 * A page of its own (its own context), for the tests of races. `clock`:
 * the page's timers are Playwright's fake clock (paused with pauseClock,
 * then moved by the test), so that "several poll periods" take no
 * wall-clock time and no sleep. The page's
 * fetch calls are recorded in `window.__asked` as they are made.
 */
async function newPage({ clock = false } = {}) {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const p = watch(await ctx.newPage());
  if (clock) await p.clock.install();
  await p.addInitScript(() => {
    const fetch = window.fetch.bind(window);
    window.__asked = [];
    window.fetch = (input, init) => { window.__asked.push(String(input)); return fetch(input, init); };
  });
  return p;
}

/** Stops the fake clock (install() lets it flow): from now on only the test moves it. */
const pauseClock = (p) => p.clock.pauseAt(Date.now() + 1000);

/** How many fetch calls the page has made so far whose URL matches. */
const asked = (p, pattern) => p.evaluate((source) => window.__asked.filter((u) => new RegExp(source).test(u)).length, pattern.source);

/** The signed-in console link, opening at `route` (a `#/...` fragment). */
const linkTo = (route) => `${link}&route=${encodeURIComponent(route)}`;

/** `promise`, or an error after `ms` saying what did not happen. */
function within(promise, what, ms = 15_000) {
  let timer;
  const late = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms); });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** Resolves with a request once it has failed (aborted by the page). */
function failed(p, request) {
  return new Promise((resolve) => p.on('requestfailed', (r) => { if (r === request) resolve(r.failure()?.errorText); }));
}

/**
 * A stand-in for the Cognito hosted UI and token endpoint on loopback (the
 * console's configuration allows http for a loopback provider). The code
 * grant gives `accessToken`, a refresh grant `refreshedToken` (by default
 * the same); both say they expire in `expiresIn` seconds.
 */
async function hostedProvider() {
  const provider = { calls: [], accessToken: '', refreshedToken: '', expiresIn: 62 };
  let challenge;
  const server = createHttpServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      if (url.pathname === '/oauth2/authorize') {
        provider.calls.push({ path: url.pathname, query: Object.fromEntries(url.searchParams) });
        challenge = url.searchParams.get('code_challenge');
        const back = new URL(url.searchParams.get('redirect_uri'));
        back.search = new URLSearchParams({ code: 'the-code', state: url.searchParams.get('state') }).toString();
        res.writeHead(302, { Location: back.toString() }).end();
        return;
      }
      const form = Object.fromEntries(new URLSearchParams(body));
      provider.calls.push({ path: url.pathname, form });
      res.setHeader('Access-Control-Allow-Origin', '*');
      if (url.pathname === '/oauth2/revoke') { res.writeHead(200).end(); return; }
      const refreshing = form.grant_type === 'refresh_token';
      const verified = refreshing
        ? form.refresh_token === 'refresh-1'
        : createHash('sha256').update(form.code_verifier || '').digest('base64url') === challenge && form.code === 'the-code';
      if (!verified) { res.writeHead(400, { 'Content-Type': 'application/json' }).end('{"error":"invalid_grant"}'); return; }
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({
        access_token: refreshing ? provider.refreshedToken || provider.accessToken : provider.accessToken,
        refresh_token: 'refresh-1', expires_in: provider.expiresIn, token_type: 'Bearer',
      }));
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  provider.domain = `http://127.0.0.1:${server.address().port}`;
  provider.close = () => server.close();
  provider.refreshes = () => provider.calls.filter((c) => c.form?.grant_type === 'refresh_token').length;
  return provider;
}

/** A webhooks-local whose console signs in through `provider`: {base, consoleUrl, key, token, dataDir}. */
async function serveWithProvider(provider, name) {
  const served = await serve(name, {
    WEBHOOKS_CONSOLE_OAUTH_DOMAIN: provider.domain, WEBHOOKS_CONSOLE_OAUTH_CLIENT_ID: 'publicclient',
  });
  return {
    base: served.base,
    consoleUrl: `${served.base}/console`,
    key: served.apiKey,
    token: served.token,
    dataDir: join(work, name),
  };
}

/** Switches the receiver between failing and answering 200. */
function toggleReceiver() {
  const before = receiver.output().length;
  receiver.child.kill('SIGUSR1');
  return waitFor(() => receiver.output().slice(before).includes('SIGUSR1:'), 'the receiver to switch');
}

async function waitFor(check, what, ms = 20_000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`timed out waiting for ${what}`);
}

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  work = mkdtempSync(join(tmpdir(), 'console-test-'));
  ({ base, apiKey, token, link } = await serve('data', {
    WEBHOOKS_RETRY_SCHEDULE: '300ms', // one retry, then FAILED
    WEBHOOKS_DELIVERY_TIMEOUT_MS: '3000',
    WEBHOOKS_HANDSHAKE_TIMEOUT_MS: '3000',
    // AWS destinations: moto's STS, SQS and EventBridge, with the environment's credentials.
    AWS_ENDPOINT_URL_STS: MOTO,
    AWS_ENDPOINT_URL_EVENTBRIDGE: MOTO,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
  }));
  const port = await freePort();
  receiver = await start(['listen', '--port', String(port), '--fail-body', EVIL], {}, /receiving callbacks on/);
  receiverUri = `http://127.0.0.1:${port}/hook`;

  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    // Playwright starts it with a fresh, empty --user-data-dir of its own.
  }).catch((e) => { throw new Error(`Chromium at ${CHROMIUM} did not start: ${e.message}`); });
  context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  page = watch(await context.newPage());
});

after(async () => {
  await browser?.close().catch(() => {});
  for (const child of children) child.kill('SIGTERM');
  if (work) rmSync(work, { recursive: true, force: true });
});

test('the console link webhooks-local prints signs in, and the credentials leave the address bar', async () => {
  assert.match(link, /\/prod\/console#key=[^&]+&token=/);
  await page.goto(link);
  await page.getByRole('heading', { name: 'Subscriptions', level: 1 }).waitFor();
  assert.equal(new URL(page.url()).hash, '#/subscriptions');
  assert.ok(!page.url().includes(apiKey) && !page.url().includes(token), page.url());
  assert.ok(requests.every((u) => !u.includes(apiKey) && !u.includes(token)), 'no credentials in any request URL');
  await page.getByText('Organization org-1').waitFor();
});

test('sign out, then sign in with the form using the keyboard; a wrong key shows the API\'s problem', async () => {
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  await page.getByLabel('API key').fill('not-the-key');
  await page.getByLabel('Access token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('alert').filter({ hasText: 'Sign-in failed' }).waitFor();
  await shot('signin');
  await page.getByLabel('API key').focus();
  await page.getByLabel('API key').fill('');
  await page.keyboard.type(apiKey);
  await page.keyboard.press('Tab');
  await page.keyboard.press('Tab');
  await page.keyboard.press('Enter'); // the focused Sign in button
  await page.getByRole('heading', { name: 'Subscriptions', level: 1 }).waitFor();
  await page.getByText('No subscriptions yet').waitFor();
});

test('the event catalogue beside the subscription form: each kind with its example and JSON Schema', async () => {
  await page.getByRole('button', { name: 'New subscription' }).click();
  const panel = page.getByRole('complementary', { name: 'Event types' });
  const kinds = panel.locator('details.event-type');
  await kinds.first().waitFor();
  const listed = await kinds.evaluateAll((all) => all.map((d) => d.dataset.kind));
  const { eventTypes } = await api('GET', 'event-types');
  assert.deepEqual(listed, eventTypes.map((t) => t.kind));
  assert.ok(listed.includes('message.inbound') && listed.includes('subscription.failing'), listed.join());
  const inbound = panel.locator('details.event-type[data-kind="message.inbound"]');
  await inbound.locator('summary').first().click();
  await inbound.getByText('direction=inbound.', { exact: false }).first().waitFor();
  const example = JSON.parse(await inbound.locator('pre.example').innerText());
  assert.equal(example.messageInfo.messageId, 'msg-1');
  await inbound.getByText('JSON Schema').click();
  const schema = JSON.parse(await inbound.locator('details.schema pre').innerText());
  assert.equal(schema.title, 'message.inbound');
  assert.equal(schema.$schema, 'https://json-schema.org/draft/2020-12/schema');
  await shot('event-types');
  await page.getByRole('button', { name: 'Cancel' }).click();
  await panel.waitFor({ state: 'detached' });
});

test('create a subscription: a failed handshake is said in words, then it is created and listed', async () => {
  await page.getByRole('button', { name: 'New subscription' }).click();
  const closed = await freePort();
  await page.getByLabel('Callback URI').fill(`http://127.0.0.1:${closed}/nobody`);
  await page.getByRole('button', { name: 'Create subscription' }).click();
  await page.getByText('Handshake failed: the service could not connect to the callback.').waitFor();
  await page.getByText('CONNECT_FAILED').first().waitFor();
  await page.getByLabel('Callback URI').fill(receiverUri);
  // A filter of another organization: kept, disabled with its reason.
  await page.getByLabel('Event filters (one per line)').fill(
    '/orgId/org-1/department/dep-1/message?direction=inbound\n/orgId/org-2/department/dep-1/contact');
  // The operational filter is one pick away, like the others.
  await page.getByLabel('Event kind').selectOption('subscription');
  await page.getByRole('button', { name: 'Add filter' }).click();
  assert.match(await page.getByLabel('Event filters (one per line)').inputValue(), /\n\/orgId\/org-1\/subscription$/);
  await page.getByRole('button', { name: 'Create subscription' }).click();
  const card = page.locator('li.subscription').filter({ hasText: receiverUri });
  await card.waitFor();
  await card.locator('code').filter({ hasText: /^\/orgId\/org-1\/subscription$/ }).waitFor();
  await card.getByText("news about this organization's subscriptions (failing, recovered, disabled, exhausted, expiring)").waitFor();
  subscriptionId = await card.getAttribute('data-id');
  await card.getByText('ACTIVE', { exact: true }).waitFor();
  await card.getByText('disabled: PERMISSION_DENIED').waitFor();
  // Its health: the circuit breaker closed, nothing failed yet.
  assert.equal(await card.locator('dd.health-closed').innerText(), 'delivering');
  await card.getByRole('button', { name: 'Reveal secret' }).click();
  await card.locator('.secret-value').filter({ hasText: /^whsec_/ }).waitFor();
  await shot('subscriptions');
});

test('deliveries: one DELIVERED, one FAILED (the receiver answers 500 with HTML), chart and percentiles', async () => {
  await event(1);
  await page.locator('li.subscription').first().getByRole('link', { name: 'Deliveries' }).click();
  await page.locator('tr[data-status="DELIVERED"]').waitFor();
  await toggleReceiver(); // now failing
  await event(2);
  // The new notification shows with Refresh (and by itself within 10 s).
  await waitFor(async () => {
    await page.getByRole('button', { name: 'Refresh' }).click();
    return page.locator('tr[data-status="FAILED"]').count();
  }, 'the FAILED notification');
  assert.equal(await page.locator('tbody tr').count(), 2);
  await page.locator('svg.chart rect.bar-failed').first().waitFor();
  await page.locator('svg.chart rect.bar-delivered').first().waitFor();
  assert.match(await page.locator('.latency').innerText(), /p50 latency\s+\d+ ms/);
  await page.getByLabel('Status').selectOption('FAILED');
  await page.waitForFunction(() => document.querySelectorAll('tbody tr').length === 1);
  await page.getByLabel('Status').selectOption('');
  await page.waitForFunction(() => document.querySelectorAll('tbody tr').length === 2);
  await shot('deliveries');
});

test('the failed notification: every attempt with the callback\'s HTML shown as text, and no script ran', async () => {
  await page.locator('tr[data-status="FAILED"]').getByRole('link', { name: /Open/ }).click();
  await page.getByRole('heading', { name: 'Attempts (2)' }).waitFor();
  const bodies = page.locator('.response-body');
  assert.equal(await bodies.count(), 2);
  for (const text of await bodies.allTextContents()) assert.equal(text, EVIL);
  assert.equal(await page.locator('.attempt[data-trigger="SCHEDULED"]').count(), 2);
  await page.getByText('500', { exact: true }).first().waitFor();
  // The markup is text: no element of it exists, no handler ran, no dialog opened.
  assert.equal(await page.locator('main img, main script, .response-body *').count(), 0);
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  assert.deepEqual(dialogs, []);
  await shot('notification-failed');
});

test('fix the receiver, press Resend: a second, MANUAL attempt succeeds', async () => {
  await toggleReceiver(); // answering 200 again
  await page.getByRole('button', { name: 'Resend' }).click();
  const manual = page.locator('.attempt[data-trigger="MANUAL"]');
  await manual.waitFor({ timeout: 20_000 });
  await manual.getByText('SUCCEEDED').waitFor();
  await page.getByRole('heading', { name: 'Attempts (3)' }).waitFor();
  await page.locator('.page-head .badge-delivered').waitFor();
  await shot('notification-resent');
});

test('recover failed since a time, and the empty state of a filter', async () => {
  await page.getByRole('link', { name: 'Deliveries' }).click();
  await page.getByRole('button', { name: 'Recover failed' }).click();
  await page.getByText('No failed notifications in that window').waitFor();
  await page.getByLabel('Status').selectOption('FAILED');
  await page.getByText('No failed notifications', { exact: true }).waitFor();
  await page.getByLabel('Status').selectOption('');
});

test('readable at a phone\'s width', async () => {
  await page.setViewportSize({ width: 390, height: 844 });
  await page.locator('tr[data-status="DELIVERED"]').first().waitFor();
  // The chart is drawn again for the phone's width, so its text keeps its size.
  await page.waitForFunction(() => document.querySelector('svg.chart')?.viewBox.baseVal.width < 400);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `the page is ${overflow}px wider than the phone`);
  await shot('phone-deliveries');
  await page.locator('tbody tr').first().getByRole('link', { name: /Open/ }).click();
  await page.getByRole('heading', { name: /Attempts/ }).waitFor();
  const overflowDetail = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflowDetail <= 0, `the notification page is ${overflowDetail}px wider than the phone`);
  await shot('phone-notification');
  await page.setViewportSize({ width: 1280, height: 860 });
});

test('reactivate an EXPIRED subscription, delete one after confirming', async () => {
  const expiring = await api('POST', 'webhooksubscription', {
    uri: `${receiverUri}/expiring`, eventFilters: ['/orgId/org-1/department/dep-9/contact'],
    expiresDateInMillies: Date.now() + 1500,
  });
  await new Promise((r) => setTimeout(r, 1800));
  await page.getByRole('link', { name: 'Subscriptions' }).first().click();
  const card = page.locator(`li.subscription[data-id="${expiring.id}"]`);
  await card.getByText('EXPIRED', { exact: true }).waitFor();
  await card.getByRole('button', { name: 'Reactivate' }).click();
  await card.getByText('ACTIVE', { exact: true }).waitFor();
  await card.getByRole('button', { name: 'Delete' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click();
  assert.equal(await card.count(), 1);
  await card.getByRole('button', { name: 'Delete' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click();
  await card.waitFor({ state: 'detached' });
  await page.locator(`li.subscription[data-id="${subscriptionId}"]`).waitFor();
});

test('an ordered subscription says so on its card', async () => {
  const ordered = await api('POST', 'webhooksubscription', {
    uri: `${receiverUri}/ordered`, eventFilters: ['/orgId/org-1/department/dep-8/contact'], ordered: true,
  });
  assert.equal(ordered.ordered, true);
  // Its deliveries, then back to the list, as a user goes: the list is read again.
  await page.evaluate((id) => { window.location.hash = `#/subscriptions/${id}`; }, ordered.id);
  await page.getByRole('link', { name: '← Subscriptions' }).click();
  const card = page.locator(`li.subscription[data-id="${ordered.id}"]`);
  assert.equal(await card.locator('dd.ordered').innerText(), 'in the order events were accepted, one at a time');
  const plain = page.locator(`li.subscription[data-id="${subscriptionId}"]`);
  assert.equal(await plain.locator('dd.ordered').count(), 0);
  await card.scrollIntoViewIfNeeded();
  await shot('ordered-subscription');
});

test('a payload filter: typed in the form, refused past its limits naming the field, shown on its card', async () => {
  await page.evaluate(() => { window.location.hash = '#/subscriptions'; });
  await page.getByRole('button', { name: 'New subscription' }).click();
  await page.getByLabel('Callback URI').fill(`${receiverUri}/filtered`);
  const filter = page.getByLabel('Payload filter (optional JSON)');
  await filter.fill('{"message.to": ');
  await page.getByRole('button', { name: 'Create subscription' }).click();
  await page.getByText(/The payload filter is not JSON/).waitFor();
  // Six filters deep: one past the depth limit (5), refused by the service.
  await filter.fill('{"$not": {"$not": {"$not": {"$not": {"$not": {"a": 1}}}}}}');
  await page.getByRole('button', { name: 'Create subscription' }).click();
  await page.getByText(/payloadFilter: .*nest at most 5 deep/).waitFor();
  await page.getByText('VALIDATION_FAILED', { exact: false }).first().waitFor();
  await filter.fill('{"message.to": {"$in": ["+15550100"]}, "message.text": {"$prefix": "Hello"}}');
  await page.getByRole('button', { name: 'Create subscription' }).click();
  const card = page.locator('li.subscription').filter({ hasText: `${receiverUri}/filtered` });
  await card.waitFor();
  assert.equal(await card.locator('code.payload-filter').innerText(),
    '{"message.text":{"$prefix":"Hello"},"message.to":{"$in":["+15550100"]}}');
  const plain = page.locator(`li.subscription[data-id="${subscriptionId}"]`);
  assert.equal(await plain.locator('code.payload-filter').count(), 0);
  await card.scrollIntoViewIfNeeded();
  await shot('payload-filter');
});

test('a v1a (ed25519) subscription: chosen in the form, said on its card, its public key revealed, never a private key', async () => {
  await page.evaluate(() => { window.location.hash = '#/subscriptions'; });
  await page.getByRole('button', { name: 'New subscription' }).click();
  await page.getByLabel('Callback URI').fill(`${receiverUri}/ed25519`);
  await page.getByLabel('Signatures').selectOption('v1a');
  await page.getByRole('button', { name: 'Create subscription' }).click();
  const card = page.locator('li.subscription').filter({ hasText: `${receiverUri}/ed25519` });
  await card.waitFor();
  assert.equal(await card.locator('dd.signature-scheme').innerText(), 'v1a (ed25519, public key)');
  await card.getByRole('button', { name: 'Show public key' }).click();
  const key = card.locator('code.public-key');
  await key.filter({ hasText: /^whpk_[A-Za-z0-9+/]{43}=$/ }).waitFor();
  assert.equal(await card.locator('.secret-value').count(), 0, 'no private key or secret shown');
  assert.ok(!(await card.innerText()).includes('whsk_'));
  const plain = page.locator(`li.subscription[data-id="${subscriptionId}"]`);
  assert.equal(await plain.locator('dd.signature-scheme').innerText(), 'v1 (HMAC-SHA256)');
  await card.scrollIntoViewIfNeeded();
  await shot('v1a-subscription');
});

test('a retry schedule: typed in the form, refused past its limits naming the wait, shown on its card', async () => {
  await page.evaluate(() => { window.location.hash = '#/subscriptions'; });
  await page.getByRole('button', { name: 'New subscription' }).click();
  await page.getByLabel('Callback URI').fill(`${receiverUri}/retries`);
  const schedule = page.getByLabel('Retry schedule (optional)');
  // 13h: one hour past the longest wait (12h), refused by the service naming the wait.
  await schedule.fill('30s, 13h');
  await page.getByRole('button', { name: 'Create subscription' }).click();
  await page.getByText(/retrySchedule\[1\]: 13h is outside 1s to 12h/).waitFor();
  await shot('retry-schedule-refused');
  await schedule.fill('1m, 600, 1h, 12h');
  await page.getByRole('button', { name: 'Create subscription' }).click();
  const card = page.locator('li.subscription').filter({ hasText: `${receiverUri}/retries` });
  await card.waitFor();
  assert.equal(await card.locator('code.retry-schedule').innerText(), '1m, 10m, 1h, 12h');
  const plain = page.locator(`li.subscription[data-id="${subscriptionId}"]`);
  assert.equal(await plain.locator('code.retry-schedule').count(), 0);
  await card.scrollIntoViewIfNeeded();
  await shot('retry-schedule');
});

test('custom headers: typed in the form, a reserved name refused naming it, shown masked on the card', async () => {
  await page.evaluate(() => { window.location.hash = '#/subscriptions'; });
  await page.getByRole('button', { name: 'New subscription' }).click();
  await page.getByLabel('Callback URI').fill(`${receiverUri}/with-headers`);
  const headers = page.getByLabel('Custom headers (optional, one Name: value per line)');
  await headers.fill('Authorization Bearer');
  await page.getByRole('button', { name: 'Create subscription' }).click();
  await page.getByText(/Custom headers: line 1 is not Name: value/).waitFor();
  await headers.fill('Authorization: Bearer console-0123456789\nwebhook-signature: v1,forged');
  await page.getByRole('button', { name: 'Create subscription' }).click();
  await page.getByText(/customHeaders\.webhook-signature: webhook-signature is the service's to set/).waitFor();
  await shot('custom-headers-refused');
  await headers.fill('Authorization: Bearer console-0123456789\nX-Route: eu');
  await page.getByRole('button', { name: 'Create subscription' }).click();
  const card = page.locator('li.subscription').filter({ hasText: `${receiverUri}/with-headers` });
  await card.waitFor();
  assert.equal(await card.locator('code.custom-headers').innerText(), 'Authorization: …6789, X-Route: …');
  assert.ok(!(await card.innerText()).includes('console-0123456789'), 'the value is never shown');
  const plain = page.locator(`li.subscription[data-id="${subscriptionId}"]`);
  assert.equal(await plain.locator('code.custom-headers').count(), 0);
  await card.scrollIntoViewIfNeeded();
  await shot('custom-headers');
});

test('a receiver\'s pause (429 with Retry-After) is said on the card and on the deliveries page', async () => {
  // A server of its own: the first one's retry schedule (300 ms) would cut a pause that short.
  const other = await serve('paused-data', { WEBHOOKS_RETRY_SCHEDULE: '1s,1h' });
  const port = await freePort();
  await start(['listen', '--port', String(port), '--fail-first', '1', '--fail-status', '429', '--retry-after', '600'],
    {}, /receiving callbacks on/);
  const sub = await call(other, 'POST', 'webhooksubscription', {
    uri: `http://127.0.0.1:${port}/hook`, eventFilters: ['/orgId/org-1/department/dep-9/contact'],
  });
  const contact = (n) => call(other, 'POST', 'events', {
    eventId: `paused-evt-${n}`, type: 'contact.created', organizationId: 'org-1', departmentId: 'dep-9', contact: { id: `c-${n}` },
  });
  await contact(1);
  await waitFor(async () => (await call(other, 'GET', `webhooksubscription/${sub.id}`)).health.pausedUntil,
    'the receiver\'s pause');
  await contact(2); // held by the pause
  const p = await newPage();
  await p.goto(other.link);
  const card = p.locator(`li.subscription[data-id="${sub.id}"]`);
  const words = card.locator('dd.health-paused');
  await words.waitFor();
  assert.match(await words.innerText(), /^paused by the receiver until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(in 10 min\): it answered 429 or 503 with Retry-After/);
  await shot('paused-subscription', p);
  await card.getByRole('link', { name: 'Deliveries' }).click();
  const line = p.locator('p.health-paused');
  await line.waitFor();
  assert.match(await line.innerText(), /^Delivery: paused by the receiver until .* \(in 10 min\)/);
  // What it holds: both notifications still PENDING, nothing sent since the 429.
  await p.locator('tr[data-status="PENDING"]').nth(1).waitFor();
  await shot('paused-deliveries', p);
  await p.context().close();
});

/** A call into the customer's AWS account (222222222222) in moto, as its owner. */
async function customer(service, { target, form, json }) {
  const headers = {
    authorization: `AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/${service}/aws4_request, SignedHeaders=host, Signature=0`,
    'x-moto-account-id': '222222222222',
  };
  if (target) {
    headers['x-amz-target'] = target;
    headers['content-type'] = 'application/x-amz-json-1.0';
  } else {
    headers['content-type'] = 'application/x-www-form-urlencoded';
  }
  const response = await fetch(MOTO, { method: 'POST', headers, body: target ? JSON.stringify(json) : new URLSearchParams(form).toString() });
  const text = await response.text();
  assert.ok(response.ok, `${service} ${target || form.Action}: ${response.status} ${text}`);
  return text;
}

test('an SQS destination: the refusal names the external id, the role is made with it, then it is created and shown', async () => {
  const suffix = `${process.pid}-${Date.now()}`;
  const queue = `console-orders-${suffix}`;
  const queueArn = `arn:aws:sqs:us-east-1:222222222222:${queue}`;
  const roleName = `console-role-${suffix}`;
  const roleArn = `arn:aws:iam::222222222222:role/${roleName}`;
  await customer('sqs', { target: 'AmazonSQS.CreateQueue', json: { QueueName: queue } });
  await page.getByRole('button', { name: 'New subscription' }).click();
  await page.getByLabel('Deliver to').selectOption('sqs');
  assert.equal(await page.getByLabel('Callback URI').isVisible(), false);
  // What the role must trust, before anything is created.
  const shown = await page.locator('form.create code.external-id').innerText();
  assert.match(shown, /^webhooks-[0-9a-f-]{36}$/);
  await page.getByLabel('Queue or bus ARN').fill(queueArn);
  await page.getByLabel('Role ARN').fill(roleArn);
  await page.getByRole('button', { name: 'Create subscription' }).click();
  // No such role yet: refused in words, the detail naming this organization's external id.
  const refusal = page.getByRole('alert').filter({ hasText: 'Validation failed: the role could not be assumed' });
  await refusal.waitFor();
  await refusal.getByText('ROLE_NOT_ASSUMABLE').waitFor();
  const externalId = /webhooks-[0-9a-f-]{36}/.exec(await refusal.innerText())[0];
  assert.equal(externalId, shown, 'the refusal names the id the form showed');
  await shot('destination-refused');
  // The customer makes the role (docs/destinations.md), trusting that id only.
  const trust = { Version: '2012-10-17', Statement: [{ Effect: 'Allow', Principal: { AWS: 'arn:aws:iam::123456789012:root' },
    Action: 'sts:AssumeRole', Condition: { StringEquals: { 'sts:ExternalId': externalId } } }] };
  await customer('iam', { form: { Action: 'CreateRole', Version: '2010-05-08', RoleName: roleName, AssumeRolePolicyDocument: JSON.stringify(trust) } });
  const policy = { Version: '2012-10-17', Statement: [{ Effect: 'Allow', Action: 'sqs:SendMessage', Resource: queueArn }] };
  await customer('iam', { form: { Action: 'PutRolePolicy', Version: '2010-05-08', RoleName: roleName, PolicyName: 'send', PolicyDocument: JSON.stringify(policy) } });
  await page.getByRole('button', { name: 'Create subscription' }).click();
  const card = page.locator('li.subscription').filter({ hasText: queueArn });
  await card.waitFor();
  assert.equal(await card.locator('dd.destination').innerText(), 'SQS queue');
  assert.equal(await card.locator('code.role-arn').innerText(), roleArn);
  assert.equal(await card.locator('code.external-id').innerText(), externalId);
  await card.getByText('ACTIVE', { exact: true }).waitFor();
  // The validation message is in the customer's queue.
  const received = JSON.parse(await customer('sqs', { target: 'AmazonSQS.ReceiveMessage',
    json: { QueueUrl: `${MOTO}/222222222222/${queue}`, MessageAttributeNames: ['All'] } }));
  assert.equal(JSON.parse(received.Messages[0].Body).type, 'webhooks.destination.validation');
  await card.scrollIntoViewIfNeeded();
  await shot('destination-subscription');
});

test('sign out: nothing of the session is left', async () => {
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  await page.goBack();
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  const stored = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }) + document.cookie);
  assert.ok(!stored.includes(apiKey) && !stored.includes(token), 'credentials in storage');
});

test('hosted sign-in: authorization code + PKCE, the token refreshed before it expires, revoked on sign-out', async () => {
  const provider = await hostedProvider();
  const { calls } = provider;
  try {
    const { consoleUrl, key, token: providerToken } = await serveWithProvider(provider, 'data-oauth');
    provider.accessToken = providerToken;
    await page.goto(consoleUrl);
    await page.getByRole('button', { name: 'Sign in with your organization account' }).click();
    await page.getByRole('alert').filter({ hasText: 'Enter the API key first' }).waitFor();
    await page.getByLabel('API key').fill(key);
    await page.getByRole('button', { name: 'Sign in with your organization account' }).click();
    await page.getByRole('heading', { name: 'Subscriptions', level: 1 }).waitFor();
    const authorize = calls.find((c) => c.path === '/oauth2/authorize').query;
    assert.equal(authorize.code_challenge_method, 'S256');
    assert.equal(authorize.client_id, 'publicclient');
    assert.equal(authorize.redirect_uri, consoleUrl);
    assert.equal(new URL(page.url()).search, '', 'the code left the address bar');
    assert.equal(await page.evaluate(() => sessionStorage.length), 0, 'the round trip left nothing behind');
    // expires_in 62 s: refreshed a minute early, i.e. after 2 s (at least 5 s).
    await waitFor(() => calls.some((c) => c.form?.grant_type === 'refresh_token'), 'the refresh', 15_000);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await waitFor(() => calls.some((c) => c.path === '/oauth2/revoke' && c.form.token === 'refresh-1'), 'the revocation');
  } finally {
    provider.close();
  }
});

// Races: each on a page of its own, against the subscription made above
// (two notifications, both DELIVERED; the one of evt-2 after two failed
// attempts and a resend).

const LIST = /\/notifications\?/;

test('leaving a view aborts what it asked, and its late answer is dropped', async () => {
  const p = await newPage();
  try {
    const held = [];
    await p.route(LIST, (r) => held.push(r));
    await p.goto(linkTo(`#/subscriptions/${subscriptionId}`));
    await waitFor(() => held.length === 1, 'the list request');
    const aborted = failed(p, held[0].request());
    await p.getByRole('link', { name: '← Subscriptions' }).click();
    await p.getByRole('heading', { name: 'Subscriptions', level: 1 }).waitFor();
    assert.match(await within(aborted, 'the left view\'s request to be aborted'), /ABORTED/);
    await held[0].continue().catch(() => {}); // the answer, too late: nobody waits for it
    await p.locator(`li.subscription[data-id="${subscriptionId}"]`).waitFor();
    assert.equal(await p.locator('table.notifications').count(), 0);
  } finally {
    await p.context().close();
  }
});

test('an older answer never overwrites a newer one: the filter changed while the list loads', async () => {
  const p = await newPage();
  try {
    await p.goto(linkTo(`#/subscriptions/${subscriptionId}`));
    await p.waitForFunction(() => document.querySelectorAll('tbody tr').length === 2);
    const held = [];
    await p.route(/\/notifications\?.*status=FAILED/, (r) => held.push(r));
    await p.getByLabel('Status').selectOption('FAILED');
    await waitFor(() => held.length === 1, 'the FAILED list request');
    const aborted = failed(p, held[0].request());
    await p.getByLabel('Status').selectOption(''); // All, answered at once
    assert.match(await within(aborted, 'the older request to be aborted'), /ABORTED/);
    await held[0].continue().catch(() => {});
    await p.waitForFunction(() => document.querySelectorAll('tbody tr').length === 2);
    assert.equal(await p.getByText('No failed notifications').count(), 0);
    assert.equal(await p.getByLabel('Status').inputValue(), '');
  } finally {
    await p.context().close();
  }
});

test('polling never overlaps: no poll while the last one is unanswered; a list that did not change keeps the focus', async () => {
  const p = await newPage({ clock: true });
  try {
    let holding = false;
    const held = [];
    let served = 0;
    await p.route(LIST, (r) => {
      if (holding) { held.push(r); return; }
      served += 1;
      r.continue();
    });
    await p.goto(linkTo(`#/subscriptions/${subscriptionId}`));
    await p.waitForFunction(() => document.querySelectorAll('tbody tr').length === 2);
    await pauseClock(p);
    const before = await asked(p, LIST);
    holding = true;
    await p.clock.runFor(10_000); // one poll period (nothing is PENDING: every 10 s)
    await waitFor(() => held.length === 1, 'the poll');
    await p.clock.runFor(30_000); // three more periods while it is unanswered
    assert.equal(await asked(p, LIST), before + 1, 'a poll was made while the previous one was unanswered');
    holding = false;
    await held[0].continue();
    // Polling goes on once it is answered; the unchanged list is left as it
    // is, so the keyboard focus stays on the link the user is on.
    await p.locator('tbody tr a').first().focus();
    const start = served;
    await waitFor(async () => { await p.clock.runFor(10_000); return served >= start + 2; }, 'two more polls');
    assert.match(await p.evaluate(() => document.activeElement.getAttribute('aria-label') || document.activeElement.tagName),
      /^Open notification /);
  } finally {
    await p.context().close();
  }
});

test('concurrent 401s: one token refresh, and every refused request is repeated with the new token', async () => {
  const provider = await hostedProvider();
  const p = await newPage();
  try {
    const server = await serveWithProvider(provider, 'data-oauth-refresh');
    const refreshed = execFileSync(BIN, ['token', '--org', 'org-1', '--ttl', '2h', '--data-dir', server.dataDir],
      { env: { ...process.env, WEBHOOKS_JWT_HS256_SECRET: '' } }).toString().trim();
    assert.notEqual(refreshed, server.token);
    Object.assign(provider, { accessToken: server.token, refreshedToken: refreshed, expiresIn: 3600 });
    const created = await fetch(`${server.base}/webhooksubscription`, {
      method: 'POST',
      headers: { 'x-api-key': server.key, Authorization: `Bearer ${refreshed}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ uri: `${receiverUri}/refresh`, eventFilters: ['/orgId/org-1/department/dep-1/contact'] }),
    });
    assert.ok(created.ok, await created.clone().text());
    const sub = await created.json();
    // Once `expired`, the API refuses the first token, as it would once it expired.
    let expired = false;
    const refused = [];
    await p.route((url) => url.href.startsWith(`${server.base}/webhooksubscription`), async (r) => {
      if (expired && await r.request().headerValue('authorization') === `Bearer ${server.token}`) {
        refused.push(new URL(r.request().url()).pathname);
        await r.fulfill({
          status: 401, contentType: 'application/problem+json',
          body: JSON.stringify({ status: 401, title: 'Unauthorized', code: 'TOKEN_INVALID', detail: 'The access token has expired.' }),
        });
        return;
      }
      await r.continue();
    });
    await p.goto(server.consoleUrl);
    await p.getByLabel('API key').fill(server.key);
    await p.getByRole('button', { name: 'Sign in with your organization account' }).click();
    const card = p.locator(`li.subscription[data-id="${sub.id}"]`);
    await card.waitFor();
    expired = true;
    // The deliveries page asks three things at once (the subscription, the
    // chart, the list): all three are refused, one refresh serves them all.
    await card.getByRole('link', { name: 'Deliveries' }).click();
    await p.locator('h1.uri').filter({ hasText: `${receiverUri}/refresh` }).waitFor();
    await p.locator('figure.stats svg.chart').waitFor();
    await p.getByText('No notifications yet').waitFor();
    assert.equal(refused.length, 3, refused.join('\n'));
    assert.equal(provider.refreshes(), 1, 'one refresh for the three refused requests');
    await p.getByText('Organization org-1').waitFor(); // still signed in
    await shot('refreshed-once', p);
  } finally {
    provider.close();
    await p.context().close();
  }
});

test('a malformed % in the address shows an error, not "Loading" for ever', async () => {
  const p = await newPage();
  try {
    await p.goto(linkTo('#/subscriptions/%E0%A4%A'));
    await p.getByRole('heading', { name: 'This address cannot be read' }).waitFor();
    await p.getByRole('alert').filter({ hasText: '%E0%A4%A' }).waitFor();
    await shot('malformed-fragment', p);
    await p.getByRole('link', { name: 'Go to the subscriptions' }).click();
    await p.getByRole('heading', { name: 'Subscriptions', level: 1 }).waitFor();
    // Typed into the address bar of a signed-in page: the same.
    await p.evaluate(() => { window.location.hash = '#/subscriptions/x/notifications/%'; });
    await p.getByRole('heading', { name: 'This address cannot be read' }).waitFor();
  } finally {
    await p.context().close();
  }
});

test('polling keeps what the user opened: the attempts they opened or closed, and the resend note', async () => {
  const { content } = await api('GET', `webhooksubscription/${subscriptionId}/notifications?size=20`);
  const resent = content.reduce((a, b) => (b.attempts > a.attempts ? b : a));
  assert.equal(resent.attempts, 3);
  const detail = `${base}/webhooksubscription/${subscriptionId}/notifications/${resent.uuid}`;
  const p = await newPage({ clock: true });
  try {
    // Shown as PENDING, so that the page polls it every 1.5 s.
    let served = 0;
    await p.route((url) => url.href === detail, async (r) => {
      const answer = await r.fetch();
      const n = await answer.json();
      served += 1;
      await r.fulfill({ response: answer, json: { ...n, status: 'PENDING' } });
    });
    await p.goto(linkTo(`#/subscriptions/${subscriptionId}/notifications/${resent.uuid}`));
    await p.getByRole('heading', { name: 'Attempts (3)' }).waitFor();
    await pauseClock(p);
    const open = (n) => p.locator(`.attempt[data-attempt="${n}"] details`).evaluate((d) => d.open);
    assert.deepEqual([await open(1), await open(2), await open(3)], [true, true, false]); // failed ones open
    await p.locator('.attempt[data-attempt="2"] summary').click(); // closed by the user
    await p.locator('.attempt[data-attempt="3"] summary').click(); // opened by the user
    await p.getByRole('button', { name: 'Resend' }).click();
    const note = p.getByText('Queued: the new attempt appears below.');
    await note.waitFor();
    // Several poll periods, until the resend's attempt (a real one) has come in.
    const start = served;
    await waitFor(async () => {
      await p.clock.runFor(1500);
      return served >= start + 4 && await p.getByRole('heading', { name: 'Attempts (4)' }).count() === 1;
    }, 'four polls and the fourth attempt');
    await note.waitFor();
    assert.deepEqual([await open(1), await open(2), await open(3)], [true, false, true]);
    await p.locator('.attempt[data-attempt="4"][data-trigger="MANUAL"]').getByText('SUCCEEDED').waitFor();
    await shot('notification-kept-open', p);
  } finally {
    await p.context().close();
  }
});

test('no script error, no CSP violation, no dialog during the whole run', () => {
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(consoleErrors.filter((m) => !/status of 4\d\d/.test(m)), []);
  assert.deepEqual(dialogs, []);
});
