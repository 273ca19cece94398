// A passer-by's privacy request in headless Chromium against the real binary, on a real photo
// (`../shared/data/opensfm-blur-pairs/after_lund_images_03.jpg`, imported with blurring off):
// the embed page's "Report / request blurring" link opens the form, a box is drawn on the
// picture with the mouse, the request is sent without an account; the administrator signs in,
// finds it in the dashboard's privacy queue with its box, applies it, and the image page's
// picture shows the box blurred (its pixels' variety inside the box drops, outside it stays).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { REPO, api, binary, launchBrowser, serveData } from './harness.mjs';
import { decodePng } from './png.mjs';

const WAIT_MS = 60_000;
const VIEWPORT = { width: 1000, height: 1400 };
const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);
const PHOTO = resolve(REPO, '..', 'shared', 'data', 'opensfm-blur-pairs', 'after_lund_images_03.jpg');
const ADMIN = 'carol';
const PASSWORD = 'privacy test password';
// The box drawn, as shares of the picture: left, top, right, bottom.
const BOX = [0.35, 0.3, 0.65, 0.6];

function run(command, args, input) {
  const result = spawnSync(command, args, {
    input,
    encoding: 'utf8',
    timeout: 300_000,
    env: { ...process.env, STREETLEVEL_BLUR: 'false' },
  });
  if (result.error) throw new Error(`${command} ${args.join(' ')}: ${result.error.message}`);
  if (result.status !== 0) {
    throw new Error(`${command} ${args.join(' ')} exited with ${result.status}:\n${result.stdout}\n${result.stderr}`);
  }
  return result.stdout;
}

