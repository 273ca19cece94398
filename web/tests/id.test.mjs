// The OpenStreetMap editor iD (npm `@openstreetmap/id`, its built `dist/` served from
// 127.0.0.1 as is) with its Mapillary photo, map feature and traffic sign layers against the
// real `streetlevel serve --compat original`, in headless Chromium.
//
// iD's Mapillary hosts and token are constants in its code: the browser's request
// interception routes every request to a Mapillary host to streetlevel (path and query as
// sent, so iD's `//<id>/detections` arrives as iD wrote it), and the one change made to iD is
// its client token, swapped for the fixture app's client token where iD.min.js is served.
// Nothing leaves this machine: the presets iD loads from jsDelivr are served from the npm
// packages installed beside it, the two OSM API calls it makes on a map without edits are
// answered by the harness (no OSM data, the API online), the background is `none`, and any
// other request fails the test.
//
// Each test has its own browser context and asserts that every request iD and its viewer made
// was answered with a 2xx (those to a Mapillary host, streetlevel's media URLs, iD's own files
// and what the harness answers alike), and that no page or console error occurred.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, normalize, sep } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { REPO, api, contentType, launchBrowser, serveFiles, startService } from './harness.mjs';
import { decodePng, pixelsNear, variety } from './png.mjs';

const WAIT_MS = 60_000;
const VIEWPORT = { width: 1280, height: 800 };
const NODE_MODULES = join(REPO, 'web', 'node_modules');
const ID_PACKAGE = join(NODE_MODULES, '@openstreetmap', 'id');
// iD 2.42.2's own client token (modules/services/mapillary.js), the one change made to iD.
const ID_TOKEN = 'MLY|4100327730013843|5bb78b81720791946a9a7b956c57b7cf';
const MAPILLARY_HOST = /(^|\.)mapillary\.com$/;
const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);
// The npm packages iD fetches from jsDelivr at start (its presets, the community index and the
// Wikipedia site list), installed from the lock file beside iD.
const CDN_HOST = 'cdn.jsdelivr.net';
const CDN_PACKAGES = ['@openstreetmap/id-tagging-schema', 'osm-community-index', 'wmf-sitematrix'];
const OSM_API_HOST = 'api.openstreetmap.org';
// The highlighted detection's outline in iD's viewer: `0xffff00` lines, filled at 30 %.
const OUTLINE_YELLOW = [0xff, 0xff, 0x00];

// What iD asks of its other services at start, answered here as empty: the tag statistics of
// taginfo, the metadata of the Bing imagery it does not show (background `none`), and the
// name-suggestion index (22 MB on npm, used when naming shops while editing).
const NSI_PREFIX = '/npm/name-suggestion-index@';
const EMPTY_NSI = {
  'dist/json/nsi.min.json': { nsi: {} },
  'dist/wikidata/dissolved.min.json': { dissolved: {} },
  'dist/json/featureCollection.min.json': { type: 'FeatureCollection', features: [] },
  'dist/json/genericWords.min.json': { genericWords: [] },
  'dist/json/replacements.min.json': { replacements: {} },
  'dist/json/trees.min.json': { trees: {} },
  'dist/wikidata/wikidata.min.json': { wikidata: {} },
};

function stubAnswer(url) {
  if (url.hostname === 'taginfo.openstreetmap.org' && url.pathname.startsWith('/api/4/')) {
    return { data: [], total: 0 };
  }
  if (url.hostname === 'dev.virtualearth.net' && url.pathname.startsWith('/REST/v1/Imagery/Metadata/')) {
    return {
      resourceSets: [{
        resources: [{
          imageUrl: 'https://ecn.{subdomain}.tiles.virtualearth.net/tiles/a{quadkey}.jpeg?g=1',
          imageUrlSubdomains: ['t0'],
          imageryProviders: [],
        }],
      }],
    };
  }
  if (url.hostname === CDN_HOST && url.pathname.startsWith(NSI_PREFIX)) {
    const rest = url.pathname.slice(NSI_PREFIX.length);
    return EMPTY_NSI[rest.slice(rest.indexOf('/') + 1)] ?? null;
  }
  if (url.hostname === OSM_API_HOST) return osmApiAnswer(url);
  return null;
}

