// Runs the real `streetlevel` binary for the browser tests: fixtures into a temporary data
// directory, a user and an app made with the admin commands, `streetlevel serve` on
// 127.0.0.1:0 (the bound address read from the line it prints), a local callback listener
// for the OAuth redirect, and Debian's chromium driven by playwright-core. Every wait is
// bounded.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync, readFileSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve, dirname, extname, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
export const REPO = resolve(HERE, '..', '..');
export const PASSWORD = 'browser-test password';
export const USERNAME = 'tester';
export const CHROMIUM = process.env.STREETLEVEL_CHROMIUM || '/usr/bin/chromium';
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--use-angle=swiftshader',
  '--enable-unsafe-swiftshader',
];

export function binary() {
  const path = process.env.STREETLEVEL_BIN || join(REPO, 'target', 'debug', 'streetlevel');
  if (!existsSync(path)) {
    throw new Error(`${path} does not exist: build it with cargo build -p streetlevel or set STREETLEVEL_BIN`);
  }
  return path;
}

function run(command, args, { input, timeoutMs = 300_000 } = {}) {
  const result = spawnSync(command, args, { input, encoding: 'utf8', timeout: timeoutMs });
  if (result.error) {
    throw new Error(`${command} ${args.join(' ')}: ${result.error.message}`);
  }
  if (result.status !== 0) {
    throw new Error(`${command} ${args.join(' ')} exited with ${result.status}:\n${result.stdout}\n${result.stderr}`);
  }
  return result.stdout;
}

// `key: value` lines, as the admin commands print them.
function keyValues(text) {
  return Object.fromEntries(
    text.split('\n').filter((line) => line.includes(': ')).map((line) => {
      const index = line.indexOf(': ');
      return [line.slice(0, index).trim(), line.slice(index + 2).trim()];
    }),
  );
}

