// The explorer's map: MapLibre over this server's own style (`/maps/style.json`: coverage,
// sequence lines, image points, map features), a density layer for the low zooms, and a
// marker for the image shown. It answers which image a click or the keyboard points at.
import { Map as MapLibreMap } from '/assets/maplibre-gl/dist/maplibre-gl.mjs';

import { FEATURE_LAYERS, SPRITE_PATH, withIcons } from './features.mjs';
import { densityStyle } from './filters.mjs';
import { MAP_LAYERS } from './layers.mjs';

const MARKER = '#ffd400';
// The layers drawing images, which the filters apply to.
const FILTERED = ['density', 'overview', 'sequence', 'image'];

const pointData = (lngLat) => ({
  type: 'FeatureCollection',
  features: lngLat ? [{ type: 'Feature', geometry: { type: 'Point', coordinates: lngLat }, properties: {} }] : [],
});

// Tile IDs are MVT unsigned integers, which MapLibre reads as JavaScript numbers: exact below
// 2^53, as every ID this server hands out is.
export function idOf(value) {
  return typeof value === 'number' && Number.isSafeInteger(value) ? String(value)
    : typeof value === 'string' && /^[0-9]+$/.test(value) ? value : null;
}

// The layers the explorer draws: the server's (without its background), with the overview
// points as a density heat map below zoom 7 (each weighted by its cell's `count`,
// filters.mjs `densityStyle`), the map features as icons (`icons`: the sprite's names, none without
// the sprite), and the marker of the image shown on top.
function layers(described, icons) {
  const plain = described.layers.filter((layer) => layer.type !== 'background');
  const own = icons.length > 0 ? withIcons(plain, icons) : plain;
  const density = {
    id: 'density',
    type: 'heatmap',
    source: 'coverage',
    'source-layer': 'overview',
    maxzoom: 7,
    paint: {
      'heatmap-weight': densityStyle({}, null).weight,
      'heatmap-intensity': ['interpolate', ['linear'], ['zoom'], 0, 2, 6, 3],
      'heatmap-radius': ['interpolate', ['linear'], ['zoom'], 0, 12, 6, 30],
      'heatmap-opacity': ['interpolate', ['linear'], ['zoom'], 5, 0.8, 7, 0],
      'heatmap-color': ['interpolate', ['linear'], ['heatmap-density'],
        0, 'rgba(53,175,109,0)', 0.3, 'rgba(53,175,109,0.6)', 0.7, '#35af6d', 1, '#d7f5a8'],
    },
  };
  const at = own.findIndex((layer) => layer.id === 'overview');
  own.splice(at < 0 ? 0 : at, 0, density);
  return [
    { id: 'background', type: 'background', paint: { 'background-color': '#1d2a33' } },
    ...own,
    { id: 'current', type: 'circle', source: 'current',
      paint: { 'circle-radius': 8, 'circle-color': MARKER, 'circle-stroke-color': '#000', 'circle-stroke-width': 2 } },
  ];
}

// The style: the server's layers over the configured base map when one loads within 5 s,
// else over a plain background. A base map that cannot be had is reported, not an error.
async function style(config, report) {
  const token = encodeURIComponent(config.accessToken);
  const described = await fetch(`${config.tilesUrl}/maps/style.json?access_token=${token}`)
    .then((response) => (response.ok ? response.json() : Promise.reject(new Error(`HTTP ${response.status}`))));
  const sources = { ...described.sources, current: { type: 'geojson', data: pointData(null) } };
  // The map features' icons (features.mjs), named `features:<class>` beside a base map's own.
  const spriteUrl = `${window.location.origin}${SPRITE_PATH}`;
  const icons = await fetch(`${spriteUrl}.json`)
    .then((response) => (response.ok ? response.json() : {}))
    .then((index) => Object.keys(index))
    .catch(() => []);
  const sprite = icons.length > 0 ? [{ id: 'features', url: spriteUrl }] : [];
  const plain = { version: 8, sprite, sources, layers: layers(described, icons) };
  if (!config.baseMapStyle) {
    return plain;
  }
  try {
    const response = await fetch(config.baseMapStyle, { signal: AbortSignal.timeout(5000) });
    const base = response.ok ? await response.json() : Promise.reject(new Error(`HTTP ${response.status}`));
    report('basemap', { url: config.baseMapStyle });
    const baseSprite = Array.isArray(base.sprite) ? base.sprite : base.sprite ? [{ id: 'default', url: base.sprite }] : [];
    return {
      ...base,
      sprite: [...baseSprite, ...sprite],
      sources: { ...base.sources, ...sources },
      layers: [...base.layers, ...plain.layers.slice(1)],
    };
  } catch (error) {
    report('basemap-unavailable', { url: config.baseMapStyle, message: String(error?.message ?? error) });
    return plain;
  }
}

const squared = (a, b) => (a.x - b.x) ** 2 + (a.y - b.y) ** 2;

// The squared distance in pixels from `point` to the segment `a`–`b`.
function toSegment(point, a, b) {
  const length = squared(a, b);
  const t = length === 0 ? 0 : Math.max(0, Math.min(1, ((point.x - a.x) * (b.x - a.x) + (point.y - a.y) * (b.y - a.y)) / length));
  return squared(point, { x: a.x + t * (b.x - a.x), y: a.y + t * (b.y - a.y) });
}