// The answers of the OSM API that iD asks for on a map without edits: its status (online) and
// the map data of each tile (none).
function osmApiAnswer(url) {
  if (url.pathname === '/api/capabilities.json') {
    return {
      version: '0.6',
      api: {
        version: { minimum: '0.6', maximum: '0.6' },
        area: { maximum: 0.25 },
        waynodes: { maximum: 2000 },
        changesets: { maximum_elements: 10000 },
        status: { database: 'online', api: 'online', gpx: 'online' },
      },
      policy: { imagery: { blacklist: [] } },
    };
  }
  if (url.pathname === '/api/0.6/map.json') {
    return { version: '0.6', generator: 'streetlevel browser harness', elements: [] };
  }
  return null;
}

// `https://cdn.jsdelivr.net/npm/<package>@<version>/<file>`: the file of the installed
// package, or null.
function cdnFile(url) {
  for (const name of CDN_PACKAGES) {
    const prefix = `/npm/${name}@`;
    if (!url.pathname.startsWith(prefix)) continue;
    const rest = url.pathname.slice(prefix.length);
    const slash = rest.indexOf('/');
    if (slash < 0) return null;
    const root = join(NODE_MODULES, ...name.split('/'));
    const file = normalize(join(root, decodeURIComponent(rest.slice(slash + 1))));
    return file.startsWith(root + sep) && existsSync(file) ? file : null;
  }
  return null;
}

