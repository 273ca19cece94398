// Time to the first photo of the explorer (issue 38 item 11), measured in Debian's headless
// Chromium against the real binary on loopback: `node web/bench/first_photo.mjs [ROUNDS]`
// (after `cargo xtask test --suite browser` has built the binary and installed
// web/node_modules). Each round opens `/explore?image=<id>` in a fresh browser context (an
// empty cache, as a first visit) and reads, in milliseconds from the navigation's start:
// the first contentful paint; the paint of the photo's placeholder (the 1024 px thumbnail the
// page preloads and shows as a plain <img> before any JavaScript has run: its
// largest-contentful-paint entry); and the viewer's first frame (mapillary-js's `load`
// event, which the explorer records). Also the bytes received by then. Prints each round and
// the medians. docs/PERFORMANCE.md quotes it; no test asserts a duration.
import { api, launchBrowser, startService } from '../tests/harness.mjs';

const rounds = Number(process.argv[2] ?? 7);
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};

const service = await startService({ callbackUrl: 'http://127.0.0.1:9/callback' });
const browser = await launchBrowser();
try {
  const found = await api(service.baseUrl, '/images?bbox=-180,-85,180,85&fields=id,is_pano&limit=50', service.app.clientToken);
  const image = found.body.data.find((candidate) => !candidate.is_pano).id;
  const results = [];
  for (let round = 0; round < rounds; round += 1) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 720 } });
    const page = await context.newPage();
    await page.addInitScript(() => {
      window.paints = [];
      new PerformanceObserver((list) => {
        for (const entry of list.getEntries()) window.paints.push({ id: entry.element?.id ?? '', at: entry.startTime });
      }).observe({ type: 'largest-contentful-paint', buffered: true });
    });
    await page.goto(`${service.baseUrl}/explore?image=${image}`);
    await page.waitForFunction(() => window.streetlevelExplorer?.events.some((event) => event.type === 'load'), null, { timeout: 60_000 });
    const figures = await page.evaluate(() => {
      const firstPaint = performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? NaN;
      const placeholder = window.paints.find((paint) => paint.id === 'placeholder')?.at ?? NaN;
      const viewer = window.streetlevelExplorer.events.find((event) => event.type === 'load').at;
      const bytes = (until) => performance.getEntriesByType('resource')
        .filter((entry) => entry.responseEnd <= until)
        .reduce((sum, entry) => sum + entry.encodedBodySize, 0)
        + performance.getEntriesByType('navigation')[0].encodedBodySize;
      return { firstPaint, placeholder, viewer, placeholderBytes: bytes(placeholder), viewerBytes: bytes(viewer) };
    });
    results.push(figures);
    console.log(`round ${round + 1}: first paint ${figures.firstPaint.toFixed(0)} ms, placeholder ${figures.placeholder.toFixed(0)} ms (${(figures.placeholderBytes / 1024).toFixed(0)} KiB received), viewer's first frame ${figures.viewer.toFixed(0)} ms (${(figures.viewerBytes / 1024).toFixed(0)} KiB)`);
    await context.close();
  }
  const of = (name) => median(results.map((figures) => figures[name]));
  console.log(`median of ${rounds}: first paint ${of('firstPaint').toFixed(0)} ms, placeholder ${of('placeholder').toFixed(0)} ms, viewer's first frame ${of('viewer').toFixed(0)} ms (${(of('viewerBytes') / 1024).toFixed(0)} KiB)`);
} finally {
  await browser.close();
  await service.stop();
}
