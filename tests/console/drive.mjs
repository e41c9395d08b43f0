// Drives Debian's chromium through the approval console, as an operator would, and prints
// what it saw as one JSON line: tests/all/console_browser.rs asserts it.
//
// Environment: CONSOLE (http://127.0.0.1:PORT), OPERATOR (the token), APPROVE and DENY (task
// ids waiting for approval), FORGER (http://127.0.0.1:PORT2: a page of another origin that
// posts an approval of APPROVE to the console as it loads), SHOT (where the screenshot goes).
import { chromium } from 'playwright-core';

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const [base, token, approveId, denyId, forger, shot] =
  ['CONSOLE', 'OPERATOR', 'APPROVE', 'DENY', 'FORGER', 'SHOT'].map(env);

// Click the submit button `selector` and wait for the page the post redirects to.
async function submit(page, selector) {
  await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'POST'),
    page.click(selector),
  ]);
  await page.waitForLoadState('load');
}

// The whole run is bounded: a step that never ends fails the test, naming the step.
let step = 'launch';
const at = (name) => { step = name; console.error(`step: ${name}`); };
setTimeout(() => {
  console.error(`timed out at step ${step}`);
  process.exit(2);
}, 240000).unref();

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu'],
});
const seen = { dialogs: 0, cspViolations: 0 };
try {
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
  const page = await context.newPage();
  page.on('dialog', async (d) => { seen.dialogs += 1; await d.dismiss(); });
  page.on('console', (m) => {
    if (m.text().includes('Content Security Policy')) seen.cspViolations += 1;
  });
  page.setDefaultTimeout(30000);

  at('sign in');
  await page.goto(`${base}/console`);
  seen.signInShown = await page.locator('input[name=token]').count();
  await page.fill('input[name=token]', token);
  await submit(page, 'button[type=submit]');
  if ((await page.locator('header .who b').count()) === 0) {
    throw new Error(`not signed in: at ${page.url()}: ${await page.locator('main').textContent()}`);
  }
  seen.operator = (await page.locator('header .who b').textContent()).trim();
  seen.waitingRows = await page.locator('#waiting tbody tr').count();

  // The call to approve: what the human reads, then one click.
  at('read the call');
  await page.goto(`${base}/console/task?id=${approveId}`);
  seen.heading = (await page.locator('h1').textContent()).trim();
  seen.arguments = await page.locator('dd pre').first().textContent();
  seen.description = await page.locator('.description').textContent();
  seen.injected = await page.locator('main img, main script, script').count();
  seen.cookieVisibleToScript = await page.evaluate(() => document.cookie.length).catch(() => -1);
  await page.screenshot({ path: shot, fullPage: true });
  // A page of another origin posts a decision to the console in this same browser: the
  // session cookie stays home (SameSite=Strict) and the foreign Origin is refused.
  at('forged post');
  const forged = await context.newPage();
  const answer = forged.waitForResponse((r) => r.url().startsWith(`${base}/console/task`));
  await forged.goto(forger);
  seen.forgedStatus = (await answer).status();
  await forged.close();
  await page.reload();
  seen.headingAfterForgery = (await page.locator('h1').textContent()).trim();

  at('approve');
  await submit(page, 'button.approve');
  // The approved call runs on the host; the page shows it once it has ended.
  for (let i = 0; i < 120; i += 1) {
    if ((await page.locator('#state').count()) > 0
        && (await page.locator('#state').textContent()) !== 'running') break;
    await page.waitForTimeout(500);
    await page.reload();
  }
  seen.approvedState = (await page.locator('#state').textContent()).trim();
  seen.approvedOutput = (await page.locator('#output').count()) > 0
    ? await page.locator('#output').textContent() : null;
  seen.injectedAfter = await page.locator('main img, main script, script').count();

  // Its receipt, then the run's timeline.
  at('receipt and timeline');
  await page.click('#receipt');
  seen.receipt = await page.locator('#statement').textContent();
  await page.goto(`${base}/console/task?id=${approveId}`);
  await page.click('#timeline');
  seen.timelineCalls = await page.locator('#calls li.call').count();
  seen.timeline = await page.locator('#calls').textContent();

  // The call to deny.
  at('deny');
  await page.goto(`${base}/console/task?id=${denyId}`);
  await submit(page, 'button.deny');
  for (let i = 0; i < 120; i += 1) {
    if ((await page.locator('#code').count()) > 0) break;
    await page.waitForTimeout(500);
    await page.reload();
  }
  seen.deniedCode = (await page.locator('#code').textContent()).trim();

  // Nothing waits any more.
  await page.goto(`${base}/console`);
  seen.waitingAfter = await page.locator('#waiting tbody tr').count();
} finally {
  await browser.close();
}
console.log(JSON.stringify(seen));
