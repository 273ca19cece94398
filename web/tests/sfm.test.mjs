// Reconstructed imagery in the official viewer (issue 39): the first 12 photos of the Lund
// walk (`../shared/data/opensfm-blur-pairs/before_lund_images_*.jpg`, never copied into the
// repository) imported with `streetlevel import`, reconstructed by the server's worker with
// the engine the project's setup installs (pycolmap, `cargo xtask models`), then shown in
// mapillary-js on a bare page with its spatial component on. Navigating forward moves the
// camera forward along the walk (the direction of travel, not the photos' Exif compass,
// which says about 184° where the walk goes about 341°); the meshes of the images shown and
// their cluster load (200, parsed by the viewer without an error); no page or console error,
// no request leaving this machine.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { REPO, api, binary, launchBrowser, serveData } from './harness.mjs';

const WAIT_MS = 60_000;
const PHOTOS = resolve(REPO, '..', 'shared', 'data', 'opensfm-blur-pairs');
const ENGINE = process.env.STREETLEVEL_TEST_SFM || resolve(REPO, 'target', 'streetlevel-sfm');
const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);
const COUNT = 12;
const IN_CI = Boolean(process.env.CI) && process.env.CI !== 'false';
const ENGINE_THERE = existsSync(join(ENGINE, 'venv', 'bin', 'python'));
if (!ENGINE_THERE && IN_CI) {
  throw new Error(`the structure-from-motion engine is not in ${ENGINE}: cargo xtask test installs it`);
}

function run(command, args, input) {
  const result = spawnSync(command, args, { input, encoding: 'utf8', timeout: 300_000 });
  if (result.error) throw new Error(`${command} ${args.join(' ')}: ${result.error.message}`);
  if (result.status !== 0) {
    throw new Error(`${command} ${args.join(' ')} exited with ${result.status}:\n${result.stdout}\n${result.stderr}`);
  }
  return result.stdout;
}

// The initial bearing from one point to another (degrees).
function bearing([lon1, lat1], [lon2, lat2]) {
  const rad = Math.PI / 180;
  const y = Math.sin((lon2 - lon1) * rad) * Math.cos(lat2 * rad);
  const x = Math.cos(lat1 * rad) * Math.sin(lat2 * rad) - Math.sin(lat1 * rad) * Math.cos(lat2 * rad) * Math.cos((lon2 - lon1) * rad);
  return ((Math.atan2(y, x) / rad) + 360) % 360;
}

const angleBetween = (a, b) => Math.abs(((a - b + 540) % 360) - 180);
const metres = ([lon1, lat1], [lon2, lat2]) => Math.hypot(
  (lat2 - lat1) * 111_320,
  (lon2 - lon1) * 111_320 * Math.cos((lat1 * Math.PI) / 180),
);
const sleep = (ms) => new Promise((done) => { setTimeout(done, ms); });