export function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// A local HTTP listener standing in for an app's callback URL: records each request's query.
export async function startCallback() {
  const hits = [];
  const waiters = [];
  const server = createServer((request, response) => {
    const url = new URL(request.url, 'http://127.0.0.1');
    const hit = Object.fromEntries(url.searchParams.entries());
    hits.push(hit);
    waiters.splice(0).forEach((resolveHit) => resolveHit(hit));
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end('<!doctype html><title>callback</title><p>callback received</p>');
  });
  await new Promise((resolveListen) => server.listen(0, '127.0.0.1', resolveListen));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}/callback`,
    hits,
    next(ms = 15_000) {
      return withTimeout(new Promise((resolveHit) => waiters.push(resolveHit)), ms, 'the callback request');
    },
    close() {
      return new Promise((resolveClose) => server.close(resolveClose));
    },
  };
}

// Seed 3 with 120 images holds perspective sequences and a panorama sequence.
// `serveArgs` go to `streetlevel serve` (for example `['--compat', 'original']`).
// `fixtureArgs` go to `streetlevel fixtures` (for example `['--revisits', '1']`); `users` are
// more usernames made with PASSWORD.
export async function startService({ images = 120, seed = 3, callbackUrl, serveArgs = [], fixtureArgs = [], users = [] }) {
  const bin = binary();
  const root = mkdtempSync(join(tmpdir(), 'streetlevel-browser-'));
  const data = join(root, 'data');
  run(bin, ['fixtures', '--out', data, '--images', String(images), '--seed', String(seed), ...fixtureArgs]);
  for (const username of [USERNAME, ...users]) {
    run(bin, ['users', 'create', '--data', data, '--username', username], { input: `${PASSWORD}\n` });
  }
  const app = keyValues(
    run(bin, ['apps', 'create', '--data', data, '--name', 'Browser Test App', '--callback', callbackUrl, '--scopes', 'read']),
  );
  const server = await serveData(data, serveArgs);
  return {
    baseUrl: server.baseUrl,
    data,
    app: {
      clientId: app.client_id,
      clientToken: app.client_token,
      clientSecret: app.client_secret,
    },
    log: server.log,
    async stop() {
      await server.stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

// `streetlevel serve` on an existing data directory with extra arguments (for example
// `--assets-dir`), on 127.0.0.1:0; resolves once it prints its address.
export async function serveData(data, extraArgs = []) {
  // No reconstruction of the photos a test imports unless it asks (`--sfm-workers 1`): the
  // flag wins over the variable.
  const child = spawn(binary(), ['serve', '--data', data, '--addr', '127.0.0.1:0', ...extraArgs], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, STREETLEVEL_SFM_WORKERS: '0' },
  });
  let log = '';
  child.stderr.on('data', (chunk) => {
    log += chunk;
  });
  const address = await withTimeout(
    new Promise((resolveAddress, reject) => {
      let out = '';
      child.stdout.on('data', (chunk) => {
        out += chunk;
        const match = out.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
        if (match) resolveAddress(match[1]);
      });
      child.on('exit', (code) => reject(new Error(`streetlevel serve exited with ${code}:\n${log}`)));
    }),
    120_000,
    'streetlevel serve printing its address',
  );
  return {
    baseUrl: address,
    log: () => log,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((resolveExit) => child.once('exit', resolveExit));
        child.kill('SIGTERM');
        await withTimeout(exited, 10_000, 'streetlevel serve stopping').catch(() => child.kill('SIGKILL'));
      }
    },
  };
}

export async function launchBrowser() {
  const { chromium } = await import('playwright-core');
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, timeout: 60_000 });
}

// GET with a token, JSON answer.
export async function api(baseUrl, path, token) {
  const response = await fetch(`${baseUrl}${path}`, {
    headers: { authorization: `OAuth ${token}` },
    signal: AbortSignal.timeout(30_000),
  });
  const text = await response.text();
  let body = null;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  return { status: response.status, body };
}

const CONTENT_TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.gif': 'image/gif',
  '.jpg': 'image/jpeg',
  '.map': 'application/json',
};

// The content type of a file served by `serveFiles`, from its name.
export function contentType(path) {
  return CONTENT_TYPES[extname(path)] || 'application/octet-stream';
}

// A static file server on 127.0.0.1:0 for a folder (a web app's built files, such as iD's
// `dist/`): GET and HEAD of the files under `root`, `index.html` for `/`, 404 for anything
// else. `rewrite(path, bytes)` may replace a file's bytes as served (relative path in URL
// form). Every path requested is recorded in `requests`.
export async function serveFiles(root, { rewrite = (_path, bytes) => bytes } = {}) {
  const base = resolve(root);
  const requests = [];
  const server = createServer((request, response) => {
    const url = new URL(request.url, 'http://127.0.0.1');
    let path = decodeURIComponent(url.pathname).replace(/^\/+/, '');
    if (path === '' || path.endsWith('/')) path += 'index.html';
    const file = resolve(base, path);
    requests.push(url.pathname);
    let bytes = null;
    if ((file === base || file.startsWith(base + sep)) && (request.method === 'GET' || request.method === 'HEAD')) {
      try {
        if (statSync(file).isFile()) bytes = rewrite(path, readFileSync(file));
      } catch {
        bytes = null;
      }
    }
    if (bytes === null) {
      response.writeHead(404, { 'content-type': 'text/plain' });
      response.end('not found');
      return;
    }
    response.writeHead(200, { 'content-type': contentType(file), 'content-length': bytes.length, 'cache-control': 'no-store' });
    response.end(request.method === 'HEAD' ? undefined : bytes);
  });
  await new Promise((resolveListen) => server.listen(0, '127.0.0.1', resolveListen));
  return {
    baseUrl: `http://127.0.0.1:${server.address().port}`,
    requests,
    close() {
      server.closeAllConnections();
      return new Promise((resolveClose) => server.close(resolveClose));
    },
  };
}
