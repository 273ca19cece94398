// Every kind of imported image in the viewers (issue 32): real photos of Lund
// (`../shared/data/opensfm-blur-pairs/before_lund_images_*.jpg`, never copied into the
// repository) turned at test time into a perspective image with a direction, a track of three
// without one, a lone image without one, a portrait, Exif orientations 6, 8 and 3, a 360°
// equirectangular panorama and a partial panorama (`write_viewer_kinds`, an example of
// `streetlevel-ingest`), imported with `streetlevel import` into an empty data directory and
// served by the real binary.
//
// For each kind: the API's values (a compass angle for every image, filled as the official
// uploader fills it; the upright size), the thumbnail upright against the source photo, and
// the picture in three viewers: the embed page alone (`photo`), the embed page with its map
// (`split`) and the official viewer, mapillary-js, on a bare page with its default components,
// as third-party sites and map editors embed it. The viewer's canvas must show the image (few
// near-black pixels, the mean colour of the thumbnail's middle) upright (the bands around the
// middle in their places), with no page or console error and no request leaving this machine.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { REPO, api, binary, launchBrowser, serveData } from './harness.mjs';
import { colourStats, decodePng, middle, pixelsNear } from './png.mjs';

const WAIT_MS = 60_000;
const VIEWPORT = { width: 960, height: 540 };
const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);
const PHOTOS = resolve(REPO, '..', 'shared', 'data', 'opensfm-blur-pairs');
const SCREENSHOTS = process.env.STREETLEVEL_SCREENSHOTS || '';
// The embed map's marker of the current image (embed.mjs), as drawn.
const CURRENT_YELLOW = [0xff, 0xd4, 0x00];
const FIELDS = 'id,compass_angle,computed_compass_angle,width,height,is_pano,camera_type,exif_orientation,sequence,thumb_1024_url,thumb_2048_url,geometry';

function run(command, args, input) {
  const result = spawnSync(command, args, { input, encoding: 'utf8', timeout: 300_000 });
  if (result.error) throw new Error(`${command} ${args.join(' ')}: ${result.error.message}`);
  if (result.status !== 0) {
    throw new Error(`${command} ${args.join(' ')} exited with ${result.status}:\n${result.stdout}\n${result.stderr}`);
  }
  return result.stdout;
}

// The example beside the binary the suite runs (cargo's test build makes both).
function kindsWriter() {
  const path = join(dirname(binary()), 'examples', 'write_viewer_kinds');
  if (!existsSync(path)) {
    throw new Error(`${path} does not exist: build it with cargo test -p streetlevel-ingest --no-run (or cargo build -p streetlevel-ingest --example write_viewer_kinds)`);
  }
  return path;
}

const distance = (a, b) => Math.hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]);
const angleBetween = (a, b) => Math.abs(((a - b + 540) % 360) - 180);
const rounded = (value) => JSON.stringify(value, (key, number) => (typeof number === 'number' ? Number(number.toFixed(3)) : number));

// The initial bearing from one point to another (degrees), the formula the uploader uses.
function bearing([lon1, lat1], [lon2, lat2]) {
  const rad = Math.PI / 180;
  const y = Math.sin((lon2 - lon1) * rad) * Math.cos(lat2 * rad);
  const x = Math.cos(lat1 * rad) * Math.sin(lat2 * rad) - Math.sin(lat1 * rad) * Math.cos(lat2 * rad) * Math.cos((lon2 - lon1) * rad);
  return ((Math.atan2(y, x) / rad) + 360) % 360;
}

// Mean colour and near-black share of regions of a JPEG decoded by the browser: `regions` are
// [left, top, width, height] fractions of the picture.
function jpegRegions(page, source, regions) {
  return page.evaluate(async ({ source: from, regions: boxes }) => {
    const blob = typeof from === 'string' && from.startsWith('data:')
      ? await (await fetch(from)).blob()
      : await (async () => {
        const response = await fetch(from);
        if (!response.ok) throw new Error(`${from}: ${response.status}`);
        return response.blob();
      })();
    const bitmap = await createImageBitmap(blob, { imageOrientation: 'none' });
    const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
    const context = canvas.getContext('2d');
    context.drawImage(bitmap, 0, 0);
    return {
      width: bitmap.width,
      height: bitmap.height,
      regions: boxes.map(([left, top, width, height]) => {
        const { data } = context.getImageData(
          Math.floor(bitmap.width * left),
          Math.floor(bitmap.height * top),
          Math.max(1, Math.floor(bitmap.width * width)),
          Math.max(1, Math.floor(bitmap.height * height)),
        );
        let [r, g, b, black] = [0, 0, 0, 0];
        for (let index = 0; index < data.length; index += 4) {
          r += data[index];
          g += data[index + 1];
          b += data[index + 2];
          if (Math.max(data[index], data[index + 1], data[index + 2]) < 24) black += 1;
        }
        const count = data.length / 4;
        return { mean: [r / count, g / count, b / count], black: black / count };
      }),
    };
  }, { source, regions });
}

