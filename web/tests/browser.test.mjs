// The web surface in headless Chromium against the real binary: sign-in, the authorization
// page (allow and deny), the token exchange, the dashboard, and the three embed styles with
// the real mapillary-js viewer and MapLibre map. Screenshots go to STREETLEVEL_SCREENSHOTS
// (a folder) when it is set.
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { PASSWORD, USERNAME, api, launchBrowser, serveData, startCallback, startService } from './harness.mjs';
import { decodePng, variety } from './png.mjs';

const WAIT_MS = 60_000;
const SCREENSHOTS = process.env.STREETLEVEL_SCREENSHOTS || '';
const VIEWPORT = { width: 960, height: 540 };

async function screenshot(page, name) {
  const buffer = await page.screenshot({ timeout: WAIT_MS });
  if (SCREENSHOTS) {
    mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), timeout: WAIT_MS });
  }
  return decodePng(buffer);
}

describe('web surface in Chromium', () => {
  let callback;
  let service;
  let browser;
  let context;
  let sequence;

  before(async () => {
    callback = await startCallback();
    service = await startService({ callbackUrl: callback.url });
    browser = await launchBrowser();
    context = await browser.newContext({ viewport: VIEWPORT });
    context.setDefaultTimeout(WAIT_MS);
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
      if (ids.body.data.length >= 3) {
        sequence = ids.body.data.map((entry) => entry.id);
        break;
      }
    }
    assert.ok(sequence, 'a sequence of at least three images in the fixtures');
  });

  after(async () => {
    await context?.close().catch(() => {});
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
    const page = await context.newPage();
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
    await page.close();
  });

  test('deny sends user_denied to the callback', async () => {
    const page = await context.newPage();
    await page.goto(connectUrl('state-deny'));
    const hit = callback.next();
    await page.getByRole('button', { name: 'Deny' }).click();
    const query = await hit;
    assert.deepEqual(query, { error: 'user_denied', state: 'state-deny' });
    await page.close();
  });

  test('create an app on the dashboard and call the API with its client token', async () => {
    const page = await context.newPage();
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
    await page.close();
  });

  test('embed without the npm packages: the fallback still image loads', async () => {
    // A second server on a copy of the data (one server per data directory: it holds a lock),
    // pointed at a node_modules folder that does not exist.
    const copy = mkdtempSync(join(tmpdir(), 'streetlevel-browser-fallback-'));
    cpSync(service.data, copy, { recursive: true });
    const fallback = await serveData(copy, ['--assets-dir', join(copy, 'absent-node-modules')]);
    const page = await context.newPage();
    try {
      await page.goto(`${fallback.baseUrl}/embed?image_key=${sequence[0]}&style=split`);
      await page.getByText('The interactive viewer is not available').waitFor();
      const still = page.locator('img.still');
      assert.equal(await still.getAttribute('alt'), `Street-level image ${sequence[0]}`);
      await page.waitForFunction(() => document.querySelector('img.still')?.complete === true, null, { timeout: WAIT_MS });
      const size = await still.evaluate((image) => ({ width: image.naturalWidth, height: image.naturalHeight }));
      assert.ok(size.width > 0 && size.height > 0, `the still image decoded: ${JSON.stringify(size)}`);
      const shot = await screenshot(page, 'embed-fallback');
      const box = await still.boundingBox();
      const x = Math.max(0, Math.floor(box.x));
      const y = Math.max(0, Math.floor(box.y));
      const region = {
        x,
        y,
        width: Math.min(shot.width - x, Math.floor(box.width)),
        height: Math.min(shot.height - y, Math.floor(box.height)),
      };
      const score = variety(shot, region);
      assert.ok(score.colours > 20 && score.deviation > 5, `the still image is not blank: ${JSON.stringify(score)}`);
    } finally {
      await page.close();
      await fallback.stop();
      rmSync(copy, { recursive: true, force: true });
    }
  });

  for (const style of ['photo', 'split', 'classic']) {
    test(`embed ${style}: the viewer shows the image, the map loads tiles, next image`, async () => {
      const page = await context.newPage();
      const problems = [];
      page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
      page.on('console', (message) => {
        if (message.type() === 'error') problems.push(`console: ${message.text()}`);
      });
      const [first, second] = sequence;
      await page.goto(`${service.baseUrl}/embed?image_key=${first}&style=${style}`);
      const seen = (id) =>
        page.waitForFunction(
          (imageId) => {
            const events = window.streetlevelEmbed?.events ?? [];
            return events.some((event) => event.type === 'image' && event.imageId === imageId)
              && events.some((event) => event.type === 'load');
          },
          id,
          { timeout: WAIT_MS },
        );
      await seen(first).catch((error) => {
        throw new Error(`${error.message}\n${problems.join('\n')}`);
      });
      if (style !== 'photo') {
        await page.waitForFunction(() => window.streetlevelEmbed.mapLoaded && window.streetlevelEmbed.tilesLoaded > 0, null, { timeout: WAIT_MS });
        await page.waitForFunction(() => window.streetlevelEmbed.map.areTilesLoaded(), null, { timeout: WAIT_MS });
        const features = await page.evaluate(() =>
          window.streetlevelEmbed.map.querySourceFeatures('coverage', { sourceLayer: 'sequence' }).length);
        assert.ok(features > 0, 'the coverage tiles hold sequences');
      }
      const shot = await screenshot(page, `embed-${style}`);
      const viewerBox = await page.locator('#viewer').boundingBox();
      const region = {
        x: Math.max(0, Math.floor(viewerBox.x)),
        y: Math.max(0, Math.floor(viewerBox.y)),
        width: Math.min(shot.width, Math.floor(viewerBox.width)),
        height: Math.min(shot.height, Math.floor(viewerBox.height)),
      };
      const score = variety(shot, region);
      assert.ok(score.colours > 20 && score.deviation > 5, `the viewer is not blank: ${JSON.stringify(score)}`);
      if (style === 'classic') {
        await page.getByRole('button', { name: 'Swap image and map' }).click();
        assert.match(await page.locator('#map').getAttribute('class'), /\blarge\b/);
        assert.match(await page.locator('#viewer').getAttribute('class'), /\bsmall\b/);
        await page.getByRole('button', { name: 'Swap image and map' }).click();
      }
      await page.evaluate(() => window.streetlevelEmbed.viewer.moveDir(window.mapillary.NavigationDirection.Next).catch(() => {}));
      await page.waitForFunction(
        (imageId) => window.streetlevelEmbed.currentImageId === imageId,
        second,
        { timeout: WAIT_MS },
      ).catch(async (error) => {
        const state = await page.evaluate(() => ({ current: window.streetlevelEmbed.currentImageId, errors: window.streetlevelEmbed.errors }));
        throw new Error(`${error.message}: ${JSON.stringify(state)}\n${problems.join('\n')}`);
      });
      await page.close();
    });
  }
});
