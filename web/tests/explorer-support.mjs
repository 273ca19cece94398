// What the explorer's browser tests share: a page guarded against off-host requests and
// errors, waiting for the viewer and the map, pixels, and axe-core.
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

import { api } from './harness.mjs';
import { colourStats, decodePng, middle, pixelsNear } from './png.mjs';

export const WAIT_MS = 60_000;
export const DESKTOP = { width: 1280, height: 720 };
export const PHONE = { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 1 };
const SCREENSHOTS = process.env.STREETLEVEL_SCREENSHOTS || '';
const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);
// The coverage colour of the server's style (`/maps/style.json`) and the marker's.
export const COVERAGE_GREEN = [0x35, 0xaf, 0x6d];
export const MARKER_YELLOW = [0xff, 0xd4, 0x00];
// The map's own background (map.mjs) where the server's style draws nothing.
export const BACKGROUND = [0x1d, 0x2a, 0x33];

// A fresh context (`options` for `browser.newContext`) refusing and recording every request
// off this machine, and recording page and console errors; `finish` fails on any.
export async function openPage(browser, options = { viewport: DESKTOP }) {
  const context = await browser.newContext(options);
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
    context,
    problems,
    async finish() {
      try {
        assert.deepEqual(offHost, [], 'requests to hosts other than 127.0.0.1 or localhost');
        assert.deepEqual(problems, [], 'page and console errors');
        const { errors, mapErrors } = await page.evaluate(() => ({
          errors: window.streetlevelExplorer?.errors ?? [],
          mapErrors: (window.streetlevelExplorer?.events ?? []).filter((event) => event.type === 'maperror'),
        })).catch(() => ({ errors: [], mapErrors: [] }));
        assert.deepEqual(errors, [], 'the explorer\'s error list');
        assert.deepEqual(mapErrors, [], 'maperror events');
      } finally {
        await context.close().catch(() => {});
      }
    },
  };
}

export async function screenshot(page, name) {
  const buffer = await page.screenshot({ timeout: WAIT_MS });
  if (SCREENSHOTS) {
    mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), timeout: WAIT_MS });
  }
  return decodePng(buffer);
}

// The box of `selector` clipped to the screenshot, in whole pixels.
export async function boxOf(page, selector, shot) {
  const box = await page.locator(selector).boundingBox();
  const x = Math.max(0, Math.floor(box.x));
  const y = Math.max(0, Math.floor(box.y));
  return { x, y, width: Math.min(shot.width - x, Math.floor(box.width)), height: Math.min(shot.height - y, Math.floor(box.height)) };
}

// Waits until the viewer shows `imageId` and has drawn a frame.
export async function waitForImage(page, problems, imageId) {
  await page.waitForFunction((id) => {
    const explorer = window.streetlevelExplorer;
    return explorer?.currentImageId === id
      && explorer.events.some((event) => event.type === 'image' && event.imageId === id)
      && explorer.events.some((event) => event.type === 'load');
  }, imageId, { timeout: WAIT_MS }).catch(async (error) => {
    const state = await page.evaluate(() => ({
      current: window.streetlevelExplorer?.currentImageId,
      errors: window.streetlevelExplorer?.errors,
    })).catch(() => ({}));
    throw new Error(`the viewer did not show ${imageId}: ${error.message}: ${JSON.stringify(state)}\n${problems.join('\n')}`);
  });
}

// Waits until the map has loaded its tiles and stopped moving.
export async function waitForMapIdle(page) {
  await page.waitForFunction(() => {
    const { map, mapLoaded } = window.streetlevelExplorer ?? {};
    return mapLoaded && map.loaded() && map.areTilesLoaded() && !map.isMoving();
  }, null, { timeout: WAIT_MS });
}

// The mean colour and near-black fraction of the middle `fraction` of a thumbnail, decoded by
// the browser.
function thumbnailStats(page, url, fraction) {
  return page.evaluate(async ({ url: thumbUrl, fraction: part }) => {
    const response = await fetch(thumbUrl);
    if (!response.ok) throw new Error(`${thumbUrl}: ${response.status}`);
    const bitmap = await createImageBitmap(await response.blob());
    const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
    const context = canvas.getContext('2d');
    context.drawImage(bitmap, 0, 0);
    const width = Math.floor(bitmap.width * part);
    const height = Math.floor(bitmap.height * part);
    const { data } = context.getImageData(Math.floor((bitmap.width - width) / 2), Math.floor((bitmap.height - height) / 2), width, height);
    let [r, g, b, black] = [0, 0, 0, 0];
    for (let index = 0; index < data.length; index += 4) {
      r += data[index];
      g += data[index + 1];
      b += data[index + 2];
      if (Math.max(data[index], data[index + 1], data[index + 2]) < 24) black += 1;
    }
    const count = data.length / 4;
    return { mean: [r / count, g / count, b / count], black: black / count };
  }, { url, fraction });
}

const distance = (a, b) => Math.hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]);

// The viewer's middle shows the image: close to the thumbnail's middle in mean colour and in
// near-black pixels (a viewer drawing black, or the wrong image, fails).
export async function assertViewerShows(t, service, page, shot, imageId, { part = 0.3, tolerance = 40 } = {}) {
  const image = await api(service.baseUrl, `/${imageId}?fields=thumb_1024_url`, service.app.clientToken);
  assert.equal(image.status, 200, JSON.stringify(image.body));
  const viewer = colourStats(shot, middle(await boxOf(page, '#viewer', shot), 0.4));
  const thumbnail = await thumbnailStats(page, image.body.thumb_1024_url, part);
  const report = JSON.stringify({ viewer, thumbnail }, (key, value) => (typeof value === 'number' ? Number(value.toFixed(3)) : value));
  t.diagnostic(`viewer middle against the thumbnail of ${imageId}: ${report}`);
  assert.ok(viewer.black <= thumbnail.black + 0.02, `the viewer's middle is black where the image is not: ${report}`);
  assert.ok(distance(viewer.mean, thumbnail.mean) < tolerance, `the viewer's middle is not the image's colour: ${report}`);
}

// Pixels of `colour` inside the map pane.
export async function mapPixels(page, shot, colour, slack = 40) {
  return pixelsNear(shot, await boxOf(page, '#map', shot), colour, slack);
}

const require = createRequire(import.meta.url);

// axe-core's WCAG 2 A and AA rules over the page outside the WebGL canvases and what the
// packages draw in them; the violations, each with its nodes.
export async function axeViolations(page) {
  // Evaluated through the driver, not as a script element, which the page's policy refuses.
  await page.evaluate(readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8'));
  return page.evaluate(async () => {
    const result = await window.axe.run(
      { exclude: [['#viewer'], ['#map']] },
      { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } },
    );
    return result.violations.map((violation) => ({
      id: violation.id,
      help: violation.help,
      nodes: violation.nodes.map((node) => node.target.join(' ')),
    }));
  });
}