const dataUrl = (path) => `data:image/jpeg;base64,${readFileSync(path).toString('base64')}`;

// A fresh browser context: requests off this machine refused and recorded, page and console
// errors recorded.
async function openPage(browser) {
  const context = await browser.newContext({ viewport: VIEWPORT });
  context.setDefaultTimeout(WAIT_MS);
  const offHost = [];
  await context.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (LOCAL_HOSTS.has(url.hostname) || url.protocol === 'data:') return route.continue();
    offHost.push(url.href);
    return route.abort('blockedbyclient');
  });
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console error: ${message.text()}`);
  });
  page.on('response', (response) => {
    if (response.status() >= 400) problems.push(`${response.status()} for ${response.url()}`);
  });
  return {
    page,
    problems,
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

async function screenshot(page, name) {
  const buffer = await page.screenshot({ timeout: WAIT_MS });
  if (SCREENSHOTS) {
    mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), timeout: WAIT_MS });
  }
  return decodePng(buffer);
}

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

describe('every kind of imported image in the viewers', () => {
  let root;
  let server;
  let browser;
  let token;
  // Manifest entries with the image the import made of each.
  let kinds = [];

  before(async () => {
    if (!existsSync(join(PHOTOS, 'before_lund_images_12.jpg'))) {
      throw new Error(`the real photos are missing: ${PHOTOS} (see ../shared/data/README.md)`);
    }
    root = mkdtempSync(join(tmpdir(), 'streetlevel-viewer-kinds-'));
    const photos = join(root, 'photos');
    const data = join(root, 'data');
    kinds = JSON.parse(run(kindsWriter(), [PHOTOS, photos]));
    const imported = run(binary(), ['import', '--data', data, '--user', 'kinds', photos]);
    assert.match(imported, new RegExp(`imported ${kinds.length} images`), imported);
    run(binary(), ['users', 'create', '--data', data, '--username', 'owner'], 'viewer kinds password\n');
    const app = run(binary(), ['apps', 'create', '--data', data, '--name', 'Viewer Kinds', '--callback', 'http://127.0.0.1/callback', '--scopes', 'read']);
    token = app.match(/client_token: (\S+)/)[1];
    server = await serveData(data);
    browser = await launchBrowser();
    for (const kind of kinds) {
      const slack = 0.00002;
      const bbox = [kind.longitude - slack, kind.latitude - slack, kind.longitude + slack, kind.latitude + slack].join(',');
      const found = await api(server.baseUrl, `/images?bbox=${bbox}&fields=${FIELDS}`, token);
      assert.equal(found.status, 200, JSON.stringify(found.body));
      assert.equal(found.body.data.length, 1, `one image at ${kind.file}'s place: ${JSON.stringify(found.body)}`);
      [kind.image] = found.body.data;
    }
  });

  after(async () => {
    await browser?.close().catch(() => {});
    await server?.stop();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  test('the API: every image has a compass angle, filled as the uploader fills it, and its upright size', () => {
    const track = kinds.filter((kind) => kind.file.startsWith('track-'));
    assert.equal(track.length, 3);
    assert.equal(new Set(track.map((kind) => kind.image.sequence)).size, 1, 'the track is one sequence');
    assert.equal(new Set(kinds.map((kind) => kind.image.sequence)).size, kinds.length - 2, 'every other kind a sequence of its own');
    const travel = bearing([track[0].longitude, track[0].latitude], [track[1].longitude, track[1].latitude]);
    assert.ok(Math.abs(travel - 90) < 0.1, `the track heads east: ${travel}`);
    for (const kind of kinds) {
      const { image } = kind;
      const what = `${kind.file}: ${JSON.stringify(image)}`;
      assert.equal(typeof image.compass_angle, 'number', what);
      assert.equal(image.computed_compass_angle, image.compass_angle, what);
      // The file's direction; else the direction of travel towards the next image (the last
      // of the track takes the one before it); a lone image 0, as the uploader writes.
      const expected = kind.direction ?? (kind.file.startsWith('track-') ? travel : 0);
      assert.ok(angleBetween(image.compass_angle, expected) < 0.01, `${what}: expected ${expected}`);
      assert.equal(image.width, kind.width, what);
      assert.equal(image.height, kind.height, what);
      assert.equal(image.exif_orientation, 1, `thumbnails are upright: ${what}`);
      assert.equal(image.is_pano === true, kind.is_pano, what);
      assert.equal(image.camera_type, kind.is_pano ? 'equirectangular' : 'perspective', what);
    }
    const portrait = kinds.find((kind) => kind.file === 'portrait.jpg').image;
    assert.ok(portrait.height > portrait.width, JSON.stringify(portrait));
    for (const file of ['orientation-6.jpg', 'orientation-8.jpg', 'orientation-3.jpg']) {
      const { image } = kinds.find((kind) => kind.file === file);
      assert.deepEqual([image.width, image.height], [1024, 768], `${file} upright is the landscape photo`);
    }
  });

  test('the thumbnails are upright: their thirds match the source photo turned as the file says', async () => {
    const { page, finish } = await openPage(browser);
    try {
      await page.goto(`${server.baseUrl}/health`);
      // Thirds of the upright picture: top, bottom, left, right.
      const thirds = [[0, 0, 1, 1 / 3], [0, 2 / 3, 1, 1 / 3], [0, 0, 1 / 3, 1], [2 / 3, 0, 1 / 3, 1]];
      // Where the upright picture's thirds are in the source photo: the portrait is its
      // middle 576 x 768 pixels; the Exif-rotated files show the whole photo upright.
      const [cropLeft, cropWidth] = [224 / 1024, 576 / 1024];
      const portraitThirds = [
        [cropLeft, 0, cropWidth, 1 / 3],
        [cropLeft, 2 / 3, cropWidth, 1 / 3],
        [cropLeft, 0, cropWidth / 3, 1],
        [cropLeft + (cropWidth * 2) / 3, 0, cropWidth / 3, 1],
      ];
      for (const file of ['direction.jpg', 'portrait.jpg', 'orientation-6.jpg', 'orientation-8.jpg', 'orientation-3.jpg']) {
        const kind = kinds.find((entry) => entry.file === file);
        const thumbnail = await jpegRegions(page, kind.image.thumb_1024_url, thirds);
        const source = await jpegRegions(page, dataUrl(kind.sources[0]), file === 'portrait.jpg' ? portraitThirds : thirds);
        const report = rounded({ file, thumbnail, source });
        assert.equal(Math.sign(thumbnail.height - thumbnail.width), Math.sign(kind.height - kind.width), report);
        for (const [index, region] of thumbnail.regions.entries()) {
          assert.ok(distance(region.mean, source.regions[index].mean) < 12, `third ${index} of ${file}'s thumbnail: ${report}`);
        }
        // Opposite thirds differ (sky above, street below), so a turned thumbnail could not pass.
        const [top, bottom, left, right] = source.regions.map((region) => region.mean);
        assert.ok(Math.max(distance(top, bottom), distance(left, right)) > 25, `the photo's opposite thirds differ: ${report}`);
      }
    } finally {
      await finish();
    }
  });

  // Bands of the viewer, as [left, top, width, height] fractions of its box: above, below, left
  // and right of its middle. Their colours against the same parts of the thumbnail tell an
  // upright picture from a turned or mirrored one, which the middle's colour cannot.
  const BANDS = [[0.3, 0.05, 0.4, 0.25], [0.3, 0.7, 0.4, 0.25], [0.05, 0.3, 0.25, 0.4], [0.7, 0.3, 0.25, 0.4]];
  const BAND_NAMES = ['top', 'bottom', 'left', 'right'];
  // A panorama's viewer looks at the horizon, about 100 degrees wide and 56 high: the middle
  // 40 % of the viewer's upper and lower halves (about 40 by 28 degrees) against the
  // thumbnail's part above and below its horizon (a partial panorama is stretched over the
  // whole sphere, so the same fractions hold).
  const PANO_BANDS = [[0.3, 0, 0.4, 0.5], [0.3, 0.5, 0.4, 0.5]];
  const PANO_THUMBNAIL_BANDS = [[0.445, 0.345, 0.11, 0.155], [0.445, 0.5, 0.11, 0.155]];

  function viewerRegion(box, [left, top, width, height]) {
    return {
      x: box.x + Math.floor(box.width * left),
      y: box.y + Math.floor(box.height * top),
      width: Math.floor(box.width * width),
      height: Math.floor(box.height * height),
    };
  }

  // Whether the viewer's bands are the thumbnail's in their places: each opposite pair whose
  // thumbnail colours differ by over 25 (the pair can tell a turn) is closer to the
  // thumbnail's same bands than to the opposite ones; perspective bands each within `limit`.
  function bandsMatch(viewerBands, thumbnailBands, limit, perspective) {
    const pairs = [];
    for (let index = 0; index < viewerBands.length; index += 2) {
      const [a, b] = [index, index + 1];
      const apart = distance(thumbnailBands[a], thumbnailBands[b]);
      const straight = distance(viewerBands[a], thumbnailBands[a]) + distance(viewerBands[b], thumbnailBands[b]);
      const turned = distance(viewerBands[a], thumbnailBands[b]) + distance(viewerBands[b], thumbnailBands[a]);
      pairs.push({ apart, straight, turned, telling: apart > 25 });
    }
    const upright = pairs.some((pair) => pair.telling)
      && pairs.every((pair) => !pair.telling || pair.straight < pair.turned)
      && (!perspective || viewerBands.every((band, index) => distance(band, thumbnailBands[index]) < limit));
    return { upright, pairs };
  }

  // The viewer's canvas shows the image upright: its middle has about the thumbnail middle's
  // share of near-black pixels and its mean colour, and the bands around it are the
  // thumbnail's in their places.
  async function assertShowsTheImage(t, page, firstShot, kind, selector) {
    let box = await boxOf(page, selector, firstShot);
    // The part of the image the viewer's middle 40 % shows. A perspective image fills the
    // viewer: all of its height shows when it is wider than the viewer, else all of its width.
    // A panorama's viewer shows about 100 of its 360 degrees: a tenth of its width.
    let [partWidth, partHeight] = [0.12, 0.12];
    // The part of the image the whole viewer shows, in each direction.
    let [shownWidth, shownHeight] = [1, 1];
    if (!kind.is_pano) {
      const imageAspect = kind.width / kind.height;
      const viewerAspect = box.width / box.height;
      shownWidth = Math.min(1, viewerAspect / imageAspect);
      shownHeight = Math.min(1, imageAspect / viewerAspect);
      partWidth = 0.4 * shownWidth;
      partHeight = 0.4 * shownHeight;
    }
    const toImage = ([left, top, width, height]) => [
      0.5 + (left - 0.5) * shownWidth, 0.5 + (top - 0.5) * shownHeight, width * shownWidth, height * shownHeight,
    ];
    const url = kind.is_pano ? kind.image.thumb_2048_url : kind.image.thumb_1024_url;
    const region = [0.5 - partWidth / 2, 0.5 - partHeight / 2, partWidth, partHeight];
    const viewerBandBoxes = kind.is_pano ? PANO_BANDS : BANDS;
    const thumbnailBandBoxes = kind.is_pano ? PANO_THUMBNAIL_BANDS : BANDS.map(toImage);
    const [thumbnail, ...thumbnailBands] = (await jpegRegions(page, url, [region, ...thumbnailBandBoxes])).regions
      .map((part, index) => (index === 0 ? part : part.mean));
    // The viewer blends an image in and sharpens it as its tiles arrive after its load event:
    // a few more screenshots, half a second apart, until it has settled.
    const limit = kind.is_pano ? 50 : 40;
    let shot = firstShot;
    let viewer, whole, viewerBands, bands;
    for (let attempt = 0; ; attempt += 1) {
      box = await boxOf(page, selector, shot);
      viewer = colourStats(shot, middle(box, 0.4));
      whole = colourStats(shot, box);
      viewerBands = viewerBandBoxes.map((band) => colourStats(shot, viewerRegion(box, band)).mean);
      bands = bandsMatch(viewerBands, thumbnailBands, limit, !kind.is_pano);
      const settled = whole.black < 0.25 && viewer.black <= thumbnail.black + 0.02
        && distance(viewer.mean, thumbnail.mean) < limit && bands.upright;
      if (settled || attempt === 6) break;
      await new Promise((resolve) => setTimeout(resolve, 500));
      shot = await screenshot(page, `settle-${kind.file.replace('.jpg', '')}-${attempt}`);
    }
    const names = kind.is_pano ? ['upper', 'lower'] : BAND_NAMES;
    const report = rounded({
      viewer,
      whole,
      thumbnail,
      bands: Object.fromEntries(names.map((name, index) => [name, { viewer: viewerBands[index], thumbnail: thumbnailBands[index] }])),
      pairs: bands.pairs,
    });
    t.diagnostic(`${kind.file} in ${selector}: ${report}`);
    assert.ok(whole.black < 0.25, `the viewer is mostly black: ${report}`);
    assert.ok(viewer.black <= thumbnail.black + 0.02, `the viewer's centre is black where the image is not: ${report}`);
    assert.ok(distance(viewer.mean, thumbnail.mean) < limit, `the viewer's centre is not the image's colour: ${report}`);
    assert.ok(bands.upright, `the viewer's bands are not the thumbnail's in their places (turned, mirrored or elsewhere): ${report}`);
  }

  async function waitForEmbedImage(page, problems, imageId) {
    await page.waitForFunction(
      (id) => {
        const embed = window.streetlevelEmbed;
        return embed?.currentImageId === id
          && embed.events.some((event) => event.type === 'image' && event.imageId === id)
          && embed.events.some((event) => event.type === 'load');
      },
      imageId,
      { timeout: WAIT_MS },
    ).catch((error) => {
      throw new Error(`the viewer did not show ${imageId}: ${error.message}\n${problems.join('\n')}`);
    });
  }

  for (const style of ['photo', 'split']) {
    test(`embed ${style}: every kind shows`, async (t) => {
      for (const kind of kinds) {
        const { page, problems, finish } = await openPage(browser);
        try {
          await page.goto(`${server.baseUrl}/embed?image_key=${kind.image.id}&style=${style}`);
          await waitForEmbedImage(page, problems, kind.image.id);
          if (style === 'split') {
            await page.waitForFunction(() => {
              const { map } = window.streetlevelEmbed;
              return window.streetlevelEmbed.mapLoaded && map.loaded() && map.areTilesLoaded() && !map.isMoving();
            }, null, { timeout: WAIT_MS });
          }
          const shot = await screenshot(page, `kinds-${style}-${kind.file.replace('.jpg', '')}`);
          await assertShowsTheImage(t, page, shot, kind, '#viewer');
          if (style === 'split') {
            // The map draws the image's point (under the current image's marker, whose colour
            // is counted) from this server's coverage tiles.
            const drawn = await page.evaluate((id) => window.streetlevelEmbed.map
              .queryRenderedFeatures({ layers: ['image'] })
              .some((feature) => String(feature.properties.id) === id), kind.image.id);
            assert.ok(drawn, `${kind.file}: the map draws the image's point`);
            const marker = pixelsNear(shot, await boxOf(page, '#map', shot), CURRENT_YELLOW, 40);
            assert.ok(marker > 50, `${kind.file}: the map draws the current image's marker: ${marker} pixels`);
          }
          const { errors, mapErrors } = await page.evaluate(() => ({
            errors: window.streetlevelEmbed.errors,
            mapErrors: window.streetlevelEmbed.events.filter((event) => event.type === 'maperror'),
          }));
          assert.deepEqual(errors, [], `${kind.file}: the embed page's error list`);
          assert.deepEqual(mapErrors, [], `${kind.file}: maperror events`);
        } finally {
          await finish();
        }
      }
    });
  }

  test('the official viewer on a bare page, default components: every kind shows', async (t) => {
    for (const kind of kinds) {
      const { page, problems, finish } = await openPage(browser);
      try {
        await page.goto(`${server.baseUrl}/health`);
        await page.setContent(`<!doctype html><html><head>
<link rel="stylesheet" href="/assets/mapillary-js/dist/mapillary.css">
<script src="/assets/mapillary-js/dist/mapillary.js"></script></head>
<body style="margin:0"><div id="mly" style="width:960px;height:540px"></div>
<script>
window.shown = { image: null, load: false };
const viewer = new mapillary.Viewer({
  container: 'mly',
  dataProvider: new mapillary.GraphDataProvider({ endpoint: ${JSON.stringify(server.baseUrl)}, accessToken: ${JSON.stringify(token)} }),
  imageId: ${JSON.stringify(kind.image.id)},
  component: { cover: false },
});
viewer.on('image', (event) => { window.shown.image = event.image.id; });
viewer.on('load', () => { window.shown.load = true; });
</script></body></html>`);
        await page.waitForFunction((id) => window.shown.image === id && window.shown.load, kind.image.id, { timeout: WAIT_MS })
          .catch((error) => {
            throw new Error(`the official viewer did not show ${kind.file}: ${error.message}\n${problems.join('\n')}`);
          });
        const shot = await screenshot(page, `kinds-official-${kind.file.replace('.jpg', '')}`);
        await assertShowsTheImage(t, page, shot, kind, '#mly');
      } finally {
        await finish();
      }
    }
  });
});
