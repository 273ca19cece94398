// The public explorer (`/explore`, and `/` for browsers) in headless Chromium against the real
// binary: the viewer shows the image asked for (pixels against its thumbnail), the map draws
// the coverage, the density at low zoom and the marker, a click and the keyboard select
// images, the map follows the viewer, the layout swaps, axe-core finds no WCAG 2 A/AA
// violation outside the WebGL canvases, and a phone-sized screen works without horizontal
// scrolling, a swipe across the photo stepping through its sequence. Every request must stay on 127.0.0.1; no page, console or MapLibre error.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { api, launchBrowser, startService } from './harness.mjs';
import {
  BACKGROUND, COVERAGE_GREEN, MARKER_YELLOW, PHONE, WAIT_MS, assertViewerShows, axeViolations, boxOf, mapPixels,
  openPage, screenshot, waitForImage, waitForMapIdle,
} from './explorer-support.mjs';

// The width and height of a baseline or progressive JPEG, from its first SOF marker.
function jpegSize(bytes) {
  let at = 2;
  while (at + 9 < bytes.length) {
    const marker = bytes[at + 1];
    if (marker >= 0xc0 && marker <= 0xcf && ![0xc4, 0xc8, 0xcc].includes(marker)) {
      return { height: bytes.readUInt16BE(at + 5), width: bytes.readUInt16BE(at + 7) };
    }
    at += 2 + bytes.readUInt16BE(at + 2);
  }
  return { width: 0, height: 0 };
}