// `setVisible(id, 'visible' or 'none')` for each MapLibre layer that layers.mjs switches: visible
// when its name is in `shown`.
function visibility(shown, setVisible) {
  for (const [name, ids] of Object.entries(MAP_LAYERS)) {
    for (const id of ids) setVisible(id, shown.includes(name) ? 'visible' : 'none');
  }
}

// A map in `container` with the view `view` (`{center, zoom}` or `{bounds}`) showing the
// layers named in `shown` (layers.mjs).
export async function createMap(container, config, view, report, shown) {
  const described = await style(config, report);
  visibility(shown, (id, value) => {
    const layer = described.layers.find((candidate) => candidate.id === id);
    if (layer) layer.layout = { ...layer.layout, visibility: value };
  });
  const map = new MapLibreMap({
    container,
    ...view,
    attributionControl: false,
    style: described,
  });

  // The image drawn nearest to `point` (pixels) within `slack` pixels, else the image a
  // sequence line drawn there starts with (below zoom 14 the map draws lines only).
  function imageNear(point, slack) {
    const box = [[point.x - slack, point.y - slack], [point.x + slack, point.y + slack]];
    const images = map.queryRenderedFeatures(box, { layers: ['image'] })
      .filter((feature) => feature.geometry.type === 'Point' && idOf(feature.properties.id))
      .map((feature) => ({ id: idOf(feature.properties.id), away: squared(point, map.project(feature.geometry.coordinates)) }));
    if (images.length > 0) {
      images.sort((a, b) => a.away - b.away);
      return images[0].id;
    }
    let best = null;
    for (const feature of map.queryRenderedFeatures(box, { layers: ['sequence', 'overview'] })) {
      const id = idOf(feature.properties.image_id) ?? idOf(feature.properties.id);
      if (!id) continue;
      const { type, coordinates } = feature.geometry;
      const lines = type === 'LineString' ? [coordinates] : type === 'MultiLineString' ? coordinates : [[coordinates, coordinates]];
      for (const line of lines) {
        const pixels = line.map((lngLat) => map.project(lngLat));
        for (let index = 0; index + 1 < pixels.length; index += 1) {
          const away = toSegment(point, pixels[index], pixels[index + 1]);
          if (!best || away < best.away) best = { id, away };
        }
      }
    }
    return best?.id ?? null;
  }

  // The map feature drawn nearest to `point` within `slack` pixels: `{id, layer, value}`.
  function featureNear(point, slack) {
    const box = [[point.x - slack, point.y - slack], [point.x + slack, point.y + slack]];
    const ids = Object.keys(FEATURE_LAYERS).flatMap((id) => [id, `${id}-other`]).filter((id) => map.getLayer(id));
    if (ids.length === 0) return null;
    const found = map.queryRenderedFeatures(box, { layers: ids })
      .filter((feature) => feature.geometry.type === 'Point' && idOf(feature.properties.id))
      .map((feature) => ({
        id: idOf(feature.properties.id),
        layer: feature.layer.id.replace(/-other$/, ''),
        value: feature.properties.value,
        away: squared(point, map.project(feature.geometry.coordinates)),
      }));
    found.sort((a, b) => a.away - b.away);
    return found[0] ?? null;
  }

  // The filter of the coverage layers and the density's own, applied once the style has loaded.
  let filter = null;
  let density = densityStyle({}, null);
  const applyFilter = () => {
    for (const layer of FILTERED) {
      if (map.getLayer(layer)) map.setFilter(layer, layer === 'density' ? density.filter : filter);
    }
    if (map.getLayer('density')) map.setPaintProperty('density', 'heatmap-weight', density.weight);
  };
  map.on('load', applyFilter);

  // The layers shown: the style has the first choice; a later one is applied once it has loaded.
  let shownNow = shown;
  const applyLayers = () => visibility(shownNow, (id, value) => {
    if (map.getLayer(id)) map.setLayoutProperty(id, 'visibility', value);
  });
  map.on('load', applyLayers);

  return {
    map,
    imageNear,
    featureNear,
    // Shows the layers named in `names` (layers.mjs), hides the others.
    setLayers(names) {
      shownNow = names;
      if (map.isStyleLoaded()) applyLayers();
    },
    // Draws only the coverage `expression` keeps (null: all of it), and the density as
    // `densityOf` (filters.mjs `densityStyle`) says.
    setFilter(expression, densityOf = densityStyle({}, null)) {
      filter = expression;
      density = densityOf;
      if (map.loaded() || map.isStyleLoaded()) applyFilter();
    },
    // The image nearest the map's centre, anywhere in view.
    imageNearCentre() {
      const canvas = map.getCanvas();
      const centre = { x: canvas.clientWidth / 2, y: canvas.clientHeight / 2 };
      return imageNear(centre, Math.max(canvas.clientWidth, canvas.clientHeight));
    },
    // Marks the image shown at `lngLat` and, when `move`, centres the map on it.
    follow(lngLat, move) {
      map.getSource('current')?.setData(pointData(lngLat));
      if (move) {
        map.easeTo({ center: lngLat, zoom: Math.max(map.getZoom(), 15), duration: 300 });
      }
    },
  };
}
