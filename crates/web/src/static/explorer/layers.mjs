// The map's layers the visitor chose, in the URL as `layers=<comma list>` (docs/API.md, "The
// explorer") and in the "Layers" switcher: `images` (image points, sequence lines and the
// overview points), `density` (the heat map below zoom 7), `points` (map features) and
// `signs` (traffic signs). Without the parameter the default ones are shown; names not known
// are ignored, so `layers=none` shows no layer.

export const LAYERS = ['images', 'density', 'points', 'signs'];
export const DEFAULT_LAYERS = ['images', 'density'];

// The MapLibre layers (map.mjs) each name shows.
export const MAP_LAYERS = {
  images: ['overview', 'sequence', 'image'],
  density: ['density'],
  points: ['point', 'point-other'],
  signs: ['traffic_sign', 'traffic_sign-other'],
};

// The layers named by `search` (a URL's query string): every `layers` value, each a comma
// list, in the order of LAYERS; the default ones without the parameter.
export function readLayers(search) {
  const params = new URLSearchParams(search);
  if (!params.has('layers')) return [...DEFAULT_LAYERS];
  const named = new Set(params.getAll('layers').flatMap((value) => value.split(',')));
  return LAYERS.filter((name) => named.has(name));
}

// The `layers` parameter of a choice: null (left out) for the default, `none` for nothing.
export function layersParameter(shown) {
  const list = LAYERS.filter((name) => shown.includes(name));
  if (list.join(',') === DEFAULT_LAYERS.join(',')) return null;
  return list.length > 0 ? list.join(',') : 'none';
}

// The switcher `form` (a checkbox named `layers` per layer): `changed(shown)` when the visitor
// ticks one; `show(shown)` sets the boxes (Back and Forward).
export function createLayerSwitcher(form, changed) {
  const boxes = () => [...form.querySelectorAll('input[type="checkbox"][name="layers"]')];
  const checked = () => boxes().filter((box) => box.checked).map((box) => box.value);
  form.addEventListener('change', () => changed(checked()));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    changed(checked());
  });
  return {
    show(shown) {
      for (const box of boxes()) box.checked = shown.includes(box.value);
    },
  };
}
