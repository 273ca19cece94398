// The web surface in headless Chromium against the real binary: sign-in, the authorization
// page (allow and deny), the token exchange, the dashboard, and the three embed styles with
// the real mapillary-js viewer and MapLibre map. Screenshots go to STREETLEVEL_SCREENSHOTS
// (a folder) when it is set.
//
// Every test has a browser context of its own (no cookie or session carries over, so the tests
// pass in any order), every request to a host other than 127.0.0.1 or localhost is refused and
// fails the test, and so does any page error, console error, MapLibre error or entry in the
// embed page's own error list. Pixels are checked where users look: the viewer's centre
// against the thumbnail of the image it shows, and the map's drawn coverage.
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { PASSWORD, USERNAME, api, launchBrowser, serveData, startCallback, startService } from './harness.mjs';
import { colourStats, decodePng, middle, pixelsNear, variety } from './png.mjs';

const WAIT_MS = 60_000;
const SCREENSHOTS = process.env.STREETLEVEL_SCREENSHOTS || '';
const VIEWPORT = { width: 960, height: 540 };
const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);
// The coverage colour of the embed map (embed.mjs), as drawn.
const COVERAGE_GREEN = [0x35, 0xaf, 0x6d];

async function screenshot(page, name) {
  const buffer = await page.screenshot({ timeout: WAIT_MS });
  if (SCREENSHOTS) {
    mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), timeout: WAIT_MS });
  }
  return decodePng(buffer);
}

// A box of an element clipped to the screenshot, in whole pixels.
async function boxOf(page, selector, shot) {
  const box = await page.locator(selector).boundingBox();
  const x = Math.max(0, Math.floor(box.x));
  const y = Math.max(0, Math.floor(box.y));
  return {
    x,
    y,
    width: Math.min(shot.width - x, Math.floor(box.width)),
    height: Math.min(shot.height - y, Math.floor(box.height)),
  };
}

// A fresh browser context for one test: its own cookies, a guard that refuses (and records)
// every request leaving this machine, and a record of page and console errors.
async function openPage(browser) {
  const context = await browser.newContext({ viewport: VIEWPORT });
  context.setDefaultTimeout(WAIT_MS);
  const offHost = [];
  await context.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (LOCAL_HOSTS.has(url.hostname)) {
      return route.continue();
    }
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
    problems,
    // Fails on anything recorded, then closes the context.
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

async function signIn(page, baseUrl) {
  await page.goto(`${baseUrl}/login`);
  await page.getByLabel('Username').fill(USERNAME);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL((url) => url.pathname !== '/login');
}

// The mean colour and near-black fraction of a region of a thumbnail, decoded by the browser
// (no JPEG decoder in node without another package): `fraction` of its width and height
// around the point `centre` ([0..1, 0..1]).
function thumbnailStats(page, url, fraction, centre = [0.5, 0.5]) {
  return page.evaluate(async ({ url: thumbUrl, fraction: part, centre: [cx, cy] }) => {
    const response = await fetch(thumbUrl);
    if (!response.ok) throw new Error(`${thumbUrl}: ${response.status}`);
    const bitmap = await createImageBitmap(await response.blob());
    const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
    const context = canvas.getContext('2d');
    context.drawImage(bitmap, 0, 0);
    const width = Math.floor(bitmap.width * part);
    const height = Math.floor(bitmap.height * part);
    const left = Math.min(bitmap.width - width, Math.max(0, Math.floor(bitmap.width * cx - width / 2)));
    const top = Math.min(bitmap.height - height, Math.max(0, Math.floor(bitmap.height * cy - height / 2)));
    const { data } = context.getImageData(left, top, width, height);
    let [r, g, b, black] = [0, 0, 0, 0];
    for (let index = 0; index < data.length; index += 4) {
      r += data[index];
      g += data[index + 1];
      b += data[index + 2];
      if (Math.max(data[index], data[index + 1], data[index + 2]) < 24) black += 1;
    }
    const count = data.length / 4;
    return { mean: [r / count, g / count, b / count], black: black / count, pixels: count };
  }, { url, fraction, centre });
}

const distance = (a, b) => Math.hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]);