async function openPage(browser) {
  const context = await browser.newContext({ viewport: VIEWPORT });
  context.setDefaultTimeout(WAIT_MS);
  const offHost = [];
  await context.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (LOCAL_HOSTS.has(url.hostname)) return route.continue();
    offHost.push(url.href);
    return route.abort('blockedbyclient');
  });
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console error: ${message.text()}`);
  });
  return {
    page,
    async finish() {
      try {
        assert.deepEqual(offHost, [], 'requests to hosts other than 127.0.0.1 or localhost');
        assert.deepEqual(problems, [], 'page and console errors');
      } finally {
        await context.close().catch(() => {});
      }
    },
  };
}

// The picture on a page, screenshotted once it has loaded: its pixels and its box on screen.
async function picture(page) {
  const image = page.locator('img.picture');
  await image.scrollIntoViewIfNeeded();
  await page.waitForFunction(() => {
    const element = document.querySelector('img.picture');
    return element && element.complete && element.naturalWidth > 0;
  });
  const box = await image.boundingBox();
  const shot = decodePng(await image.screenshot({ timeout: WAIT_MS }));
  return { shot, box };
}

// The part of a picture's screenshot inside the box (shares), shrunk by a margin.
function inside(shot, [left, top, right, bottom], margin = 6) {
  const x = Math.round(left * shot.width) + margin;
  const y = Math.round(top * shot.height) + margin;
  return {
    x,
    y,
    width: Math.round((right - left) * shot.width) - 2 * margin,
    height: Math.round((bottom - top) * shot.height) - 2 * margin,
  };
}

// The fine detail of a region: the mean brightness step between horizontally neighbouring
// pixels. A blur (cells of an eighth of the box, box-filtered) leaves almost none, where the
// coarse light and dark of the scene stay.
function detail(image, region) {
  const brightness = (x, y) => {
    const index = (y * image.width + x) * image.channels;
    return (image.pixels[index] + image.pixels[index + 1] + image.pixels[index + 2]) / 3;
  };
  let sum = 0;
  let count = 0;
  for (let y = region.y; y < region.y + region.height; y += 1) {
    for (let x = region.x; x + 1 < region.x + region.width; x += 1) {
      sum += Math.abs(brightness(x + 1, y) - brightness(x, y));
      count += 1;
    }
  }
  return sum / count;
}

describe('a privacy request from the embed page to the administrator', () => {
  let root;
  let server;
  let browser;
  let imageId;

  before(async () => {
    if (!existsSync(PHOTO)) {
      throw new Error(`the real photos are missing: ${PHOTO} (see ../shared/data/README.md)`);
    }
    root = mkdtempSync(join(tmpdir(), 'streetlevel-privacy-'));
    const photos = join(root, 'photos');
    const data = join(root, 'data');
    mkdirSync(photos);
    copyFileSync(PHOTO, join(photos, 'lund.jpg'));
    const imported = run(binary(), ['import', '--data', data, '--user', 'walker', photos]);
    assert.match(imported, /imported 1 images/, imported);
    run(binary(), ['users', 'create', '--data', data, '--username', ADMIN], `${PASSWORD}\n`);
    const app = run(binary(), ['apps', 'create', '--data', data, '--name', 'Privacy', '--callback', 'http://127.0.0.1/callback', '--scopes', 'read']);
    const token = app.match(/client_token: (\S+)/)[1];
    server = await serveData(data, ['--administrators', ADMIN]);
    const found = await api(server.baseUrl, '/images?bbox=-180,-85,180,85&fields=id', token);
    assert.equal(found.status, 200, JSON.stringify(found.body));
    assert.equal(found.body.data.length, 1);
    imageId = found.body.data[0].id;
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close().catch(() => {});
    await server?.stop();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  test('draw a box, send it, find it in the queue, apply it, see the pixels change', async () => {
    // The passer-by: the embed page's link, the form, a box drawn with the mouse.
    const visitor = await openPage(browser);
    let said;
    try {
      const { page } = visitor;
      await page.goto(`${server.baseUrl}/embed?image_key=${imageId}`);
      const link = page.getByRole('link', { name: 'Report / request blurring' });
      await link.waitFor({ state: 'visible' });
      const href = await link.getAttribute('href');
      assert.match(href, new RegExp(`/report\\?image_key=${imageId}$`));
      await page.goto(href);
      assert.equal(await page.locator('h1').textContent(), 'Report / request blurring');
      const { box } = await picture(page);
      await page.mouse.move(box.x + BOX[0] * box.width, box.y + BOX[1] * box.height);
      await page.mouse.down();
      await page.mouse.move(box.x + 0.5 * box.width, box.y + 0.45 * box.height, { steps: 5 });
      await page.mouse.move(box.x + BOX[2] * box.width, box.y + BOX[3] * box.height, { steps: 5 });
      await page.mouse.up();
      await page.locator('.box-said').filter({ hasText: 'Box drawn' }).waitFor();
      const drawn = await page.locator('input[name="box_width"]').inputValue();
      assert.ok(Math.abs(Number(drawn) - (BOX[2] - BOX[0])) < 0.02, `box width ${drawn}`);
      await page.getByLabel('What should be blurred').fill('A face in the middle of the picture');
      await page.getByLabel('How can we reach you?').fill('passer-by@example.com');
      await page.getByRole('button', { name: 'Send the request' }).click();
      said = await page.locator('[data-request]').textContent();
      assert.equal(said, '1');
    } finally {
      await visitor.finish();
    }

    // The administrator: the queue, the request with its box, applied; the picture changed.
    const admin = await openPage(browser);
    try {
      const { page } = admin;
      await page.goto(`${server.baseUrl}/login?next=${encodeURIComponent(`/dashboard/image?image_key=${imageId}`)}`);
      await page.getByLabel('Username').fill(ADMIN);
      await page.getByLabel('Password').fill(PASSWORD);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL((url) => url.pathname === '/dashboard/image');
      const before = (await picture(page)).shot;

      await page.goto(`${server.baseUrl}/dashboard`);
      const row = page.locator('table.requests tr[data-request="1"]');
      await row.waitFor();
      assert.equal(await row.getAttribute('data-state'), 'open');
      assert.match(await row.textContent(), /A face in the middle of the picture/);
      assert.match(await row.textContent(), /passer-by@example\.com/);
      assert.match(await row.textContent(), /drawn/);
      await row.getByRole('button', { name: 'Apply the blur' }).click();
      await page.getByRole('alert').filter({ hasText: 'Request 1 is done' }).waitFor();
      const handled = page.locator('table.handled tr[data-request="1"]');
      assert.equal(await handled.getAttribute('data-state'), 'done');
      assert.match(await handled.locator('.handling').textContent(), /\d+ (s|min)/);

      await page.goto(`${server.baseUrl}/dashboard/image?image_key=${imageId}`);
      const afterShot = (await picture(page)).shot;
      assert.equal(afterShot.width, before.width);
      const region = inside(before, BOX);
      const was = detail(before, region);
      const now = detail(afterShot, region);
      assert.ok(was > 4, `the box had detail before: ${was}`);
      assert.ok(now < was * 0.35, `the box is blurred: detail ${was} then ${now}`);
      // Left of the box the picture is as it was (but for the new original's encoding).
      const left = { x: 4, y: region.y, width: Math.round(BOX[0] * before.width) - 16, height: region.height };
      const beside = [detail(before, left), detail(afterShot, left)];
      assert.ok(Math.abs(beside[0] - beside[1]) < beside[0] * 0.15, `outside the box: detail ${beside}`);
      // The region is listed, drawn by the request's resolver.
      assert.match(await page.locator('section[aria-labelledby="regions"]').textContent(), /other\s*edit/);
    } finally {
      await admin.finish();
    }
  });
});
