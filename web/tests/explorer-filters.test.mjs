// The explorer's filters and sequence player in headless Chromium against the real binary, on
// fixtures with two capture years, panoramas, two creators and two organisations: a filter
// reduces what the map draws, what the count says and where "next" can go, and lives in the
// URL; the player plays (forwards and reversed), jumps to the first and last image, says the
// position, keeps its speed and its lock on the sequence in the URL; the layer switcher shows
// and hides the map's layers, which the URL's `layers` names; traffic signs are drawn with the
// icons of mapillary_sprite_source, and a click on one steps through the images that saw it.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { api, launchBrowser, startService } from './harness.mjs';
import {
  COVERAGE_GREEN, MARKER_YELLOW, WAIT_MS, axeViolations, boxOf, mapPixels, openPage, screenshot, waitForImage, waitForMapIdle,
} from './explorer-support.mjs';
import { pixelsNear } from './png.mjs';

describe('the explorer\'s filters and player in Chromium', () => {
  let service;
  let browser;
  let images;
  let sequence;

  before(async () => {
    service = await startService({ callbackUrl: 'http://127.0.0.1:9/callback' });
    browser = await launchBrowser();
    const found = await api(service.baseUrl, '/images?bbox=-180,-85,180,85&fields=id,sequence,geometry,captured_at,is_pano,creator&limit=2000', service.app.clientToken);
    assert.equal(found.status, 200, JSON.stringify(found.body));
    images = found.body.data;
    const years = new Set(images.map((image) => new Date(image.captured_at).getUTCFullYear()));
    assert.ok(years.size >= 2 && images.some((image) => image.is_pano) && new Set(images.map((image) => image.creator.username)).size >= 2,
      'fixtures with two years, panoramas and two creators');
    const perspective = images.find((image) => !image.is_pano);
    const ids = await api(service.baseUrl, `/image_ids?sequence_id=${perspective.sequence}`, service.app.clientToken);
    sequence = ids.body.data.map((image) => image.id);
    assert.ok(sequence.length >= 4, 'a perspective sequence of four images or more');
  });

  after(async () => {
    await browser?.close();
    await service?.stop();
  });

  async function open(page, problems, query, imageId) {
    await page.goto(`${service.baseUrl}/explore?${query}`);
    await waitForImage(page, problems, imageId);
    await page.waitForFunction(() => window.streetlevelExplorer?.mapLoaded, null, { timeout: WAIT_MS });
    await waitForMapIdle(page);
  }

  // The images inside the map's view that `keep` keeps, counted from the fixtures' list.
  async function expectedInView(page, keep) {
    const [west, south, east, north] = await page.evaluate(() => window.streetlevelExplorer.map.getBounds().toArray().flat());
    return images.filter((image) => {
      const [lng, lat] = image.geometry.coordinates;
      return lng >= west && lng <= east && lat >= south && lat <= north && keep(image);
    }).length;
  }

  // Waits for the count after the last change and returns it.
  async function countAfter(page, change) {
    const before = await page.evaluate(() => window.streetlevelExplorer.events.filter((event) => event.type === 'count').length);
    await change();
    await page.waitForFunction((seen) => window.streetlevelExplorer.events.filter((event) => event.type === 'count').length > seen, before);
    await waitForMapIdle(page);
    return page.evaluate(() => window.streetlevelExplorer.count.number);
  }

  const drawnImages = (page) => page.evaluate(() => {
    const { map } = window.streetlevelExplorer;
    return map.queryRenderedFeatures({ layers: ['image'] }).map((feature) => feature.properties);
  });

  // Whether each switchable MapLibre layer is drawn.
  const visibility = (page) => page.evaluate(() => {
    const { map } = window.streetlevelExplorer;
    return Object.fromEntries(['overview', 'sequence', 'image', 'density', 'point', 'traffic_sign']
      .map((id) => [id, map.getLayoutProperty(id, 'visibility') ?? 'visible']));
  });

  test('layers: the switcher shows and hides them by keyboard, the URL names them, a reload keeps them', async (t) => {
    const { page, problems, finish } = await openPage(browser);
    try {
      // Without the parameter: images and the density, no map features or signs.
      await open(page, problems, `image=${sequence[0]}`, sequence[0]);
      assert.deepEqual(await visibility(page), {
        overview: 'visible', sequence: 'visible', image: 'visible', density: 'visible', point: 'none', traffic_sign: 'none',
      });
      assert.equal(new URL(page.url()).searchParams.has('layers'), false);
      const greenWith = await mapPixels(page, await screenshot(page, 'explorer-layers-default'), COVERAGE_GREEN);
      await page.locator('summary', { hasText: 'Layers' }).click();
      assert.deepEqual(await axeViolations(page), [], 'with the layer switcher open');
      const imagesBox = page.getByLabel('Images and sequences');
      assert.equal(await imagesBox.isChecked(), true);
      assert.equal(await page.getByLabel('Traffic signs').isChecked(), false);
      // Space on the focused box hides the images: nothing of them drawn, the URL says which remain.
      await imagesBox.focus();
      await page.keyboard.press('Space');
      await page.waitForFunction(() => new URL(window.location.href).searchParams.get('layers') === 'density');
      await waitForMapIdle(page);
      assert.equal((await visibility(page)).image, 'none');
      const imagesDrawn = await page.evaluate(() => window.streetlevelExplorer.map.queryRenderedFeatures({ layers: ['image', 'sequence'] }).length);
      assert.equal(imagesDrawn, 0, 'no image point or sequence line drawn');
      const greenWithout = await mapPixels(page, await screenshot(page, 'explorer-layers-no-images'), COVERAGE_GREEN);
      t.diagnostic(`coverage pixels: ${greenWith} with the images, ${greenWithout} without`);
      assert.ok(greenWith > 50 && greenWithout < greenWith / 5, `${greenWith} to ${greenWithout}`);
      // Traffic signs on, then a reload: the same layers, the same boxes ticked.
      await page.getByLabel('Traffic signs').check();
      await page.waitForFunction(() => new URL(window.location.href).searchParams.get('layers') === 'density,signs');
      assert.equal((await visibility(page)).traffic_sign, 'visible');
      await page.reload();
      await waitForImage(page, problems, sequence[0]);
      await page.waitForFunction(() => window.streetlevelExplorer?.mapLoaded, null, { timeout: WAIT_MS });
      const reloaded = await visibility(page);
      assert.equal(reloaded.image, 'none');
      assert.equal(reloaded.traffic_sign, 'visible');
      assert.equal(reloaded.point, 'none');
      assert.equal(await page.getByLabel('Traffic signs').isChecked(), true);
      assert.equal(await page.getByLabel('Images and sequences').isChecked(), false);
      // Nothing ticked is `none`, not the default; every layer back is the default again.
      await page.locator('summary', { hasText: 'Layers' }).click();
      await page.getByLabel('Traffic signs').uncheck();
      await page.getByLabel('Density at low zoom').uncheck();
      await page.waitForFunction(() => new URL(window.location.href).searchParams.get('layers') === 'none');
      assert.deepEqual(Object.values(await visibility(page)), Array(6).fill('none'));
      await page.getByLabel('Images and sequences').check();
      await page.getByLabel('Density at low zoom').check();
      await page.waitForFunction(() => !new URL(window.location.href).searchParams.has('layers'));
    } finally {
      await finish();
    }
  });

  test('traffic signs drawn with the sprite\'s icons; a click steps through the images that saw one', async (t) => {
    const sprite = await fetch(`${service.baseUrl}/assets/mapillary_sprite_source/sprites/sprites.json`);
    assert.equal(sprite.status, 200);
    const icons = await sprite.json();
    // A traffic sign that two images or more saw, with an icon in the sprite.
    const signs = await api(service.baseUrl, '/map_features?bbox=-180,-85,180,85&object_values=regulatory--*,warning--*&fields=id,object_value,geometry,images&limit=200', service.app.clientToken);
    assert.equal(signs.status, 200, JSON.stringify(signs.body));
    const sign = signs.body.data.find((feature) => feature.images?.data?.length >= 2 && feature.object_value in icons);
    assert.ok(sign, 'a traffic sign seen twice or more, with an icon');
    const seenBy = sign.images.data.map((image) => image.id);
    const [lng, lat] = sign.geometry.coordinates;
    const { page, problems, finish } = await openPage(browser);
    try {
      await page.goto(`${service.baseUrl}/explore?map=18/${lat}/${lng}&layers=images,signs`);
      await page.waitForFunction(() => window.streetlevelExplorer?.mapLoaded, null, { timeout: WAIT_MS });
      await waitForMapIdle(page);
      // The sign is drawn by the icon layer (not the circle for classes without an icon).
      const drawn = await page.evaluate((id) => {
        const { map } = window.streetlevelExplorer;
        const feature = map.queryRenderedFeatures({ layers: ['traffic_sign'] }).find((candidate) => String(candidate.properties.id) === id);
        return feature ? { point: map.project(feature.geometry.coordinates), value: feature.properties.value } : null;
      }, sign.id);
      assert.ok(drawn, `sign ${sign.id} drawn as an icon`);
      // Its icon's pixels: the picture around it changes when the layer alone is hidden.
      const around = async (name) => {
        const shot = await screenshot(page, name);
        const map = await boxOf(page, '#map', shot);
        const pixels = [];
        for (let y = Math.round(drawn.point.y) - 10; y <= Math.round(drawn.point.y) + 10; y += 1) {
          for (let x = Math.round(drawn.point.x) - 10; x <= Math.round(drawn.point.x) + 10; x += 1) {
            const at = ((map.y + y) * shot.width + map.x + x) * shot.channels;
            pixels.push([shot.pixels[at], shot.pixels[at + 1], shot.pixels[at + 2]]);
          }
        }
        return pixels;
      };
      const withIcon = await around('explorer-sign');
      await page.evaluate(() => window.streetlevelExplorer.map.setLayoutProperty('traffic_sign', 'visibility', 'none'));
      await waitForMapIdle(page);
      const without = await around('explorer-sign-off');
      const changed = withIcon.filter((pixel, index) => pixel.some((value, channel) => Math.abs(value - without[index][channel]) > 40)).length;
      t.diagnostic(`sign ${sign.object_value}: ${changed} of ${withIcon.length} pixels are its icon's`);
      assert.ok(changed > 40, `the icon drew ${changed} pixels`);
      await page.evaluate(() => window.streetlevelExplorer.map.setLayoutProperty('traffic_sign', 'visibility', 'visible'));
      await waitForMapIdle(page);
      // A click on it: the panel names it and shows the first image that saw it; Next the second.
      const canvas = await page.locator('#map canvas').boundingBox();
      await page.mouse.click(canvas.x + drawn.point.x, canvas.y + drawn.point.y);
      const panel = page.getByRole('region', { name: /^Traffic sign: / });
      await panel.waitFor();
      await waitForImage(page, problems, seenBy[0]);
      assert.equal(await page.locator('#feature-position').textContent(), `Image 1 of ${seenBy.length} that saw it`);
      assert.equal(await page.getByRole('button', { name: 'Previous image' }).isDisabled(), true);
      assert.deepEqual(await axeViolations(page), [], 'with the map feature panel open');
      // The detection is outlined in the viewer (a tag; its pixels are counted on the second image).
      await page.waitForFunction(() => window.streetlevelExplorer.viewer.raw.getComponent('tag').getAll().length > 0);
      await page.getByRole('button', { name: 'Next image' }).click();
      await waitForImage(page, problems, seenBy[1]);
      assert.equal(await page.locator('#feature-position').textContent(), `Image 2 of ${seenBy.length} that saw it`);
      assert.equal(new URL(page.url()).searchParams.get('image'), seenBy[1]);
      // Yellow pixels of the outline in the viewer, polled until the frame shows them (or not).
      const yellowInViewer = async (name, done) => {
        let count = 0;
        for (let attempt = 0; attempt < 20; attempt += 1) {
          const shot = await screenshot(page, name);
          count = pixelsNear(shot, await boxOf(page, '#viewer', shot), MARKER_YELLOW, 40);
          if (done(count)) break;
        }
        return count;
      };
      const outlined = await yellowInViewer('explorer-feature', (count) => count > 15);
      // Close: the panel goes and the focus is on the map.
      await page.getByRole('button', { name: 'Close' }).click();
      assert.equal(await page.locator('#feature').isVisible(), false);
      assert.equal(await page.evaluate(() => window.streetlevelExplorer.viewer.raw.getComponent('tag').getAll().length), 0, 'no outline after Close');
      const plain = await yellowInViewer('explorer-feature-closed', (count) => count < outlined / 4);
      t.diagnostic(`detection outline: ${outlined} yellow pixels in the viewer, ${plain} without`);
      assert.ok(outlined > 15 && plain < outlined / 4, `the detection was outlined: ${outlined} against ${plain} pixels`);
      assert.ok(await page.evaluate(() => document.activeElement === window.streetlevelExplorer.map.getCanvas()));
      // Keyboard only: with the sign under the ring of the focused map, Enter opens it too.
      await page.evaluate((centre) => window.streetlevelExplorer.map.jumpTo({ center: centre }), [lng, lat]);
      await waitForMapIdle(page);
      await page.keyboard.press('Enter');
      await panel.waitFor();
      await page.waitForFunction((id) => window.streetlevelExplorer.events.some((event) => event.type === 'feature' && event.featureId === id
        && window.streetlevelExplorer.events.filter((other) => other.type === 'feature').length === 2), sign.id);
      await waitForImage(page, problems, seenBy[0]);
    } finally {
      await finish();
    }
  });

  test('panoramas only: fewer points drawn and counted, the URL says so, a reload keeps it', async (t) => {
    const { page, problems, finish } = await openPage(browser);
    try {
      await open(page, problems, `image=${sequence[0]}`, sequence[0]);
      const all = await countAfter(page, () => page.evaluate(() => window.streetlevelExplorer.map.jumpTo({ zoom: 14.2 })));
      assert.equal(all, await expectedInView(page, () => true), 'every image in view counted');
      const drawnAll = await drawnImages(page);
      const greenAll = await mapPixels(page, await screenshot(page, 'explorer-filter-off'), COVERAGE_GREEN);
      await page.locator('summary', { hasText: 'Filters' }).click();
      const panoramas = await countAfter(page, () => page.getByLabel('Panoramas').selectOption('only'));
      assert.equal(panoramas, await expectedInView(page, (image) => image.is_pano), 'the panoramas in view counted');
      assert.ok(panoramas < all, `${panoramas} panoramas of ${all} images`);
      const drawn = await drawnImages(page);
      assert.ok(drawn.length < drawnAll.length && drawn.every((properties) => properties.is_pano === true), `drawn: ${drawn.length} of ${drawnAll.length}`);
      const green = await mapPixels(page, await screenshot(page, 'explorer-filter-pano'), COVERAGE_GREEN);
      t.diagnostic(`count ${all} to ${panoramas}; points ${drawnAll.length} to ${drawn.length}; coverage pixels ${greenAll} to ${green}`);
      assert.ok(green < greenAll / 2, `coverage pixels ${greenAll} to ${green}`);
      assert.equal(new URL(page.url()).searchParams.get('pano'), 'only');
      assert.match(await page.locator('#count').textContent(), new RegExp(`^${panoramas} images? in view$`));
      await page.reload();
      await waitForImage(page, problems, sequence[0]);
      await page.waitForFunction((expected) => window.streetlevelExplorer.count?.number === expected, panoramas);
      assert.equal(await page.getByLabel('Panoramas').inputValue(), 'only');
    } finally {
      await finish();
    }
  });

  test('dates and creator: "next" goes only where the filter allows, and the date presets', async () => {
    const { page, problems, finish } = await openPage(browser);
    try {
      // The viewer's spatial arrows lead to the images the filter keeps (its sequence arrows
      // follow the sequence whatever the filter, as mapillary-js does).
      const neighbours = () => page.evaluate(() => window.streetlevelExplorer.viewer.neighbours());
      const neighboursBecome = (test) => page.waitForFunction(`(${test})(window.streetlevelExplorer.viewer.neighbours())`);
      await open(page, problems, `image=${sequence[1]}&from=2099-01-01`, sequence[1]);
      // Nothing is captured after 2099: no arrow, nothing drawn.
      await neighboursBecome('(ids) => ids.length === 0');
      assert.equal((await drawnImages(page)).length, 0);
      await page.locator('summary', { hasText: 'Filters' }).click();
      await page.getByRole('button', { name: 'Any date' }).click();
      await page.waitForFunction(() => !new URL(window.location.href).searchParams.has('from'));
      await neighboursBecome('(ids) => ids.length > 0');
      const around = await neighbours();
      assert.ok(around.includes(sequence[0]) || around.includes(sequence[2]), `arrows to the sequence's neighbours: ${around}`);
      // A creator who did not take these images: no arrow; theirs are the only points.
      const mine = images.find((image) => image.id === sequence[1]).creator.username;
      const other = images.find((image) => image.creator.username !== mine).creator.username;
      await page.getByLabel('Creator (username)').fill(other);
      await page.getByLabel('Creator (username)').press('Enter');
      await page.waitForFunction((name) => new URL(window.location.href).searchParams.get('creator') === name, other);
      await neighboursBecome('(ids) => ids.length === 0');
      await page.getByLabel('Creator (username)').fill(mine);
      await page.getByLabel('Creator (username)').press('Enter');
      await neighboursBecome('(ids) => ids.length > 0');
      const past = await page.evaluate(() => {
        document.querySelector('[data-months="12"]').click();
        return document.getElementById('from').value;
      });
      const expected = new Date();
      expected.setUTCMonth(expected.getUTCMonth() - 12);
      assert.equal(past, expected.toISOString().slice(0, 10));
    } finally {
      await finish();
    }
  });

  test('the player: position, last and first, play reversed, speed and lock in the URL', async () => {
    const { page, problems, finish } = await openPage(browser);
    try {
      await open(page, problems, `image=${sequence[2]}&speed=2`, sequence[2]);
      const position = page.locator('#position');
      await page.waitForFunction((text) => document.getElementById('position').textContent === text, `Image 3 of ${sequence.length}`);
      assert.match(await page.locator('#announce').textContent(), new RegExp(`image 3 of ${sequence.length} in its sequence`));
      assert.equal(await page.getByLabel('Speed').inputValue(), '2');
      await page.getByRole('button', { name: 'Last image of the sequence' }).click();
      await waitForImage(page, problems, sequence.at(-1));
      assert.equal(await position.textContent(), `Image ${sequence.length} of ${sequence.length}`);
      await page.getByRole('button', { name: 'First image of the sequence' }).click();
      await waitForImage(page, problems, sequence[0]);
      // Lock on the sequence: in the URL and in the viewer's filter.
      await page.getByRole('button', { name: 'Stay in this sequence' }).click();
      await page.waitForFunction((id) => new URL(window.location.href).searchParams.get('lock') === id,
        await page.evaluate(() => window.streetlevelExplorer.player.state.sequenceId));
      const lock = await page.evaluate(() => window.streetlevelExplorer.events.filter((event) => event.type === 'filters').at(-1).lock);
      assert.ok(lock, 'the viewer\'s filter holds the lock');
      // Play reversed from the third image: the second, then the first.
      await page.evaluate((id) => window.streetlevelExplorer.viewer.show(id), sequence[2]);
      await waitForImage(page, problems, sequence[2]);
      await page.getByRole('button', { name: 'Reverse' }).click();
      const played = await page.evaluate(() => window.streetlevelExplorer.events.length);
      await page.getByRole('button', { name: 'Play' }).click();
      // The images shown since, in order (the player may pass them quicker than a poll).
      await page.waitForFunction(({ from, expected }) => {
        const shown = window.streetlevelExplorer.events.slice(from).filter((event) => event.type === 'image').map((event) => event.imageId);
        return JSON.stringify(shown.slice(0, 2)) === JSON.stringify(expected);
      }, { from: played, expected: [sequence[1], sequence[0]] });
      await page.getByRole('button', { name: /Pause|Play/ }).click();
      await page.getByLabel('Speed').fill('0.5');
      await page.waitForFunction(() => new URL(window.location.href).searchParams.get('speed') === '0.5');
      assert.equal(new URL(page.url()).searchParams.get('lock'), lock);
    } finally {
      await finish();
    }
  });
});