describe('web surface in Chromium', () => {
  let callback;
  let service;
  let browser;
  let sequence;
  let panorama;

  before(async () => {
    callback = await startCallback();
    service = await startService({ callbackUrl: callback.url });
    browser = await launchBrowser();
    // An image with a successor in its sequence, for the embed tests.
    const found = await api(
      service.baseUrl,
      '/images?bbox=-180,-85,180,85&fields=id,sequence&limit=50',
      service.app.clientToken,
    );
    assert.equal(found.status, 200, JSON.stringify(found.body));
    for (const image of found.body.data) {
      const ids = await api(service.baseUrl, `/image_ids?sequence_id=${encodeURIComponent(image.sequence)}`, service.app.clientToken);
      assert.equal(ids.status, 200, JSON.stringify(ids.body));
      if (ids.body.data.length >= 4) {
        sequence = ids.body.data.map((entry) => entry.id);
        break;
      }
    }
    assert.ok(sequence, 'a sequence of at least four images in the fixtures');
    const all = await api(
      service.baseUrl,
      '/images?bbox=-180,-85,180,85&fields=id,is_pano&limit=1000',
      service.app.clientToken,
    );
    assert.equal(all.status, 200, JSON.stringify(all.body));
    panorama = all.body.data.find((image) => image.is_pano)?.id;
    assert.ok(panorama, 'a panorama in the fixtures');
  });

  after(async () => {
    await browser?.close().catch(() => {});
    await service?.stop();
    await callback?.close();
  });

  function connectUrl(state) {
    const query = new URLSearchParams({
      client_id: service.app.clientId,
      redirect_uri: callback.url,
      response_type: 'code',
      scope: 'read',
      state,
    });
    return `${service.baseUrl}/connect?${query}`;
  }

  test('sign in, allow, receive the code on the callback, exchange it and use the token', async () => {
    const { page, finish } = await openPage(browser);
    try {
      await page.goto(connectUrl('state-allow'));
      assert.match(new URL(page.url()).pathname, /^\/login$/);
      await page.getByLabel('Username').fill(USERNAME);
      await page.getByLabel('Password').fill(PASSWORD);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL(/\/connect\?/);
      await page.getByRole('heading', { name: /Browser Test App asks for access/ }).waitFor();
      await screenshot(page, 'consent');
      const hit = callback.next();
      await page.getByRole('button', { name: 'Allow' }).click();
      const query = await hit;
      assert.equal(query.state, 'state-allow');
      assert.ok(query.code, JSON.stringify(query));
      const exchange = await fetch(`${service.baseUrl}/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `OAuth ${service.app.clientSecret}` },
        body: JSON.stringify({
          grant_type: 'authorization_code',
          client_id: Number(service.app.clientId),
          code: query.code,
          redirect_uri: callback.url,
        }),
        signal: AbortSignal.timeout(30_000),
      });
      const token = await exchange.json();
      assert.equal(exchange.status, 200, JSON.stringify(token));
      assert.equal(token.token_type, 'bearer');
      const used = await api(service.baseUrl, `/${sequence[0]}?fields=id`, token.access_token);
      assert.equal(used.status, 200, JSON.stringify(used.body));
      assert.equal(used.body.id, sequence[0]);
    } finally {
      await finish();
    }
  });

  test('deny sends user_denied to the callback', async () => {
    const { page, finish } = await openPage(browser);
    try {
      await signIn(page, service.baseUrl);
      await page.goto(connectUrl('state-deny'));
      const hit = callback.next();
      await page.getByRole('button', { name: 'Deny' }).click();
      const query = await hit;
      assert.deepEqual(query, { error: 'user_denied', state: 'state-deny' });
    } finally {
      await finish();
    }
  });

  test('create an app on the dashboard and call the API with its client token', async () => {
    const { page, finish } = await openPage(browser);
    try {
      await signIn(page, service.baseUrl);
      await page.goto(`${service.baseUrl}/dashboard`);
      await page.getByLabel('Name').fill('Dashboard App');
      await page.getByLabel('Callback URL').fill('https://dashboard-app.example/callback');
      await page.getByRole('button', { name: 'Create app' }).click();
      await page.getByRole('heading', { name: 'Credentials of Dashboard App' }).waitFor();
      const clientToken = await page.locator('[data-credential="client_access_token"]').inputValue();
      const used = await api(service.baseUrl, `/${sequence[0]}?fields=id`, clientToken);
      assert.equal(used.status, 200, JSON.stringify(used.body));
      await page.goto(`${service.baseUrl}/dashboard`);
      await page.getByRole('heading', { name: 'Dashboard App' }).waitFor();
    } finally {
      await finish();
    }
  });

  test('embed without the npm packages: the fallback still image loads', async () => {
    // A second server on a copy of the data (one server per data directory: it holds a lock),
    // pointed at a node_modules folder that does not exist.
    const copy = mkdtempSync(join(tmpdir(), 'streetlevel-browser-fallback-'));
    cpSync(service.data, copy, { recursive: true });
    const fallback = await serveData(copy, ['--assets-dir', join(copy, 'absent-node-modules')]);
    const { page, finish } = await openPage(browser);
    try {
      await page.goto(`${fallback.baseUrl}/embed?image_key=${sequence[0]}&style=split`);
      await page.getByText('The interactive viewer is not available').waitFor();
      const still = page.locator('img.still');
      assert.equal(await still.getAttribute('alt'), `Street-level image ${sequence[0]}`);
      await page.waitForFunction(() => document.querySelector('img.still')?.complete === true, null, { timeout: WAIT_MS });
      const size = await still.evaluate((image) => ({ width: image.naturalWidth, height: image.naturalHeight }));
      assert.ok(size.width > 0 && size.height > 0, `the still image decoded: ${JSON.stringify(size)}`);
      const shot = await screenshot(page, 'embed-fallback');
      const score = variety(shot, await boxOf(page, 'img.still', shot));
      assert.ok(score.colours > 20 && score.deviation > 5, `the still image is not blank: ${JSON.stringify(score)}`);
      await finish();
    } finally {
      await page.context().close().catch(() => {});
      await fallback.stop();
      rmSync(copy, { recursive: true, force: true });
    }
  });

  // Opens the embed page on `imageId` and waits until the viewer has shown it and, with a map,
  // until the map has drawn its tiles.
  async function openEmbed(page, problems, style, imageId, baseUrl = service.baseUrl) {
    await page.goto(`${baseUrl}/embed?image_key=${imageId}&style=${style}`);
    await waitForImage(page, problems, imageId);
    if (style !== 'photo') {
      await page.waitForFunction(() => window.streetlevelEmbed.mapLoaded && window.streetlevelEmbed.tilesLoaded > 0, null, { timeout: WAIT_MS });
      await waitForMapIdle(page);
    }
  }

  async function waitForImage(page, problems, imageId) {
    await page.waitForFunction(
      (id) => {
        const embed = window.streetlevelEmbed;
        return embed?.currentImageId === id
          && embed.events.some((event) => event.type === 'image' && event.imageId === id)
          && embed.events.some((event) => event.type === 'load');
      },
      imageId,
      { timeout: WAIT_MS },
    ).catch(async (error) => {
      const state = await page.evaluate(() => ({
        current: window.streetlevelEmbed?.currentImageId,
        errors: window.streetlevelEmbed?.errors,
      })).catch(() => ({}));
      throw new Error(`the viewer did not show ${imageId}: ${error.message}: ${JSON.stringify(state)}\n${problems.join('\n')}`);
    });
  }

  // The map has loaded what it shows and drawn it.
  async function waitForMapIdle(page) {
    await page.waitForFunction(() => {
      const { map } = window.streetlevelEmbed;
      return map.loaded() && map.areTilesLoaded() && !map.isMoving();
    }, null, { timeout: WAIT_MS });
  }

  // Fails on MapLibre errors and on the embed page's own error list.
  async function assertNoEmbedErrors(page) {
    const { errors, mapErrors } = await page.evaluate(() => ({
      errors: window.streetlevelEmbed.errors,
      mapErrors: window.streetlevelEmbed.events.filter((event) => event.type === 'maperror'),
    }));
    assert.deepEqual(errors, [], 'the embed page\'s error list');
    assert.deepEqual(mapErrors, [], 'maperror events');
  }

  // The viewer's centre shows the picture: compared with the middle of the thumbnail the
  // image was made from, nearly as few near-black pixels and a close mean colour. A viewer
  // that projects the image onto too little geometry draws black there.
  // `centre` is the point of the image ([0..1, 0..1]) the viewer looks at.
  // `part` is the fraction of the thumbnail's width and height the viewer's middle shows.
  // `tolerance` bounds the distance of the mean colours (0..441).
  async function assertViewerShowsTheImage(t, page, shot, imageId, { centre = [0.5, 0.5], part = 0.3, tolerance = 40 } = {}) {
    const image = await api(service.baseUrl, `/${imageId}?fields=thumb_1024_url`, service.app.clientToken);
    assert.equal(image.status, 200, JSON.stringify(image.body));
    const viewer = colourStats(shot, middle(await boxOf(page, '#viewer', shot), 0.4));
    const thumbnail = await thumbnailStats(page, image.body.thumb_1024_url, part, centre);
    const report = JSON.stringify({ viewer, thumbnail }, (key, value) => (typeof value === 'number' ? Number(value.toFixed(3)) : value));
    t.diagnostic(`viewer centre against thumbnail of ${imageId} at ${centre}: ${report}`);
    assert.ok(viewer.black <= thumbnail.black + 0.02, `the viewer's centre is black where the image is not: ${report}`);
    assert.ok(distance(viewer.mean, thumbnail.mean) < tolerance, `the viewer's centre is not the image's colour: ${report}`);
  }

  // The map draws coverage: pixels of the coverage colour inside the map.
  async function assertCoverageDrawn(t, page, shot) {
    const map = await boxOf(page, '#map', shot);
    const green = pixelsNear(shot, map, COVERAGE_GREEN, 40);
    t.diagnostic(`coverage pixels: ${green} in ${map.width}x${map.height}`);
    assert.ok(green > 50, `the map draws ${green} coverage pixels in ${map.width}x${map.height}`);
  }

  for (const style of ['photo', 'split', 'classic']) {
    test(`embed ${style}: the viewer shows the image, the map draws coverage, next image`, async (t) => {
      const { page, problems, finish } = await openPage(browser);
      try {
        const [first, second] = sequence;
        await openEmbed(page, problems, style, first);
        const shot = await screenshot(page, `embed-${style}`);
        await assertViewerShowsTheImage(t, page, shot, first);
        if (style !== 'photo') {
          await assertCoverageDrawn(t, page, shot);
        }
        if (style === 'classic') {
          await page.getByRole('button', { name: 'Swap image and map' }).click();
          assert.match(await page.locator('#map').getAttribute('class'), /\blarge\b/);
          assert.match(await page.locator('#viewer').getAttribute('class'), /\bsmall\b/);
          await page.getByRole('button', { name: 'Swap image and map' }).click();
        }
        await page.evaluate(() => window.streetlevelEmbed.viewer.moveDir(window.mapillary.NavigationDirection.Next).catch(() => {}));
        await waitForImage(page, problems, second);
        await assertNoEmbedErrors(page);
      } finally {
        await finish();
      }
    });
  }

  test('a MapLibre map made from the style URL alone draws the coverage', async (t) => {
    const { page, finish } = await openPage(browser);
    try {
      const found = await api(service.baseUrl, '/images?bbox=-180,-85,180,85&fields=geometry&limit=1', service.app.clientToken);
      assert.equal(found.status, 200, JSON.stringify(found.body));
      const center = found.body.data[0].geometry.coordinates;
      const styleUrl = `${service.baseUrl}/maps/style.json?access_token=${encodeURIComponent(service.app.clientToken)}`;
      // A page of this origin with nothing but MapLibre and the style's URL.
      await page.goto(`${service.baseUrl}/health`);
      await page.setContent(`<!doctype html><html><head>
<link rel="stylesheet" href="/assets/maplibre-gl/dist/maplibre-gl.css"></head>
<body style="margin:0"><div id="map" style="width:960px;height:540px"></div>
<script type="module">
import { Map } from '/assets/maplibre-gl/dist/maplibre-gl.mjs';
window.mapErrors = [];
window.map = new Map({ container: 'map', style: ${JSON.stringify(styleUrl)}, center: ${JSON.stringify(center)}, zoom: 15, attributionControl: false });
window.map.on('error', (event) => window.mapErrors.push(String(event.error && event.error.message)));
</script></body></html>`);
      await page.waitForFunction(() => window.map && window.map.loaded() && window.map.areTilesLoaded() && !window.map.isMoving(), null, { timeout: WAIT_MS });
      const shot = await screenshot(page, 'style-url-alone');
      await assertCoverageDrawn(t, page, shot);
      assert.deepEqual(await page.evaluate(() => window.mapErrors), [], 'MapLibre errors');
    } finally {
      await finish();
    }
  });

  // A second server on a copy of the data with `--base-map-style-url`, and the embed page on it.
  async function withBaseMap(styleUrl, check) {
    const copy = mkdtempSync(join(tmpdir(), 'streetlevel-browser-basemap-'));
    cpSync(service.data, copy, { recursive: true });
    const server = await serveData(copy, ['--base-map-style-url', styleUrl]);
    try {
      await check(server.baseUrl);
    } finally {
      await server.stop();
      rmSync(copy, { recursive: true, force: true });
    }
  }

  test('embed split with a base map: streets under the coverage', async (t) => {
    // A base map style served from this machine (the tests have no internet): one land colour.
    const LAND = [0xe9, 0xc4, 0x6a];
    const styleServer = createServer((request, response) => {
      response.writeHead(200, { 'content-type': 'application/json', 'access-control-allow-origin': '*' });
      response.end(JSON.stringify({
        version: 8,
        sources: {},
        layers: [{ id: 'land', type: 'background', paint: { 'background-color': '#e9c46a' } }],
      }));
    });
    await new Promise((resolve) => styleServer.listen(0, '127.0.0.1', resolve));
    try {
      const styleUrl = `http://127.0.0.1:${styleServer.address().port}/style.json`;
      await withBaseMap(styleUrl, async (baseUrl) => {
        const { page, problems, finish } = await openPage(browser);
        try {
          await openEmbed(page, problems, 'split', sequence[0], baseUrl);
          const shot = await screenshot(page, 'embed-basemap');
          const map = await boxOf(page, '#map', shot);
          const land = pixelsNear(shot, map, LAND, 20);
          t.diagnostic(`base map pixels: ${land} in ${map.width}x${map.height}`);
          assert.ok(land > map.width * map.height * 0.3, `the base map is drawn: ${land} pixels`);
          await assertCoverageDrawn(t, page, shot);
          const events = await page.evaluate(() => window.streetlevelEmbed.events.map((event) => event.type));
          assert.ok(events.includes('basemap'), JSON.stringify(events));
          await assertNoEmbedErrors(page);
        } finally {
          await finish();
        }
      });
    } finally {
      styleServer.close();
    }
  });

  test('embed split with an unreachable base map: the coverage on the plain background', async (t) => {
    // A port that was free a moment ago and is closed now: the style cannot be fetched, as
    // without internet.
    const probe = createServer();
    await new Promise((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const { port } = probe.address();
    await new Promise((resolve) => probe.close(resolve));
    await withBaseMap(`http://127.0.0.1:${port}/style.json`, async (baseUrl) => {
      const { page, problems, finish } = await openPage(browser);
      try {
        await openEmbed(page, problems, 'split', sequence[0], baseUrl);
        const shot = await screenshot(page, 'embed-basemap-unreachable');
        await assertCoverageDrawn(t, page, shot);
        const events = await page.evaluate(() => window.streetlevelEmbed.events.map((event) => event.type));
        assert.ok(events.includes('basemap-unavailable'), JSON.stringify(events));
        await assertNoEmbedErrors(page);
        // The refused connection is the browser's own console line, and expected here.
        const refused = problems.filter((problem) => problem.includes('ERR_CONNECTION_REFUSED'));
        assert.ok(refused.length <= 1, JSON.stringify(problems));
        problems.splice(0, problems.length, ...problems.filter((problem) => !refused.includes(problem)));
      } finally {
        await finish();
      }
    });
  });

  test('embed photo of a panorama: the picture ahead, above and to the side', async (t) => {
    const { page, problems, finish } = await openPage(browser);
    try {
      await openEmbed(page, problems, 'photo', panorama);
      // Ahead, up towards the sky, and back to the left: basic image coordinates the viewer
      // centres on, and the same points of the thumbnail.
      for (const [index, centre] of [[0.5, 0.5], [0.5, 0.3], [0.15, 0.5]].entries()) {
        if (index > 0) {
          await page.evaluate((basic) => window.streetlevelEmbed.viewer.setCenter(basic), centre);
          await page.waitForFunction(
            (basic) => window.streetlevelEmbed.viewer.getCenter().then((now) => Math.hypot(now[0] - basic[0], now[1] - basic[1]) < 0.02),
            centre,
            { timeout: WAIT_MS, polling: 100 },
          );
        }
        const shot = await screenshot(page, `embed-panorama-${index}`);
        // The viewer shows about 100 degrees of the 360 across: its middle 40 % is about a
        // tenth of the panorama's width. A perspective view of an equirectangular region is
        // not a crop of it, so the mean colours agree less than for a perspective image.
        await assertViewerShowsTheImage(t, page, shot, panorama, { centre, part: 0.12, tolerance: 50 });
      }
      await assertNoEmbedErrors(page);
    } finally {
      await finish();
    }
  });

  for (const style of ['split', 'classic']) {
    test(`embed ${style}: clicking an image or a sequence on the map moves the viewer there`, async () => {
      const { page, problems, finish } = await openPage(browser);
      try {
        // Start inside the sequence, so that its first image (where a click on the line
        // leads) is another one.
        const start = sequence[1];
        await openEmbed(page, problems, style, start);
        // An image point drawn on the map, other than the current one and away from it.
        const target = await page.evaluate((current) => {
          const { map } = window.streetlevelEmbed;
          const here = map.project(window.streetlevelEmbed.currentLngLat);
          const { width, height } = map.getCanvas().getBoundingClientRect();
          const candidates = map.queryRenderedFeatures({ layers: ['image'] })
            .map((feature) => ({ id: String(feature.properties.id), point: map.project(feature.geometry.coordinates) }))
            .filter(({ id, point }) => id !== current
              && point.x > 10 && point.y > 10 && point.x < width - 10 && point.y < height - 10
              && Math.hypot(point.x - here.x, point.y - here.y) > 12);
          candidates.sort((a, b) => Math.hypot(b.point.x - here.x, b.point.y - here.y) - Math.hypot(a.point.x - here.x, a.point.y - here.y));
          return candidates[0] && { id: candidates[0].id, x: candidates[0].point.x, y: candidates[0].point.y };
        }, start);
        assert.ok(target, 'an image point on the map other than the current image');
        const canvas = await page.locator('#map canvas').boundingBox();
        await page.mouse.click(canvas.x + target.x, canvas.y + target.y);
        await waitForImage(page, problems, target.id);
        // Zoomed out, the map draws sequences without image points: a click on a line moves
        // the viewer to the sequence's first image.
        await page.evaluate(() => window.streetlevelEmbed.map.jumpTo({ zoom: 13 }));
        await waitForMapIdle(page);
        const line = await page.evaluate(() => {
          const { map } = window.streetlevelEmbed;
          const { width, height } = map.getCanvas().getBoundingClientRect();
          for (const feature of map.queryRenderedFeatures({ layers: ['sequence'] })) {
            const lines = feature.geometry.type === 'LineString' ? [feature.geometry.coordinates] : feature.geometry.coordinates;
            for (const coordinates of lines) {
              for (let index = 0; index + 1 < coordinates.length; index += 1) {
                const a = map.project(coordinates[index]);
                const b = map.project(coordinates[index + 1]);
                const point = { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 };
                if (point.x > 10 && point.y > 10 && point.x < width - 10 && point.y < height - 10) {
                  return { imageId: String(feature.properties.image_id), sequenceId: feature.properties.id, ...point };
                }
              }
            }
          }
          return null;
        });
        assert.ok(line, 'a sequence line on the map');
        const current = await page.evaluate(() => window.streetlevelEmbed.currentImageId);
        assert.notEqual(line.imageId, current, 'the click must change the image to be seen');
        await page.mouse.click(canvas.x + line.x, canvas.y + line.y);
        await waitForImage(page, problems, line.imageId);
        await assertNoEmbedErrors(page);
      } finally {
        await finish();
      }
    });
  }
});