describe('iD with its Mapillary layers against streetlevel', () => {
  let service;
  let idFiles;
  let browser;
  // A point map feature with detections, the image its first detection names, and a traffic
  // sign: what the tests click and look for.
  let feature;
  let featureImage;
  let featureDetection;
  let sign;

  before(async () => {
    assert.ok(existsSync(join(ID_PACKAGE, 'dist', 'iD.min.js')), `${ID_PACKAGE} is installed (npm ci in web/)`);
    service = await startService({ callbackUrl: 'http://127.0.0.1/callback', serveArgs: ['--compat', 'original'] });
    const token = service.app.clientToken;
    // iD with the fixture token in place of its own: the only change to its files.
    idFiles = await serveFiles(join(ID_PACKAGE, 'dist'), {
      rewrite(path, bytes) {
        if (path !== 'iD.min.js') return bytes;
        const text = bytes.toString('utf8');
        assert.equal(text.split(ID_TOKEN).length - 1, 1, 'iD.min.js holds its Mapillary token once');
        return Buffer.from(text.replace(ID_TOKEN, token));
      },
    });
    browser = await launchBrowser();

    const world = '-180,-85,180,85';
    const features = await api(service.baseUrl, `/map_features?bbox=${world}&fields=id,geometry,object_type,object_value,images&limit=1000`, token);
    assert.equal(features.status, 200, JSON.stringify(features.body));
    for (const candidate of features.body.data.filter((item) => item.object_type === 'point')) {
      const detections = await api(service.baseUrl, `/${candidate.id}/detections?fields=id,value,image`, token);
      assert.equal(detections.status, 200, JSON.stringify(detections.body));
      if (detections.body.data.length > 0) {
        feature = candidate;
        featureDetection = detections.body.data[0];
        featureImage = featureDetection.image.id;
        break;
      }
    }
    assert.ok(feature, 'a point map feature with detections in the fixtures');
    // Its images, as map editors read them: each with its location.
    assert.ok(feature.images.data.some((image) => image.id === featureImage), JSON.stringify(feature.images));
    assert.ok(feature.images.data.every((image) => image.geometry?.type === 'Point'), JSON.stringify(feature.images));
    const [lon, lat] = feature.geometry.coordinates;
    sign = features.body.data
      .filter((item) => item.object_type === 'traffic_sign')
      .map((item) => ({ ...item, distance: Math.hypot(item.geometry.coordinates[0] - lon, item.geometry.coordinates[1] - lat) }))
      .sort((a, b) => a.distance - b.distance)[0];
    assert.ok(sign, 'a traffic sign in the fixtures');
  });

  after(async () => {
    await browser?.close().catch(() => {});
    await idFiles?.close();
    await service?.stop();
  });

  // A browser context for one test: every request leaving 127.0.0.1 is intercepted (Mapillary
  // hosts to streetlevel and recorded, jsDelivr and the OSM API answered locally, anything else
  // refused and recorded), and page and console errors are recorded.
  async function openEditor() {
    const context = await browser.newContext({ viewport: VIEWPORT });
    context.setDefaultTimeout(WAIT_MS);
    // iD's splash screen once per browser profile: seen.
    await context.addInitScript(() => window.localStorage.setItem('sawSplash', 'true'));
    const mapillary = [];
    const refused = [];
    const stubbed = [];
    await context.route('**/*', async (route) => {
      const request = route.request();
      const url = new URL(request.url());
      if (LOCAL_HOSTS.has(url.hostname)) {
        return route.continue();
      }
      if (MAPILLARY_HOST.test(url.hostname)) {
        // Path and query exactly as iD and its viewer wrote them, to streetlevel.
        const target = `${service.baseUrl}${url.pathname}${url.search}`;
        const record = { method: request.method(), url: url.href, status: null };
        mapillary.push(record);
        try {
          const response = await route.fetch({ url: target, maxRedirects: 0, timeout: WAIT_MS });
          record.status = response.status();
          return route.fulfill({ response });
        } catch (error) {
          record.status = `failed: ${error.message}`;
          return route.abort('failed');
        }
      }
      if (url.hostname === CDN_HOST) {
        const file = cdnFile(url);
        if (file) {
          return route.fulfill({
            status: 200,
            headers: { 'access-control-allow-origin': '*' },
            contentType: contentType(file),
            body: readFileSync(file),
          });
        }
      }
      const answer = stubAnswer(url);
      if (answer) {
        stubbed.push(url.host + url.pathname);
        return route.fulfill({
            status: 200,
            headers: { 'access-control-allow-origin': '*' },
            contentType: 'application/json; charset=utf-8',
          body: JSON.stringify(answer),
        });
      }
      refused.push(`${request.method()} ${url.href}`);
      return route.abort('blockedbyclient');
    });
    // Every answer the browser got, from any host (iD's own files, streetlevel's signed media
    // URLs, the Mapillary hosts routed to streetlevel, what the harness answers): not a 2xx is
    // a failure. Routing turns the browser's HTTP cache off, so there are no 304s. A request
    // that got no answer fails too, unless the page itself gave it up (`net::ERR_ABORTED`: iD
    // and its viewer cancel the loads of tiles and images they no longer need) or the harness
    // refused it (listed in `refused`).
    const not2xx = [];
    const unanswered = [];
    let [answered, cancelled] = [0, 0];
    context.on('response', (response) => {
      answered += 1;
      if (response.status() < 200 || response.status() > 299) {
        not2xx.push(`${response.status()} ${response.request().method()} ${response.url()}`);
      }
    });
    context.on('requestfailed', (request) => {
      const failure = request.failure()?.errorText ?? 'unknown';
      if (failure === 'net::ERR_ABORTED') {
        cancelled += 1;
      } else if (failure !== 'net::ERR_BLOCKED_BY_CLIENT') {
        unanswered.push(`${failure} ${request.method()} ${request.url()}`);
      }
    });
    const page = await context.newPage();
    const problems = [];
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console error: ${message.text()}`);
    });
    // What went wrong besides the test's own assertions, for a failure's message.
    const report = () => JSON.stringify({
      mapillaryNot2xx: mapillary.filter((record) => !(typeof record.status === 'number' && record.status >= 200 && record.status < 300)),
      not2xx,
      unanswered,
      refused,
      problems,
    }, null, 1);
    return {
      page,
      problems,
      // Runs `body(page, problems)`, then checks what every test must hold, and closes the
      // context either way; a failure of the body carries the record of requests and errors.
      async run(t, body) {
        try {
          await body(page, problems, mapillary);
        } catch (error) {
          const shot = join(tmpdir(), `streetlevel-id-failure-${Date.now()}.png`);
          await page.screenshot({ path: shot, timeout: WAIT_MS }).catch(() => {});
          error.message += `\nscreenshot: ${shot}\n${report()}`;
          await context.close().catch(() => {});
          throw error;
        }
        try {
          t.diagnostic(`${answered} answers, ${mapillary.length} of them from Mapillary hosts and ${stubbed.length} from the harness; ${cancelled} requests cancelled by the page`);
          assert.ok(mapillary.length > 0, 'iD asked the Mapillary hosts for something');
          const failed = mapillary.filter((record) => !(typeof record.status === 'number' && record.status >= 200 && record.status < 300));
          assert.deepEqual(failed, [], 'requests to the Mapillary hosts not answered with a 2xx');
          assert.deepEqual(not2xx, [], 'answers that are not a 2xx, from any host');
          assert.deepEqual(unanswered, [], 'requests that got no answer');
          assert.deepEqual(refused, [], 'requests to hosts other than 127.0.0.1 that the harness does not answer');
          assert.deepEqual(problems, [], 'page and console errors');
        } finally {
          await context.close().catch(() => {});
        }
      },
    };
  }

  // iD on the map at `[lon, lat]`, zoom `zoom`, with no background imagery and the Mapillary
  // photo, map feature and sign layers on, as its URL parameters allow.
  async function openMap(page, [lon, lat], zoom) {
    const hash = new URLSearchParams({
      background: 'none',
      map: `${zoom}/${lat}/${lon}`,
      photo_overlay: 'mapillary,mapillary-map-features,mapillary-signs',
    });
    await page.goto(`${idFiles.baseUrl}/#${hash.toString().replace(/%2C/g, ',').replace(/%2F/g, '/')}`);
    await page.locator('.layer-mapillary').waitFor({ state: 'attached' });
  }

  // The drawn elements of `selector` whose datum's `id` is `id` (any when `id` is null): their
  // centre on the page and their datum's id and value.
  function drawn(page, selector, id = null) {
    return page.evaluate(({ selector: css, id: wanted }) => [...document.querySelectorAll(css)]
      .filter((element) => wanted === null || String(element.__data__?.id) === wanted)
      .map((element) => {
        const box = element.getBoundingClientRect();
        return {
          id: String(element.__data__?.id),
          value: element.__data__?.value ?? null,
          x: box.x + box.width / 2,
          y: box.y + box.height / 2,
          width: box.width,
          height: box.height,
        };
      })
      .filter((item) => item.width > 0 && item.height > 0), { selector, id });
  }

  async function waitForDrawn(page, selector, id = null) {
    await page.waitForFunction(
      ({ selector: css, id: wanted }) => [...document.querySelectorAll(css)].some((element) => {
        const box = element.getBoundingClientRect();
        return (wanted === null || String(element.__data__?.id) === wanted) && box.width > 0 && box.height > 0;
      }),
      { selector, id },
      { timeout: WAIT_MS },
    );
    return drawn(page, selector, id);
  }

  // Each drawn icon refers to a symbol of the sprite iD loaded for the layer, and draws: the
  // pixels of its box change when the icons alone are hidden.
  async function assertIconsDrawn(t, page, selector, items) {
    const missing = await page.evaluate((css) => [...document.querySelectorAll(`${css} use`)]
      .map((use) => use.getAttribute('xlink:href') || use.getAttribute('href'))
      .filter((href) => !href || !document.querySelector(`symbol${href}, ${href}`)), selector);
    assert.deepEqual(missing, [], `${selector}: icons without a symbol in iD's sprites`);
    const shown = decodePng(await page.screenshot({ timeout: WAIT_MS }));
    await page.evaluate((css) => document.querySelectorAll(`${css} use`).forEach((use) => { use.style.visibility = 'hidden'; }), selector);
    const hidden = decodePng(await page.screenshot({ timeout: WAIT_MS }));
    await page.evaluate((css) => document.querySelectorAll(`${css} use`).forEach((use) => { use.style.visibility = ''; }), selector);
    const inside = items.filter((item) => item.x >= 12 && item.y >= 12 && item.x < VIEWPORT.width - 12 && item.y < VIEWPORT.height - 12);
    assert.ok(inside.length > 0, `${selector}: an icon inside the map`);
    for (const item of inside) {
      let changed = 0;
      for (let y = Math.floor(item.y - 12); y < Math.floor(item.y + 12); y += 1) {
        for (let x = Math.floor(item.x - 12); x < Math.floor(item.x + 12); x += 1) {
          const offset = (y * shown.width + x) * shown.channels;
          const difference = Math.abs(shown.pixels[offset] - hidden.pixels[offset])
            + Math.abs(shown.pixels[offset + 1] - hidden.pixels[offset + 1])
            + Math.abs(shown.pixels[offset + 2] - hidden.pixels[offset + 2]);
          if (difference > 30) changed += 1;
        }
      }
      t.diagnostic(`${selector} ${item.value} at ${Math.round(item.x)},${Math.round(item.y)}: ${changed} pixels drawn by the icon`);
      assert.ok(changed > 40, `the icon of ${item.value} is drawn: ${changed} of 576 pixels change without it`);
    }
  }

  // The viewer shows `imageId`: iD writes the photo it shows into the URL, and the viewer's
  // canvas holds a picture, not a blank.
  async function waitForPhoto(page, problems, imageId) {
    await page.waitForFunction(
      (id) => new URLSearchParams(window.location.hash.slice(1)).get('photo') === `mapillary/${id}`,
      imageId,
      { timeout: WAIT_MS },
    ).catch((error) => {
      throw new Error(`iD did not show ${imageId}: ${error.message}\n${problems.join('\n')}`);
    });
    const viewer = page.locator('#ideditor-mly');
    await viewer.waitFor({ state: 'visible' });
    await page.locator('#ideditor-mly canvas').first().waitFor({ state: 'visible' });
  }

  test('markers, sequences, map features and signs are drawn; a marker click opens the viewer on its photo', async (t) => {
    const editor = await openEditor();
    await editor.run(t, async (page, problems) => {
      await openMap(page, feature.geometry.coordinates, 17);
      const markers = await waitForDrawn(page, '.layer-mapillary .viewfield-group');
      const sequences = await waitForDrawn(page, '.layer-mapillary .sequence');
      const features = await waitForDrawn(page, '.layer-mapillary-map-features .icon-map-feature', feature.id);
      t.diagnostic(`${markers.length} markers, ${sequences.length} sequence lines, map feature ${feature.id} (${feature.object_value})`);
      assert.equal(features[0].value, feature.object_value);
      await assertIconsDrawn(t, page, '.layer-mapillary-map-features .icon-map-feature', await drawn(page, '.layer-mapillary-map-features .icon-map-feature'));

      // A marker away from the map's edges and from every map feature and sign icon (drawn
      // above the markers), whose centre is not covered by a neighbour: clicked, the viewer
      // opens on its photo.
      const icons = await drawn(page, '.layer-mapillary-detections g');
      const candidates = markers.filter((item) => item.x > 100 && item.y > 100 && item.x < VIEWPORT.width - 100
        && item.y < VIEWPORT.height - 100 && icons.every((icon) => Math.hypot(item.x - icon.x, item.y - icon.y) > 30));
      const uncovered = await page.evaluate((items) => items.filter((item) => {
        const top = document.elementFromPoint(item.x, item.y)?.closest('.viewfield-group');
        return top && String(top.__data__?.id) === item.id;
      }), candidates);
      const marker = uncovered[Math.floor(uncovered.length / 2)];
      assert.ok(marker, `a marker to click among ${markers.length}`);
      await page.mouse.click(marker.x, marker.y);
      await waitForPhoto(page, problems, marker.id);
      const shot = decodePng(await page.screenshot({ timeout: WAIT_MS }));
      const box = await page.locator('#ideditor-mly').boundingBox();
      const region = { x: Math.floor(box.x), y: Math.floor(box.y), width: Math.floor(box.width), height: Math.floor(box.height) };
      const score = variety(shot, region);
      t.diagnostic(`viewer on ${marker.id}: ${JSON.stringify(score)}`);
      assert.ok(score.colours > 20 && score.deviation > 5, `the viewer shows a picture: ${JSON.stringify(score)}`);
    });
  });

  test('traffic signs are drawn with their icons', async (t) => {
    const editor = await openEditor();
    await editor.run(t, async (page) => {
      await openMap(page, sign.geometry.coordinates, 17);
      const signs = await waitForDrawn(page, '.layer-mapillary-signs .icon-sign', sign.id);
      assert.equal(signs[0].value, sign.object_value);
      await assertIconsDrawn(t, page, '.layer-mapillary-signs .icon-sign', await drawn(page, '.layer-mapillary-signs .icon-sign'));
    });
  });

  test('a map feature click opens the image its detection names, with the outline drawn', async (t) => {
    const editor = await openEditor();
    await editor.run(t, async (page, problems, mapillary) => {
      await openMap(page, feature.geometry.coordinates, 17);
      const [icon] = await waitForDrawn(page, '.layer-mapillary-map-features .icon-map-feature', feature.id);
      await page.mouse.click(icon.x, icon.y);
      await waitForPhoto(page, problems, featureImage);
      // The highlighted detection: its caption (from the value) and its yellow outline.
      const caption = page.locator('#ideditor-mly span.mapillary-tag-symbol');
      await caption.first().waitFor({ state: 'visible' });
      const text = await caption.first().textContent();
      const parts = featureDetection.value.split('--');
      const named = (['flat', 'discrete', 'sign'].includes(parts[1]) ? parts[2] : parts[1]).replace(/-/g, ' ');
      assert.equal(text.toLowerCase(), named.toLowerCase(), `the caption of detection ${featureDetection.id}`);
      const box = await page.locator('#ideditor-mly').boundingBox();
      const region = { x: Math.floor(box.x), y: Math.floor(box.y), width: Math.floor(box.width), height: Math.floor(box.height) };
      // The outline is drawn in a WebGL frame after the caption: look again, a bounded number
      // of times, until it is there.
      let yellow = 0;
      for (let attempt = 0; attempt < 50 && yellow < 30; attempt += 1) {
        if (attempt > 0) await page.waitForTimeout(200);
        yellow = pixelsNear(decodePng(await page.screenshot({ timeout: WAIT_MS })), region, OUTLINE_YELLOW, 60);
      }
      t.diagnostic(`outline pixels of detection ${featureDetection.id} on ${featureImage}: ${yellow}`);
      assert.ok(yellow >= 30, `the outline of detection ${featureDetection.id} is drawn: ${yellow} yellow pixels`);
      // Both came through the paths iD writes, with an empty segment up front.
      const paths = mapillary.map((record) => new URL(record.url).pathname);
      for (const id of [feature.id, featureImage]) {
        assert.ok(paths.includes(`//${id}/detections`), `iD asked for //${id}/detections: ${JSON.stringify(paths)}`);
      }
    });
  });
});
