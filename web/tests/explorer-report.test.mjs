// The explorer's report dialog and owner links in headless Chromium against the real binary:
// the "Report / request blurring" link opens a native <dialog> on the image shown, which posts
// to `/report` with that form's own token (the request is in the queue the `requests list`
// command reads, with the part of the picture in view when asked); a post without the token is
// still refused; the image's management links are shown to a signed-in owner on their own
// images only and to an administrator on every image. axe-core with the dialog open.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';

import { PASSWORD, api, binary, launchBrowser, startService } from './harness.mjs';
import { WAIT_MS, axeViolations, openPage, screenshot, waitForImage, waitForMapIdle } from './explorer-support.mjs';

// The creators of the fixtures (seed 3, 120 images), who get accounts of the same names, and
// an administrator.
const CREATORS = ['anna_lindqvist', 'erik_nyberg', 'lundamapper', 'cykel_karin', 'oskar.h', 'maja_p'];
const ADMIN = 'chief';

describe('the explorer\'s report dialog and owner links in Chromium', () => {
  let service;
  let browser;
  // An image, and one of another creator.
  let mine;
  let theirs;

  before(async () => {
    service = await startService({ callbackUrl: 'http://127.0.0.1:9/callback', users: [...CREATORS, ADMIN], serveArgs: ['--administrators', ADMIN] });
    browser = await launchBrowser();
    const found = await api(service.baseUrl, '/images?bbox=-180,-85,180,85&fields=id,creator&limit=200', service.app.clientToken);
    assert.equal(found.status, 200, JSON.stringify(found.body));
    mine = found.body.data.find((image) => CREATORS.includes(image.creator.username));
    theirs = found.body.data.find((image) => image.creator.username !== mine.creator.username);
    assert.ok(mine && theirs, 'images of two creators');
  });

  after(async () => {
    await browser?.close();
    await service?.stop();
  });

  async function open(page, problems, imageId) {
    await page.goto(`${service.baseUrl}/explore?image=${imageId}`);
    await waitForImage(page, problems, imageId);
    await page.waitForFunction(() => window.streetlevelExplorer?.mapLoaded, null, { timeout: WAIT_MS });
    await waitForMapIdle(page);
  }

  // The queue as the administrators' command lists it: one object a request.
  function requests() {
    const listed = spawnSync(binary(), ['requests', 'list', '--data', service.data], { encoding: 'utf8' });
    assert.equal(listed.status, 0, listed.stderr);
    return listed.stdout.trim().split('\n').filter(Boolean).map((line) => {
      const [number, , state, image, kind, , box, contact, text] = line.split('\t');
      return { number, state, image, kind, box, contact, text };
    });
  }

  async function openReport(page) {
    const seen = await page.evaluate(() => window.streetlevelExplorer.events.filter((event) => event.type === 'report-open').length);
    await page.getByRole('link', { name: 'Report / request blurring' }).click();
    await page.waitForFunction((count) => window.streetlevelExplorer.events.filter((event) => event.type === 'report-open').length > count, seen);
    return page.evaluate(() => window.streetlevelExplorer.events.filter((event) => event.type === 'report-open').at(-1));
  }

  test('report: a dialog on the image shown, posted to /report with its token, in the queue', async () => {
    const { page, problems, finish } = await openPage(browser);
    try {
      await open(page, problems, mine.id);
      assert.equal(await page.locator('#manage').isHidden(), true, 'no management links for a visitor');
      const opened = await openReport(page);
      assert.equal(opened.ready, true, JSON.stringify(opened));
      const dialog = page.getByRole('dialog', { name: 'Report this image' });
      await dialog.waitFor();
      assert.equal(await page.locator('#report-image').textContent(), mine.id);
      assert.equal(await page.locator('#report-full').getAttribute('href'), `/report?image_key=${mine.id}`);
      await page.waitForFunction(() => document.getElementById('report-thumb').complete && document.getElementById('report-thumb').naturalWidth > 0);
      assert.deepEqual(await axeViolations(page), [], 'with the report dialog open');
      await dialog.getByLabel('Remove the image').check();
      await dialog.getByLabel('What should be blurred, or why should the image be removed?').fill('My house, seen from the explorer');
      await dialog.getByLabel(/How can we reach you/).fill('owner@example.com');
      await screenshot(page, 'explorer-report');
      await dialog.getByRole('button', { name: 'Send the request' }).click();
      await page.locator('#report-said', { hasText: 'Thank you. Your request number' }).waitFor();
      const number = (await page.locator('#report-said').textContent()).match(/number (\d+)/)[1];
      const queued = requests().find((request) => request.number === number);
      assert.deepEqual(queued && { ...queued, number: undefined }, {
        number: undefined, state: 'open', image: mine.id, kind: 'remove', box: '-', contact: 'owner@example.com', text: 'My house, seen from the explorer',
      });
      // Escape closes it; the focus returns to the link.
      await page.keyboard.press('Escape');
      assert.equal(await page.locator('#report-dialog').evaluate((element) => element.open), false);
      assert.equal(await page.evaluate(() => document.activeElement.id), 'report');
      // The part of the picture in view: zoomed in, the dialog offers it and sends its box.
      await page.evaluate(() => window.streetlevelExplorer.viewer.raw.setZoom(1));
      await page.waitForFunction(() => window.streetlevelExplorer.viewer.visibleBox().then((box) => box !== null && box.width < 0.7));
      const zoomed = await openReport(page);
      assert.ok(zoomed.box && zoomed.box.width < 0.7 && zoomed.box.height < 0.7, JSON.stringify(zoomed));
      await dialog.getByLabel('Only the part of the picture in view').check();
      await dialog.getByLabel('What should be blurred, or why should the image be removed?').fill('A face in view');
      await dialog.getByRole('button', { name: 'Send the request' }).click();
      await page.locator('#report-said', { hasText: 'Thank you' }).waitFor();
      const withBox = requests().find((request) => request.text === 'A face in view');
      assert.equal(withBox.kind, 'blur');
      const shares = withBox.box.split(',').map(Number);
      assert.equal(shares.length, 4, withBox.box);
      shares.forEach((share, index) => assert.ok(Math.abs(share - zoomed.box[['left', 'top', 'width', 'height'][index]]) < 1e-3, `${withBox.box} against ${JSON.stringify(zoomed.box)}`));
    } finally {
      await finish();
    }
    // The same post without the form's token is refused, as before.
    const forged = await fetch(`${service.baseUrl}/report?image_key=${mine.id}`, {
      method: 'POST', body: new URLSearchParams({ kind: 'blur', reason: 'forged' }), redirect: 'manual',
    });
    assert.equal(forged.status, 403);
    assert.equal(requests().some((request) => request.text === 'forged'), false);
  });

  async function signIn(page, username, next) {
    await page.goto(`${service.baseUrl}/login?next=${encodeURIComponent(next)}`);
    await page.getByLabel('Username').fill(username);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL((url) => url.pathname === '/explore');
  }

  test('management links: an owner on their own images only, an administrator on every image', async () => {
    const owner = await openPage(browser);
    try {
      const { page, problems } = owner;
      await signIn(page, mine.creator.username, `/explore?image=${mine.id}`);
      await waitForImage(page, problems, mine.id);
      const blur = page.getByRole('link', { name: 'Edit this image\'s blurring' });
      await blur.waitFor();
      assert.equal(await blur.getAttribute('href'), `/dashboard/image?image_key=${mine.id}`);
      assert.deepEqual(await axeViolations(page), [], 'with the management links');
      await open(page, problems, theirs.id);
      assert.equal(await page.locator('#manage').isHidden(), true, 'not on another creator\'s image');
      await page.goBack();
      await waitForImage(page, problems, mine.id);
      const [answer] = await Promise.all([
        page.waitForResponse((response) => new URL(response.url()).pathname === '/dashboard/image'),
        blur.click(),
      ]);
      assert.equal(answer.status(), 200, 'the owner\'s blur page');
      assert.match(await page.locator('main').textContent(), new RegExp(mine.id));
    } finally {
      await owner.finish();
    }
    const administrator = await openPage(browser);
    try {
      const { page, problems } = administrator;
      await signIn(page, ADMIN, `/explore?image=${theirs.id}`);
      await waitForImage(page, problems, theirs.id);
      await page.getByRole('link', { name: 'Hide or delete it' }).waitFor();
      assert.equal(await page.locator('#manage-blur').getAttribute('href'), `/dashboard/image?image_key=${theirs.id}`);
      // "Hide or delete it" opens the dashboard's takedown form with the image filled in.
      await page.getByRole('link', { name: 'Hide or delete it' }).click();
      await page.waitForURL((url) => url.pathname === '/dashboard');
      assert.equal(await page.getByLabel(/^Image ID or sequence key/).inputValue(), theirs.id);
    } finally {
      await administrator.finish();
    }
  });
});