describe('the explorer in Chromium', () => {
  let service;
  let browser;
  let sequence;
  // The longest sequence without panoramas, in capture order (a swipe steps through it).
  let flat;

  before(async () => {
    service = await startService({ callbackUrl: 'http://127.0.0.1:9/callback' });
    browser = await launchBrowser();
    const found = await api(service.baseUrl, '/images?bbox=-180,-85,180,85&fields=id,sequence,geometry,is_pano&limit=200', service.app.clientToken);
    assert.equal(found.status, 200, JSON.stringify(found.body));
    const bySequence = new Map();
    for (const image of found.body.data) {
      if (!bySequence.has(image.sequence)) bySequence.set(image.sequence, []);
      bySequence.get(image.sequence).push(image);
    }
    const longest = [...bySequence.keys()].sort((a, b) => bySequence.get(b).length - bySequence.get(a).length)[0];
    const ids = await api(service.baseUrl, `/image_ids?sequence_id=${longest}`, service.app.clientToken);
    sequence = ids.body.data.map((image) => image.id);
    assert.ok(sequence.length >= 3, 'a sequence of three images or more');
    const flats = [...bySequence.keys()].filter((key) => bySequence.get(key).every((image) => !image.is_pano))
      .sort((a, b) => bySequence.get(b).length - bySequence.get(a).length);
    assert.ok(flats.length > 0 && bySequence.get(flats[0]).length >= 2, 'a sequence of two photos or more without panoramas');
    const flatIds = await api(service.baseUrl, `/image_ids?sequence_id=${flats[0]}`, service.app.clientToken);
    flat = flatIds.body.data.map((image) => image.id);
  });

  after(async () => {
    await browser?.close();
    await service?.stop();
  });

  async function openExplorer(page, problems, path, imageId) {
    await page.goto(`${service.baseUrl}${path}`);
    if (imageId) await waitForImage(page, problems, imageId);
    await page.waitForFunction(() => window.streetlevelExplorer?.mapLoaded && window.streetlevelExplorer.tilesLoaded > 0, null, { timeout: WAIT_MS });
    await waitForMapIdle(page);
  }

  test('/explore?image=: the image in the viewer, the coverage and the marker on the map', async (t) => {
    const { page, problems, finish } = await openPage(browser);
    try {
      const response = await page.goto(`${service.baseUrl}/explore?image=${sequence[1]}`);
      assert.equal(response.status(), 200);
      const policy = response.headers()['content-security-policy'];
      assert.match(policy, /frame-ancestors 'none'/);
      assert.doesNotMatch(policy, /\*/, 'no wildcard without a base map');
      await openExplorer(page, problems, `/explore?image=${sequence[1]}`, sequence[1]);
      const shot = await screenshot(page, 'explorer-desktop');
      await assertViewerShows(t, service, page, shot, sequence[1]);
      const green = await mapPixels(page, shot, COVERAGE_GREEN);
      const yellow = await mapPixels(page, shot, MARKER_YELLOW, 30);
      t.diagnostic(`map: ${green} coverage pixels, ${yellow} marker pixels`);
      assert.ok(green > 50, `coverage drawn: ${green}`);
      assert.ok(yellow > 20, `marker drawn: ${yellow}`);
      // The viewer is the large pane, the map beside it.
      const viewerBox = await page.locator('#viewer-pane').boundingBox();
      const mapBox = await page.locator('#map-pane').boundingBox();
      assert.ok(viewerBox.width > mapBox.width && mapBox.x >= viewerBox.x + viewerBox.width - 1, JSON.stringify({ viewerBox, mapBox }));
      assert.match(await page.locator('#announce').textContent(), new RegExp(`Image ${sequence[1]}: .*\\d{4}`));
      assert.match(await page.locator('#report').getAttribute('href'), new RegExp(`image_key=${sequence[1]}$`));
    } finally {
      await finish();
    }
  });

  test('a click on an image point shows it and the map follows; swap and resize the panes', async (t) => {
    const { page, problems, finish } = await openPage(browser);
    try {
      await openExplorer(page, problems, `/explore?image=${sequence[0]}`, sequence[0]);
      const target = await page.evaluate((current) => {
        const { map } = window.streetlevelExplorer;
        const { width, height } = map.getCanvas().getBoundingClientRect();
        const here = map.project(window.streetlevelExplorer.currentLngLat);
        const candidates = map.queryRenderedFeatures({ layers: ['image'] })
          .map((feature) => ({ id: String(feature.properties.id), lngLat: feature.geometry.coordinates, point: map.project(feature.geometry.coordinates) }))
          .filter(({ id, point }) => id !== current && point.x > 20 && point.y > 20 && point.x < width - 20 && point.y < height - 60
            && Math.hypot(point.x - here.x, point.y - here.y) > 20);
        candidates.sort((a, b) => Math.hypot(b.point.x - here.x, b.point.y - here.y) - Math.hypot(a.point.x - here.x, a.point.y - here.y));
        return candidates[0] ?? null;
      }, sequence[0]);
      assert.ok(target, 'an image point on the map away from the current one');
      const canvas = await page.locator('#map canvas').boundingBox();
      await page.mouse.click(canvas.x + target.point.x, canvas.y + target.point.y);
      await waitForImage(page, problems, target.id);
      await waitForMapIdle(page);
      // The map is centred on the image now shown.
      const centre = await page.evaluate(() => {
        const { map, currentLngLat } = window.streetlevelExplorer;
        const at = map.project(currentLngLat);
        const { width, height } = map.getCanvas().getBoundingClientRect();
        return { dx: at.x - width / 2, dy: at.y - height / 2 };
      });
      assert.ok(Math.hypot(centre.dx, centre.dy) < 3, `the map follows the viewer: ${JSON.stringify(centre)}`);
      // Swap: the map becomes the large pane; the range sets the small pane's size.
      const swap = page.getByRole('button', { name: 'Map large' });
      await swap.click();
      assert.equal(await swap.getAttribute('aria-pressed'), 'true');
      const viewerBox = await page.locator('#viewer-pane').boundingBox();
      const mapBox = await page.locator('#map-pane').boundingBox();
      assert.ok(mapBox.width > viewerBox.width, JSON.stringify({ viewerBox, mapBox }));
      await page.getByLabel('Map size').fill('25');
      const smaller = await page.locator('#viewer-pane').boundingBox();
      assert.ok(smaller.width < viewerBox.width - 100, `the small pane shrinks: ${viewerBox.width} to ${smaller.width}`);
      await waitForMapIdle(page);
      const shot = await screenshot(page, 'explorer-map-large');
      assert.ok(await mapPixels(page, shot, COVERAGE_GREEN) > 50, 'coverage drawn in the large map');
    } finally {
      await finish();
    }
  });

  test('keyboard only: Tab to the map, move it with the arrows, Enter shows the image at its centre', async () => {
    const { page, problems, finish } = await openPage(browser);
    try {
      await openExplorer(page, problems, `/explore?image=${sequence[0]}`, sequence[0]);
      // Tab until the map's canvas has the focus, noting what was reached on the way.
      const reached = [];
      for (let step = 0; step < 20; step += 1) {
        await page.keyboard.press('Tab');
        const focused = await page.evaluate(() => {
          const element = document.activeElement;
          return element.id || element.getAttribute('aria-label') || element.textContent.trim() || element.tagName;
        });
        reached.push(focused);
        if (await page.evaluate(() => document.activeElement === window.streetlevelExplorer.map.getCanvas())) break;
      }
      assert.ok(reached.includes('swap') && reached.includes('split'), `layout controls reached: ${reached.join(' | ')}`);
      assert.ok(await page.evaluate(() => document.activeElement === window.streetlevelExplorer.map.getCanvas()), `map reached: ${reached.join(' | ')}`);
      const before = await page.evaluate(() => window.streetlevelExplorer.map.getCenter().toArray());
      for (let step = 0; step < 3; step += 1) await page.keyboard.press('ArrowRight');
      await waitForMapIdle(page);
      const moved = await page.evaluate(() => window.streetlevelExplorer.map.getCenter().toArray());
      assert.ok(moved[0] > before[0], `the arrows move the map: ${before} to ${moved}`);
      const expected = await page.evaluate(() => window.streetlevelExplorer.mapView.imageNearCentre());
      assert.ok(expected && expected !== sequence[0], `an image other than the first near the centre: ${expected}`);
      await page.keyboard.press('Enter');
      await waitForImage(page, problems, expected);
      // Space on the swap button swaps.
      await page.locator('#swap').focus();
      await page.keyboard.press('Space');
      assert.equal(await page.locator('#swap').getAttribute('aria-pressed'), 'true');
    } finally {
      await finish();
    }
  });

  test('? opens the shortcut sheet from the map, the image and the page, not in a text field', async () => {
    const { page, problems, finish } = await openPage(browser);
    try {
      await openExplorer(page, problems, `/explore?image=${sequence[0]}`, sequence[0]);
      const sheet = page.getByRole('dialog', { name: 'Keyboard shortcuts' });
      const isOpen = () => page.locator('#shortcuts').evaluate((dialog) => dialog.open);
      // Keyboard only: Tab reaches the "Shortcuts" button, Enter opens the sheet.
      let reached = false;
      for (let step = 0; step < 30 && !reached; step += 1) {
        await page.keyboard.press('Tab');
        reached = await page.evaluate(() => document.activeElement.id === 'shortcuts-open');
      }
      assert.ok(reached, 'Tab reaches "Shortcuts"');
      await page.keyboard.press('Enter');
      await sheet.waitFor();
      for (const text of ['Show the image nearest the centre', 'Play or pause the sequence', 'Next or previous image of the sequence']) {
        assert.ok((await sheet.textContent()).includes(text), text);
      }
      assert.deepEqual(await axeViolations(page), [], 'with the shortcut sheet open');
      await screenshot(page, 'explorer-shortcuts');
      await page.keyboard.press('Escape');
      assert.equal(await isOpen(), false);
      assert.equal(await page.evaluate(() => document.activeElement.id), 'shortcuts-open');
      // `?` on the focused map and on the focused image; the focus returns to each.
      for (const [where, focus] of [
        ['the map', () => window.streetlevelExplorer.map.getCanvas().focus()],
        ['the image', () => document.querySelector('#viewer [tabindex="0"]').focus()],
      ]) {
        await page.evaluate(focus);
        const focused = await page.evaluate(() => document.activeElement.outerHTML.slice(0, 80));
        await page.keyboard.press('?');
        assert.equal(await isOpen(), true, `? on ${where}`);
        await page.keyboard.press('Escape');
        assert.equal(await isOpen(), false);
        assert.equal(await page.evaluate(() => document.activeElement.outerHTML.slice(0, 80)), focused, `the focus returns to ${where}`);
      }
      // In a text field `?` is a character.
      await page.locator('summary', { hasText: 'Filters' }).click();
      const creator = page.getByLabel('Creator (username)');
      await creator.focus();
      await page.keyboard.press('?');
      assert.equal(await creator.inputValue(), '?');
      assert.equal(await isOpen(), false, 'no sheet while typing');
      await creator.fill('');
    } finally {
      await finish();
    }
  });

  test('/ for a browser is the explorer: the whole coverage, density at low zoom, pick an image', async (t) => {
    const { page, problems, finish } = await openPage(browser);
    try {
      await openExplorer(page, problems, '/', null);
      assert.equal(await page.locator('#hint').isVisible(), true);
      assert.equal(await page.locator('#report').isVisible(), false, 'no report link without an image');
      // Zoomed out to the overview zooms: the density layer draws where the imagery is, and
      // hiding it (and the overview points) removes those pixels.
      await page.evaluate(() => window.streetlevelExplorer.map.jumpTo({ zoom: 4 }));
      await waitForMapIdle(page);
      // Pixels that are not the map's background.
      const drawnOver = async (name) => {
        const shot = await screenshot(page, name);
        const box = await boxOf(page, '#map', shot);
        return box.width * box.height - await mapPixels(page, shot, BACKGROUND, 12);
      };
      const drawn = await drawnOver('explorer-density');
      await page.evaluate(() => {
        const { map } = window.streetlevelExplorer;
        map.setLayoutProperty('density', 'visibility', 'none');
        map.setLayoutProperty('overview', 'visibility', 'none');
      });
      await waitForMapIdle(page);
      const without = await drawnOver('explorer-density-off');
      t.diagnostic(`density at zoom 4: ${drawn} pixels, ${without} without the layer`);
      assert.ok(drawn > without + 100, `the density layer draws: ${drawn} against ${without}`);
      await page.evaluate(() => {
        const { map } = window.streetlevelExplorer;
        map.setLayoutProperty('density', 'visibility', 'visible');
        map.setLayoutProperty('overview', 'visibility', 'visible');
        map.jumpTo({ zoom: 16, center: map.getCenter() });
      });
      await waitForMapIdle(page);
      const expected = await page.evaluate(() => window.streetlevelExplorer.mapView.imageNearCentre());
      assert.ok(expected, 'an image near the centre of the coverage');
      await page.getByRole('button', { name: 'Show the image nearest the map centre' }).click();
      await waitForImage(page, problems, expected);
      assert.equal(await page.locator('#hint').count(), 0);
      assert.equal(await page.locator('#report').isVisible(), true);
    } finally {
      await finish();
    }
  });

  // The URL's `map` parameter, parsed.
  const mapOf = (url) => {
    const [zoom, lat, lng] = new URL(url).searchParams.get('map').split('/').map(Number);
    return { zoom, lat, lng };
  };

  test('the URL: opened with image and map, a new image pushes, the map replaces, reload and Back restore', async () => {
    const { page, problems, finish } = await openPage(browser);
    try {
      const [first, second] = sequence;
      const start = await api(service.baseUrl, `/${first}?fields=geometry`, service.app.clientToken);
      const [lng, lat] = start.body.geometry.coordinates;
      // A view away from the image: the first image must not move it.
      const given = { zoom: 17.5, lat: lat + 0.0004, lng: lng - 0.0006 };
      await openExplorer(page, problems, `/explore?image=${first}&map=${given.zoom}/${given.lat}/${given.lng}`, first);
      const opened = await page.evaluate(() => {
        const { map } = window.streetlevelExplorer;
        return { zoom: map.getZoom(), center: map.getCenter().toArray(), length: window.history.length };
      });
      assert.ok(Math.abs(opened.zoom - given.zoom) < 1e-6, `zoom ${opened.zoom}`);
      assert.ok(Math.abs(opened.center[0] - given.lng) < 1e-6 && Math.abs(opened.center[1] - given.lat) < 1e-6, `centre ${opened.center}`);
      assert.equal(new URL(page.url()).searchParams.get('image'), first);

      // The next image of the sequence: a new history entry naming it, then the map follows
      // it and replaces the entry's view.
      await page.evaluate(() => window.streetlevelExplorer.viewer.raw.moveDir(window.mapillary.NavigationDirection.Next));
      await waitForImage(page, problems, second);
      await waitForMapIdle(page);
      await page.waitForFunction((id) => new URL(window.location.href).searchParams.get('image') === id, second);
      assert.equal(await page.evaluate(() => window.history.length), opened.length + 1, 'one entry pushed for the new image');
      const followed = mapOf(page.url());
      // The viewer places an image at its computed location when it has one.
      const next = await api(service.baseUrl, `/${second}?fields=geometry,computed_geometry`, service.app.clientToken);
      const [nextLng, nextLat] = (next.body.computed_geometry ?? next.body.geometry).coordinates;
      assert.ok(Math.hypot(followed.lng - nextLng, followed.lat - nextLat) < 1e-5,
        `the URL's map is centred on the new image: ${page.url()}`);

      // Moving the map replaces the entry's view.
      await page.evaluate(() => window.streetlevelExplorer.map.jumpTo({ zoom: 16.25, center: [window.streetlevelExplorer.currentLngLat[0] + 0.001, window.streetlevelExplorer.currentLngLat[1]] }));
      await page.waitForFunction(() => new URL(window.location.href).searchParams.get('map').startsWith('16.25/'));
      assert.equal(await page.evaluate(() => window.history.length), opened.length + 1, 'moving the map adds no entry');
      const moved = mapOf(page.url());

      // A reload shows the same image and view.
      await page.reload();
      await waitForImage(page, problems, second);
      await waitForMapIdle(page);
      const reloaded = await page.evaluate(() => {
        const { map } = window.streetlevelExplorer;
        return { zoom: map.getZoom(), center: map.getCenter().toArray() };
      });
      assert.ok(Math.abs(reloaded.zoom - moved.zoom) < 1e-6, `zoom after reload ${reloaded.zoom}`);
      assert.ok(Math.abs(reloaded.center[0] - moved.lng) < 1e-6 && Math.abs(reloaded.center[1] - moved.lat) < 1e-6, `centre after reload ${reloaded.center}`);

      // Back: the first image and its view.
      await page.goBack();
      await waitForImage(page, problems, first);
      assert.equal(new URL(page.url()).searchParams.get('image'), first);
      const back = await page.evaluate(() => window.streetlevelExplorer.map.getCenter().toArray());
      assert.ok(Math.abs(back[0] - given.lng) < 1e-5 && Math.abs(back[1] - given.lat) < 1e-5, `centre after Back ${back}`);
    } finally {
      await finish();
    }
  });

  test('about this image and the share dialog: date, creator, IDs to copy, the link and the embed code', async () => {
    const { page, context, problems, finish } = await openPage(browser);
    try {
      await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: service.baseUrl });
      await openExplorer(page, problems, `/explore?image=${sequence[1]}`, sequence[1]);
      const image = await api(service.baseUrl, `/${sequence[1]}?fields=captured_at,creator,sequence,make,model`, service.app.clientToken);
      await page.locator('summary', { hasText: 'About this image' }).click();
      const year = String(new Date(image.body.captured_at).getUTCFullYear());
      await page.waitForFunction(() => document.getElementById('legend-camera').textContent !== '');
      const date = await page.locator('#legend-date').textContent();
      assert.ok(date.includes(year) && /ago/.test(date), `date, absolute and relative: ${date}`);
      assert.equal(await page.locator('#legend-creator').textContent(), image.body.creator.username);
      assert.equal(await page.locator('#legend-sequence').textContent(), image.body.sequence);
      assert.ok((await page.locator('#legend-camera').textContent()).includes(image.body.make ?? ''), 'the camera');
      await page.getByRole('button', { name: 'Copy the image ID' }).click();
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), sequence[1]);
      const json = await page.locator('#legend-json').getAttribute('href');
      const answer = await fetch(json);
      assert.equal(answer.status, 200, json);
      assert.equal((await answer.json()).id, sequence[1]);
      assert.deepEqual(await axeViolations(page), [], 'with the legend open');
      // Share: the dialog has the page's exact URL and the embed snippet; Escape closes it and
      // the focus returns to the button that opened it.
      await page.getByRole('button', { name: 'Share' }).click();
      assert.equal(await page.locator('#share').evaluate((dialog) => dialog.open), true);
      assert.equal(await page.getByLabel('Link to this view').inputValue(), page.url());
      assert.match(await page.getByLabel('Embed this image in a web page').inputValue(), new RegExp(`/embed\\?image_key=${sequence[1]}&style=split`));
      assert.equal(await page.getByLabel('Short link to this image (with a preview card)').inputValue(), `${service.baseUrl}/i/${sequence[1]}`);
      assert.deepEqual(await axeViolations(page), [], 'with the share dialog open');
      await screenshot(page, 'explorer-share');
      await page.keyboard.press('Escape');
      assert.equal(await page.locator('#share').evaluate((dialog) => dialog.open), false);
      assert.equal(await page.evaluate(() => document.activeElement.id), 'share-open');
    } finally {
      await finish();
    }
  });

  test('/i/<id>: a preview card whose picture needs no token, then the explorer on the image', async (t) => {
    const id = sequence[2];
    // What a link unfurler reads: the page's head, without a browser or a token.
    const answer = await fetch(`${service.baseUrl}/i/${id}`);
    assert.equal(answer.status, 200);
    const html = await answer.text();
    const meta = (key) => {
      const found = new RegExp(`<meta (?:property|name)="${key}" content="([^"]*)"`).exec(html);
      return found ? found[1].replaceAll('&amp;', '&') : null;
    };
    const image = await api(service.baseUrl, `/${id}?fields=captured_at,geometry,computed_geometry`, service.app.clientToken);
    const [lng, lat] = (image.body.computed_geometry ?? image.body.geometry).coordinates;
    const day = new Date(image.body.captured_at).toLocaleDateString('en-GB', { day: 'numeric', month: 'long', year: 'numeric', timeZone: 'UTC' });
    const title = meta('og:title');
    t.diagnostic(`og:title ${title}`);
    assert.ok(title.includes(day) && title.includes(`${Math.abs(lat).toFixed(5)}° ${lat < 0 ? 'S' : 'N'}`), `date and place: ${title} (${day})`);
    assert.equal(meta('og:url'), `${service.baseUrl}/i/${id}`);
    assert.equal(meta('twitter:card'), 'summary_large_image');
    const picture = meta('og:image');
    assert.match(picture, new RegExp(`^${service.baseUrl}/media/thumb/${id}/1024\\?`));
    assert.equal(meta('twitter:image'), picture);
    const thumbnail = await fetch(picture, { headers: { cookie: '' } });
    assert.equal(thumbnail.status, 200, picture);
    assert.equal(thumbnail.headers.get('content-type'), 'image/jpeg');
    const size = jpegSize(Buffer.from(await thumbnail.arrayBuffer()));
    t.diagnostic(`og:image ${size.width}x${size.height}`);
    assert.equal(size.width, 1024, JSON.stringify(size));
    // A link to no image: 404 and no card.
    const missing = await fetch(`${service.baseUrl}/i/1`);
    assert.equal(missing.status, 404);
    const missingHtml = await missing.text();
    assert.doesNotMatch(missingHtml, /og:image|twitter:image|\/media\//);

    // A browser: the explorer on the image, at the explorer's own address.
    const { page, problems, finish } = await openPage(browser);
    try {
      await openExplorer(page, problems, `/i/${id}`, id);
      assert.equal(new URL(page.url()).pathname, '/explore');
      assert.equal(new URL(page.url()).searchParams.get('image'), id);
      assert.equal(await page.title(), `${title} · streetlevel`);
    } finally {
      await finish();
    }
  });

  test('axe-core: no WCAG 2 A or AA violation outside the canvases', async () => {
    const { page, problems, finish } = await openPage(browser);
    try {
      await openExplorer(page, problems, `/explore?image=${sequence[0]}`, sequence[0]);
      assert.deepEqual(await axeViolations(page), []);
      await page.getByRole('button', { name: 'Map large' }).click();
      await page.locator('summary', { hasText: 'Filters' }).click();
      await page.waitForFunction(() => !document.getElementById('player').hidden);
      assert.deepEqual(await axeViolations(page), [], 'with the map large, the filters open and the player shown');
      await screenshot(page, 'explorer-filters-open');
    } finally {
      await finish();
    }
  });

  test('a phone: panes stacked, no horizontal scrolling, 44 px targets, a tap selects, a swipe steps', async (t) => {
    const { page, problems, finish } = await openPage(browser, PHONE);
    try {
      await openExplorer(page, problems, `/explore?image=${sequence[0]}`, sequence[0]);
      const shot = await screenshot(page, 'explorer-phone');
      await assertViewerShows(t, service, page, shot, sequence[0]);
      const overflow = await page.evaluate(() => document.scrollingElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 0, `horizontal overflow of ${overflow} px`);
      const viewerBox = await boxOf(page, '#viewer-pane', shot);
      const mapBox = await boxOf(page, '#map-pane', shot);
      assert.ok(mapBox.y >= viewerBox.y + viewerBox.height - 1 && mapBox.width >= 380, JSON.stringify({ viewerBox, mapBox }));
      for (const selector of ['#swap', '#pick', '#report']) {
        const box = await page.locator(selector).boundingBox();
        assert.ok(box.height >= 44 && box.width >= 44, `${selector} is ${box.width}x${box.height}`);
      }

      const target = await page.evaluate((current) => {
        const { map } = window.streetlevelExplorer;
        const { width, height } = map.getCanvas().getBoundingClientRect();
        const candidates = map.queryRenderedFeatures({ layers: ['image'] })
          .map((feature) => ({ id: String(feature.properties.id), point: map.project(feature.geometry.coordinates) }))
          .filter(({ id, point }) => id !== current && point.x > 20 && point.y > 20 && point.x < width - 20 && point.y < height - 70);
        return candidates[0] ?? null;
      }, sequence[0]);
      assert.ok(target, 'an image point on the phone map');
      const canvas = await page.locator('#map canvas').boundingBox();
      await page.touchscreen.tap(canvas.x + target.point.x, canvas.y + target.point.y);
      await waitForImage(page, problems, target.id);

      // A quick swipe across the photo steps through its sequence: to the left the next
      // image, to the right the previous one; a mostly vertical drag is no swipe.
      await page.evaluate((id) => window.streetlevelExplorer.show(id), flat[0]);
      await waitForImage(page, problems, flat[0]);
      const photo = await page.locator('#viewer').boundingBox();
      const cdp = await page.context().newCDPSession(page);
      const swipe = async (fromX, fromY, toX, toY) => {
        const at = (share, from, to) => from + (to - from) * share;
        await cdp.send('Input.dispatchTouchEvent', { type: 'touchStart', touchPoints: [{ x: fromX, y: fromY }] });
        for (const share of [0.25, 0.5, 0.75, 1]) {
          await cdp.send('Input.dispatchTouchEvent', { type: 'touchMove', touchPoints: [{ x: at(share, fromX, toX), y: at(share, fromY, toY) }] });
        }
        await cdp.send('Input.dispatchTouchEvent', { type: 'touchEnd', touchPoints: [] });
      };
      const middle = { x: photo.x + photo.width / 2, y: photo.y + photo.height / 2 };
      const swipes = () => page.evaluate(() => window.streetlevelExplorer.events.filter((event) => event.type === 'swipe').length);
      await swipe(middle.x, middle.y - 60, middle.x + 10, middle.y + 60);
      assert.equal(await swipes(), 0, 'a vertical drag is no swipe');
      await swipe(middle.x + 120, middle.y, middle.x - 120, middle.y + 10);
      await waitForImage(page, problems, flat[1]);
      await swipe(middle.x - 120, middle.y, middle.x + 120, middle.y);
      await waitForImage(page, problems, flat[0]);
      assert.equal(await swipes(), 2);
      await cdp.detach();
    } finally {
      await finish();
    }
  });
});
