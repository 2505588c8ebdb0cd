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
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { createServer as createHttpServer } from 'node:http';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const BIN = need('WEBHOOKS_LOCAL_BIN');
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

async function api(method, path, body) {
  const response = await fetch(`${base}/${path}`, {
    method,
    headers: { 'x-api-key': apiKey, Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  assert.ok(response.ok, `${method} ${path}: ${response.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

const event = (n) => api('POST', 'events', {
  eventId: `console-evt-${n}`, type: 'message.inbound', organizationId: 'org-1', departmentId: 'dep-1',
  message: { id: `console-msg-${n}`, to: ['+15550100'], from: '+15550199', text: `Hello ${n}` },
});

async function shot(name) {
  // Without the passing toast, which would cover what the screenshot is of.
  await page.evaluate(() => document.getElementById('toast').classList.remove('visible'));
  await page.waitForTimeout(250);
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
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
  const server = await start(['serve', '--addr', '127.0.0.1:0', '--data-dir', join(work, 'data')], {
    WEBHOOKS_RETRY_SCHEDULE: '300ms', // one retry, then FAILED
    WEBHOOKS_DELIVERY_TIMEOUT_MS: '3000',
    WEBHOOKS_HANDSHAKE_TIMEOUT_MS: '3000',
    RUST_LOG: 'warn',
    WEBHOOKS_API_KEYS: '',
    WEBHOOKS_JWT_HS256_SECRET: '',
    WEBHOOKS_JWT_JWKS_URL: '',
    WEBHOOKS_CONSOLE_OAUTH_DOMAIN: '',
    WEBHOOKS_CONSOLE_OAUTH_CLIENT_ID: '',
  }, /Console \(signed in\): +\S+\n/);
  const banner = server.output();
  base = /listening on (\S+)/.exec(banner)[1];
  apiKey = /API key \(x-api-key\): +(\S+)/.exec(banner)[1];
  token = /Bearer token for org-1: +(\S+)/.exec(banner)[1];
  link = /Console \(signed in\): +(\S+)/.exec(banner)[1];
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
  page = await context.newPage();
  page.setDefaultTimeout(15_000);
  page.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss().catch(() => {}); });
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('request', (r) => requests.push(r.url()));
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

test('sign out: nothing of the session is left', async () => {
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  await page.goBack();
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  const stored = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }) + document.cookie);
  assert.ok(!stored.includes(apiKey) && !stored.includes(token), 'credentials in storage');
});

test('hosted sign-in: authorization code + PKCE, the token refreshed before it expires, revoked on sign-out', async () => {
  // A stand-in for the Cognito hosted UI and token endpoint on loopback
  // (the console's configuration allows http for a loopback provider).
  const calls = [];
  let challenge;
  let providerToken;
  const provider = createHttpServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      if (url.pathname === '/oauth2/authorize') {
        calls.push({ path: url.pathname, query: Object.fromEntries(url.searchParams) });
        challenge = url.searchParams.get('code_challenge');
        const back = new URL(url.searchParams.get('redirect_uri'));
        back.search = new URLSearchParams({ code: 'the-code', state: url.searchParams.get('state') }).toString();
        res.writeHead(302, { Location: back.toString() }).end();
        return;
      }
      const form = Object.fromEntries(new URLSearchParams(body));
      calls.push({ path: url.pathname, form });
      res.setHeader('Access-Control-Allow-Origin', '*');
      if (url.pathname === '/oauth2/revoke') { res.writeHead(200).end(); return; }
      const verified = form.grant_type === 'refresh_token'
        ? form.refresh_token === 'refresh-1'
        : createHash('sha256').update(form.code_verifier || '').digest('base64url') === challenge && form.code === 'the-code';
      if (!verified) { res.writeHead(400, { 'Content-Type': 'application/json' }).end('{"error":"invalid_grant"}'); return; }
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({
        access_token: providerToken, refresh_token: 'refresh-1', expires_in: 62, token_type: 'Bearer',
      }));
    });
  });
  await new Promise((r) => provider.listen(0, '127.0.0.1', r));
  const domain = `http://127.0.0.1:${provider.address().port}`;
  try {
    const server = await start(['serve', '--addr', '127.0.0.1:0', '--data-dir', join(work, 'data-oauth')], {
      RUST_LOG: 'warn', WEBHOOKS_API_KEYS: '', WEBHOOKS_JWT_HS256_SECRET: '',
      WEBHOOKS_CONSOLE_OAUTH_DOMAIN: domain, WEBHOOKS_CONSOLE_OAUTH_CLIENT_ID: 'publicclient',
    }, /Console \(signed in\): +\S+\n/);
    const banner = server.output();
    const consoleUrl = `${/listening on (\S+)/.exec(banner)[1]}/console`;
    providerToken = /Bearer token for org-1: +(\S+)/.exec(banner)[1];
    const key = /API key \(x-api-key\): +(\S+)/.exec(banner)[1];
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

test('no script error, no CSP violation, no dialog during the whole run', () => {
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(consoleErrors.filter((m) => !/status of 4\d\d/.test(m)), []);
  assert.deepEqual(dialogs, []);
});