describe('reconstructed imagery in the official viewer', { skip: ENGINE_THERE ? false : `no engine in ${ENGINE} (cargo xtask models)` }, () => {
  let root;
  let server;
  let browser;
  let token;
  let images = [];

  before(async () => {
    if (!existsSync(join(PHOTOS, 'before_lund_images_12.jpg'))) {
      throw new Error(`the real photos are missing: ${PHOTOS} (see ../shared/data/README.md)`);
    }
    root = mkdtempSync(join(tmpdir(), 'streetlevel-sfm-viewer-'));
    const photos = join(root, 'photos');
    const data = join(root, 'data');
    mkdirSync(photos);
    for (let number = 1; number <= COUNT; number += 1) {
      const name = `before_lund_images_${String(number).padStart(2, '0')}.jpg`;
      copyFileSync(join(PHOTOS, name), join(photos, name));
    }
    const imported = run(binary(), ['import', '--data', data, '--user', 'walker', '--blur', 'false', photos]);
    assert.match(imported, new RegExp(`imported ${COUNT} images`), imported);
    const app = run(binary(), ['apps', 'create', '--data', data, '--name', 'SfM viewer', '--callback', 'http://127.0.0.1/callback', '--scopes', 'read']);
    token = app.match(/client_token: (\S+)/)[1];
    server = await serveData(data, ['--sfm-workers', '1', '--sfm-engine-dir', ENGINE, '--sfm-settle-seconds', '0']);
    browser = await launchBrowser();
    const fields = 'id,captured_at,sequence,geometry,computed_geometry,compass_angle,computed_compass_angle,mesh,sfm_cluster,merge_cc,atomic_scale';
    const deadline = Date.now() + 600_000;
    for (;;) {
      const found = await api(server.baseUrl, `/images?bbox=13.19,55.69,13.20,55.71&fields=${fields}`, token);
      assert.equal(found.status, 200, JSON.stringify(found.body));
      images = found.body.data.sort((a, b) => a.captured_at - b.captured_at);
      if (images.length === COUNT && images.filter((image) => image.sfm_cluster).length >= COUNT - 1) break;
      if (Date.now() > deadline) throw new Error(`not reconstructed within 10 minutes:\n${JSON.stringify(images)}\n${server.log()}`);
      await sleep(1000);
    }
  });

  after(async () => {
    await browser?.close().catch(() => {});
    await server?.stop();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  test('navigating forward moves forward, with the meshes and the cluster loaded', async () => {
    const context = await browser.newContext({ viewport: { width: 960, height: 540 } });
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
    const media = [];
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console error: ${message.text()}`);
    });
    page.on('response', (response) => {
      const { pathname } = new URL(response.url());
      if (pathname.startsWith('/media/mesh/') || pathname.startsWith('/media/sfm/')) {
        media.push({ path: pathname, status: response.status() });
      }
      if (response.status() >= 400) problems.push(`${response.status()} for ${response.url()}`);
    });
    try {
      // A registered image with a registered one after it, in the walk's middle.
      const start = images.findIndex((image, index) => index >= 3 && image.sfm_cluster && images[index + 1]?.sfm_cluster);
      assert.ok(start >= 0, JSON.stringify(images));
      const [from, to] = [images[start], images[start + 1]];
      const walk = bearing(images[0].geometry.coordinates, images[COUNT - 1].geometry.coordinates);
      assert.ok(angleBetween(walk, 341) < 20, `the walk goes about 341°: ${walk}`);
      assert.ok(angleBetween(from.compass_angle, walk) > 90, `the Exif compass is the wrong way: ${from.compass_angle}`);
      assert.ok(angleBetween(from.computed_compass_angle, walk) < 25, `the computed compass looks along the walk: ${from.computed_compass_angle}`);
      await page.goto(`${server.baseUrl}/health`);
      await page.setContent(`<!doctype html><html><head>
<link rel="stylesheet" href="/assets/mapillary-js/dist/mapillary.css">
<script src="/assets/mapillary-js/dist/mapillary.js"></script></head>
<body style="margin:0"><div id="mly" style="width:960px;height:540px"></div>
<script>
window.shown = { image: null, load: false, moves: [] };
window.viewer = new mapillary.Viewer({
  container: 'mly',
  dataProvider: new mapillary.GraphDataProvider({ endpoint: ${JSON.stringify(server.baseUrl)}, accessToken: ${JSON.stringify(token)} }),
  imageId: ${JSON.stringify(from.id)},
  component: { cover: false, spatial: true },
});
viewer.on('image', (event) => { window.shown.image = event.image.id; });
viewer.on('load', () => { window.shown.load = true; });
</script></body></html>`);
      await page.waitForFunction((id) => window.shown.image === id && window.shown.load, from.id, { timeout: WAIT_MS })
        .catch((error) => { throw new Error(`the viewer did not show ${from.id}: ${error.message}\n${problems.join('\n')}`); });
      // The first image's mesh is what the viewer projects it onto; wait for it and the
      // cluster the spatial component draws.
      const deadline = Date.now() + WAIT_MS;
      while (!(media.some((entry) => entry.path.startsWith('/media/mesh/')) && media.some((entry) => entry.path.startsWith('/media/sfm/')))) {
        if (Date.now() > deadline) throw new Error(`no mesh and cluster requested: ${JSON.stringify(media)}\n${problems.join('\n')}`);
        await sleep(200);
      }
      const before = await page.evaluate(async () => {
        const position = await window.viewer.getPosition();
        return [position.lng, position.lat];
      });
      // The viewer looks the way the camera looked: along the walk, as the reconstruction
      // says, not where the Exif compass points.
      const looking = await page.evaluate(() => window.viewer.getBearing());
      assert.ok(angleBetween(looking, from.computed_compass_angle) < 10, `the viewer looks towards ${looking}°, the computed compass says ${from.computed_compass_angle}°`);
      assert.ok(angleBetween(looking, walk) < 30, `the viewer looks towards ${looking}°, the walk goes ${walk}°`);
      await page.evaluate(() => window.viewer.moveDir(mapillary.NavigationDirection.Next));
      await page.waitForFunction((id) => window.shown.image === id, to.id, { timeout: WAIT_MS });
      // Let the transition end.
      await sleep(1500);
      const after = await page.evaluate(async () => {
        const position = await window.viewer.getPosition();
        return [position.lng, position.lat];
      });
      const moved = metres(before, after);
      const heading = bearing(before, after);
      const computedStep = bearing(from.computed_geometry.coordinates, to.computed_geometry.coordinates);
      assert.ok(moved > 0.5, `the camera moved ${moved} m`);
      assert.ok(angleBetween(heading, walk) < 45, `the camera moved towards ${heading}°, the walk goes ${walk}°`);
      assert.ok(angleBetween(heading, computedStep) < 30, `the camera moved towards ${heading}°, the reconstruction steps towards ${computedStep}°`);
      assert.ok(media.every((entry) => entry.status === 200), JSON.stringify(media));
      assert.deepEqual(offHost, [], 'requests to hosts other than 127.0.0.1 or localhost');
      assert.deepEqual(problems, [], 'page and console errors');
    } finally {
      await context.close().catch(() => {});
    }
  });
});
