// "Other dates here" in headless Chromium against the real binary, on fixtures whose sequences
// drive the route of the one before again on a later day (`streetlevel fixtures --revisits 1`):
// the dialog lists the other sequences' images within 15 m facing the same way, by capture
// date, as this file computes them itself (haversine, both compasses); Open shows one and Back
// returns; Compare draws the two images under a curtain whose range the keyboard moves (pixels
// against each thumbnail on each side), which the URL's `compare` keeps over a reload; Swap,
// Escape, the focus, axe-core and a phone's width.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { api, launchBrowser, startService } from './harness.mjs';
import { PHONE, WAIT_MS, axeViolations, openPage, screenshot, waitForImage, waitForMapIdle } from './explorer-support.mjs';

const FIELDS = 'id,sequence,captured_at,compass_angle,computed_compass_angle,geometry,computed_geometry,is_pano';

// Great-circle metres between two [lng, lat].
function haversine([lng1, lat1], [lng2, lat2]) {
  const radians = Math.PI / 180;
  const a = Math.sin(((lat2 - lat1) * radians) / 2) ** 2
    + Math.cos(lat1 * radians) * Math.cos(lat2 * radians) * Math.sin(((lng2 - lng1) * radians) / 2) ** 2;
  return 2 * 6_371_008.8 * Math.asin(Math.sqrt(a));
}
const where = (image) => (image.computed_geometry ?? image.geometry).coordinates;
const compass = (image) => image.computed_compass_angle ?? image.compass_angle;
const turn = (a, b) => {
  const gap = Math.abs(a - b) % 360;
  return Math.min(gap, 360 - gap);
};
const dayOf = (image) => new Date(image.captured_at).toISOString().slice(0, 10);

