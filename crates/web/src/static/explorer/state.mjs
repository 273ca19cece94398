// The explorer's state as it appears in the page's URL (docs/API.md, "The explorer"):
// `image=<id>` and `map=<zoom>/<lat>/<lng>`. The map's moves replace the current history
// entry; a new image pushes one, so Back returns to the previous image and a reload restores
// the view.

const DIGITS = /^[0-9]+$/;

// The state named by `search` (a URL's query string); absent or malformed values are null.
export function readState(search) {
  const params = new URLSearchParams(search);
  const image = params.get('image');
  const state = { image: image && DIGITS.test(image) ? image : null, map: null };
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
