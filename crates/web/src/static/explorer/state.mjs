// The explorer's state as it appears in the page's URL (docs/API.md, "The explorer"):
// `image=<id>`, `map=<zoom>/<lat>/<lng>`, the filters `from`, `to` (YYYY-MM-DD), `pano`
// (`only` or `exclude`), `creator` (a username), `org` (an organisation ID), and the player's
// `lock` (a sequence ID) and `speed`, the map's `layers` (layers.mjs), and `compare` (the
// image compared with the one shown, dates.mjs). The map's moves
// replace the current history
// entry; a new image pushes one, so Back returns to the previous image and a reload restores
// the view.

const DIGITS = /^[0-9]+$/;
const DATE = /^\d{4}-\d{2}-\d{2}$/;

// The state named by `search` (a URL's query string); absent or malformed values are null.
export function readState(search) {
  const params = new URLSearchParams(search);
  const image = params.get('image');
  const valid = (name, test) => {
    const value = params.get(name);
    return value && test(value) ? value : null;
  };
  const state = {
    image: image && DIGITS.test(image) ? image : null,
    map: null,
    filters: {
      from: valid('from', (value) => DATE.test(value) && Number.isFinite(Date.parse(value))),
      to: valid('to', (value) => DATE.test(value) && Number.isFinite(Date.parse(value))),
      pano: valid('pano', (value) => value === 'only' || value === 'exclude'),
      creator: valid('creator', (value) => value.length <= 100),
      org: valid('org', (value) => DIGITS.test(value)),
    },
    lock: valid('lock', (value) => value.length <= 100),
    compare: valid('compare', (value) => DIGITS.test(value)),
    speed: Number(valid('speed', (value) => Number(value) >= 0.25 && Number(value) <= 4) ?? 1),
  };
  const map = (params.get('map') || '').split('/').map(Number);
  if (map.length === 3 && map.every(Number.isFinite)
    && map[0] >= 0 && map[0] <= 24 && Math.abs(map[1]) <= 85.06 && Math.abs(map[2]) <= 180) {
    state.map = { zoom: map[0], center: [map[2], map[1]] };
  }
  return state;
}

// The `map` parameter of a view: zoom with two decimals, coordinates with six (about 10 cm).
export function mapParameter({ zoom, center: [lng, lat] }) {
  return `${zoom.toFixed(2)}/${lat.toFixed(6)}/${lng.toFixed(6)}`;
}

// Writes `changes` (parameter name to value, null to remove) into the page's URL, keeping
// every other parameter: a new history entry when `push`, else the current one replaced.
// Nothing is written when nothing changes.
export function writeState(changes, push = false) {
  const url = new URL(window.location.href);
  for (const [name, value] of Object.entries(changes)) {
    if (value === null || value === undefined || value === '') url.searchParams.delete(name);
    else url.searchParams.set(name, value);
  }
  // Slashes and commas stay readable in a URL people copy.
  const search = url.searchParams.toString().replaceAll('%2F', '/').replaceAll('%2C', ',');
  const next = `${url.pathname}${search ? `?${search}` : ''}${url.hash}`;
  if (next === `${window.location.pathname}${window.location.search}${window.location.hash}`) return;
  if (push) window.history.pushState(null, '', next);
  else window.history.replaceState(null, '', next);
}