describe('other dates here in Chromium', () => {
  let service;
  let browser;
  let here;
  // Day to the IDs "Other dates here" must list for `here`, and the one to compare with.
  let expected;
  let other;

  before(async () => {
    service = await startService({ images: 240, seed: 3, fixtureArgs: ['--revisits', '1'], callbackUrl: 'http://127.0.0.1:9/callback' });
    browser = await launchBrowser();
    const found = await api(service.baseUrl, `/images?bbox=-180,-85,180,85&fields=${FIELDS}&limit=2000`, service.app.clientToken);
    assert.equal(found.status, 200, JSON.stringify(found.body));
    const images = found.body.data;
    // A perspective image whose other dates are clear-cut: nothing near the 15 m or 45° edges.
    for (const image of images.filter((candidate) => !candidate.is_pano)) {
      const near = images.filter((candidate) => candidate.sequence !== image.sequence)
        .map((candidate) => ({ candidate, metres: haversine(where(image), where(candidate)), turn: turn(compass(image), compass(candidate)) }));
      if (near.some(({ metres, turn: gap }) => Math.abs(metres - 15) < 0.5 || (metres < 15.5 && Math.abs(gap - 45) < 1))) continue;
      const kept = near.filter(({ candidate, metres, turn: gap }) => metres <= 15 && (candidate.is_pano || gap <= 45));
      const nearest = new Map();
      for (const entry of kept) {
        const known = nearest.get(entry.candidate.sequence);
        if (!known || entry.metres < known.metres) nearest.set(entry.candidate.sequence, entry);
      }
      const perspective = [...nearest.values()].filter(({ candidate }) => !candidate.is_pano && dayOf(candidate) !== dayOf(image));
      if (perspective.length === 0) continue;
      here = image;
      other = perspective[0].candidate;
      expected = new Map();
      for (const { candidate } of nearest.values()) {
        if (!expected.has(dayOf(candidate))) expected.set(dayOf(candidate), []);
        expected.get(dayOf(candidate)).push(candidate.id);
      }
      break;
    }
    assert.ok(here, 'an image with another date at its place in the fixtures');
  });

  after(async () => {
    await browser?.close();
    await service?.stop();
  });

  async function open(page, problems, query) {
    await page.goto(`${service.baseUrl}/explore?${query}`);
    await waitForImage(page, problems, here.id);
    await page.waitForFunction(() => window.streetlevelExplorer?.mapLoaded, null, { timeout: WAIT_MS });
    await waitForMapIdle(page);
  }

  async function openDates(page) {
    const seen = await page.evaluate(() => window.streetlevelExplorer.events.filter((event) => event.type === 'dates').length);
    await page.getByRole('button', { name: 'Other dates here' }).click();
    await page.waitForFunction((count) => window.streetlevelExplorer.events.filter((event) => event.type === 'dates').length > count, seen);
  }

  test('the list: other sequences here by date, reached by keyboard; Open shows one and Back returns', async () => {
    const { page, problems, finish } = await openPage(browser);
    try {
      await open(page, problems, `image=${here.id}`);
      let reached = false;
      for (let step = 0; step < 40 && !reached; step += 1) {
        await page.keyboard.press('Tab');
        reached = await page.evaluate(() => document.activeElement.id === 'dates-open');
      }
      assert.ok(reached, 'Tab reaches "Other dates here"');
      await page.keyboard.press('Enter');
      await page.waitForFunction(() => window.streetlevelExplorer.events.some((event) => event.type === 'dates'));
      const dialog = page.getByRole('dialog', { name: 'Other dates here' });
      await dialog.waitFor();
      const listed = await page.evaluate(() => [...document.querySelectorAll('#dates-list h3')].map((heading) => ({
        heading: heading.textContent,
        ids: [...heading.nextElementSibling.querySelectorAll('li')].map((item) => item.dataset.imageId),
      })));
      const days = [...expected.keys()].sort().reverse();
      assert.equal(listed.length, days.length, JSON.stringify({ listed, expected: [...expected] }));
      listed.forEach(({ heading, ids }, index) => {
        const day = new Date(`${days[index]}T12:00:00Z`);
        assert.ok(heading.includes(String(day.getUTCFullYear())) && heading.includes(String(day.getUTCDate())), `${heading} is ${days[index]}`);
        assert.deepEqual([...ids].sort(), [...expected.get(days[index])].sort(), days[index]);
      });
      assert.match(await page.locator('#dates-summary').textContent(), new RegExp(`^${days.length} other dates? within 15 m`));
      assert.deepEqual(await axeViolations(page), [], 'with the list open');
      await screenshot(page, 'explorer-dates');
      // Open: the viewer shows it, a new history entry; Back returns to the first.
      await page.locator(`#dates-list li[data-image-id="${other.id}"] button`, { hasText: 'Open' }).click();
      await waitForImage(page, problems, other.id);
      assert.equal(new URL(page.url()).searchParams.get('image'), other.id);
      await page.goBack();
      await waitForImage(page, problems, here.id);
    } finally {
      await finish();
    }
  });

  // Cell means (`columns` x `rows` over the horizontal fraction `from`..`to` of the picture,
  // its middle 80 % in height) of the thumbnail `url`, decoded by the browser.
  const thumbnailCells = (page, url, from, to, columns = 4, rows = 4) => page.evaluate(async (asked) => {
    const bitmap = await createImageBitmap(await (await fetch(asked.url)).blob());
    const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
    const context = canvas.getContext('2d');
    context.drawImage(bitmap, 0, 0);
    const cells = [];
    for (let row = 0; row < asked.rows; row += 1) {
      for (let column = 0; column < asked.columns; column += 1) {
        const x = Math.floor(bitmap.width * (asked.from + ((asked.to - asked.from) * column) / asked.columns));
        const width = Math.floor((bitmap.width * (asked.to - asked.from)) / asked.columns);
        const y = Math.floor(bitmap.height * (0.1 + (0.8 * row) / asked.rows));
        const height = Math.floor((bitmap.height * 0.8) / asked.rows);
        const { data } = context.getImageData(x, y, width, height);
        const sum = [0, 0, 0];
        for (let index = 0; index < data.length; index += 4) for (let channel = 0; channel < 3; channel += 1) sum[channel] += data[index + channel];
        cells.push(sum.map((value) => value / (data.length / 4)));
      }
    }
    return cells;
  }, { url, from, to, columns, rows });

  // The same cells of the screenshot `shot` over the picture drawn in `#compare-left`
  // (`object-fit: contain`: the picture's box inside the element's).
  async function screenCells(page, shot, from, to, columns = 4, rows = 4) {
    const box = await page.locator('#compare-left').evaluate((image) => {
      const rect = image.getBoundingClientRect();
      const scale = Math.min(rect.width / image.naturalWidth, rect.height / image.naturalHeight);
      const width = image.naturalWidth * scale;
      const height = image.naturalHeight * scale;
      return { x: rect.x + (rect.width - width) / 2, y: rect.y + (rect.height - height) / 2, width, height };
    });
    const cells = [];
    for (let row = 0; row < rows; row += 1) {
      for (let column = 0; column < columns; column += 1) {
        const x0 = Math.floor(box.x + box.width * (from + ((to - from) * column) / columns));
        const x1 = Math.floor(box.x + box.width * (from + ((to - from) * (column + 1)) / columns));
        const y0 = Math.floor(box.y + box.height * (0.1 + (0.8 * row) / rows));
        const y1 = Math.floor(box.y + box.height * (0.1 + (0.8 * (row + 1)) / rows));
        const sum = [0, 0, 0];
        for (let y = y0; y < y1; y += 1) {
          for (let x = x0; x < x1; x += 1) {
            const index = (y * shot.width + x) * shot.channels;
            for (let channel = 0; channel < 3; channel += 1) sum[channel] += shot.pixels[index + channel];
          }
        }
        cells.push(sum.map((value) => value / ((x1 - x0) * (y1 - y0))));
      }
    }
    return cells;
  }

  const cellDistance = (a, b) => a.reduce((total, cell, index) => total + Math.hypot(...cell.map((value, channel) => value - b[index][channel])), 0) / a.length;

  test('compare: the curtain by keyboard, each side its image, kept in the URL, swap, Escape', async (t) => {
    const { page, problems, finish } = await openPage(browser);
    try {
      await open(page, problems, `image=${here.id}`);
      await openDates(page);
      await page.locator(`#dates-list li[data-image-id="${other.id}"] button`, { hasText: 'Compare' }).click();
      await page.waitForFunction(() => !document.getElementById('compare').hidden);
      assert.equal(new URL(page.url()).searchParams.get('compare'), other.id);
      assert.equal(await page.evaluate(() => document.activeElement.id), 'curtain', 'the curtain has the focus');
      const thumbs = {};
      for (const image of [here, other]) {
        const answer = await api(service.baseUrl, `/${image.id}?fields=thumb_1024_url`, service.app.clientToken);
        thumbs[image.id] = answer.body.thumb_1024_url;
      }
      // Which picture a side of the screen shows: nearer to one thumbnail's cells than to the other's.
      const sideShows = async (name, from, to) => {
        const shot = await screenshot(page, name);
        const screen = await screenCells(page, shot, from, to);
        const toHere = cellDistance(screen, await thumbnailCells(page, thumbs[here.id], from, to));
        const toOther = cellDistance(screen, await thumbnailCells(page, thumbs[other.id], from, to));
        t.diagnostic(`${name} ${from}..${to}: ${toHere.toFixed(1)} from ${here.id}, ${toOther.toFixed(1)} from ${other.id}`);
        assert.ok(Math.min(toHere, toOther) < 25 && Math.abs(toHere - toOther) > 5, `${name}: one picture and not the other`);
        return toHere < toOther ? here.id : other.id;
      };
      // The curtain in the middle: the image shown on the left, the other date on the right.
      assert.equal(await sideShows('explorer-compare', 0.05, 0.4), here.id);
      assert.equal(await sideShows('explorer-compare', 0.6, 0.95), other.id);
      await page.keyboard.press('ArrowLeft');
      assert.equal(await page.locator('#curtain').inputValue(), '49');
      await page.keyboard.press('End');
      assert.equal(await sideShows('explorer-compare-end', 0.6, 0.95), here.id, 'End: all of the left image');
      await page.keyboard.press('Home');
      assert.equal(await sideShows('explorer-compare-home', 0.05, 0.4), other.id, 'Home: all of the right image');
      assert.deepEqual(await axeViolations(page), [], 'while comparing');
      // A reload compares again; Swap puts the other date on the left.
      await page.reload();
      await waitForImage(page, problems, here.id);
      await page.waitForFunction(() => !document.getElementById('compare').hidden);
      assert.equal(await page.locator('#compare-right').getAttribute('data-image-id'), other.id);
      await page.getByRole('button', { name: 'Swap sides' }).click();
      await page.waitForFunction((id) => document.getElementById('compare-left').dataset.imageId === id, other.id);
      assert.match(await page.locator('#compare-left-date').textContent(), new RegExp(String(new Date(other.captured_at).getUTCFullYear())));
      // Escape ends it: the URL forgets it, the focus goes to "Other dates here".
      await page.locator('#curtain').focus();
      await page.keyboard.press('Escape');
      assert.equal(await page.locator('#compare').isHidden(), true);
      assert.equal(new URL(page.url()).searchParams.has('compare'), false);
      assert.equal(await page.evaluate(() => document.activeElement.id), 'dates-open');
    } finally {
      await finish();
    }
  });

  test('a phone: the list and the comparison without horizontal scrolling, 44 px targets', async () => {
    const { page, problems, finish } = await openPage(browser, PHONE);
    try {
      await open(page, problems, `image=${here.id}&compare=${other.id}`);
      await page.waitForFunction(() => !document.getElementById('compare').hidden);
      await screenshot(page, 'explorer-compare-phone');
      const overflow = await page.evaluate(() => document.scrollingElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 0, `horizontal overflow of ${overflow} px`);
      for (const selector of ['#compare-swap', '#compare-open', '#compare-close', '#curtain']) {
        const box = await page.locator(selector).boundingBox();
        assert.ok(box.height >= 44, `${selector} is ${box.width}x${box.height}`);
      }
      // "Show the other image" ends the comparison on it.
      await page.getByRole('button', { name: 'Show the other image' }).click();
      await waitForImage(page, problems, other.id);
      assert.equal(await page.locator('#compare').isHidden(), true);
      assert.equal(new URL(page.url()).searchParams.has('compare'), false);
    } finally {
      await finish();
    }
  });
});
