// The embed page: the mapillary-js viewer and, for the split and classic styles, a MapLibre map
// of this server's coverage tiles that follows the viewer; a click on an image or a sequence on
// the map moves the viewer there. State for tests and embedding pages is kept on
// `window.streetlevelEmbed`.
import { Map as MapLibreMap } from '/assets/maplibre-gl/dist/maplibre-gl.mjs';

const config = JSON.parse(document.getElementById('embed-config').textContent);
const statusLine = document.getElementById('status');
const state = {
  config,
  events: [],
  errors: [],
  currentImageId: null,
  currentLngLat: null,
  mapLoaded: false,
  tilesLoaded: 0,
  viewer: null,
  map: null,
};
window.streetlevelEmbed = state;

function record(type, detail = {}) {
  state.events.push({ type, ...detail });
}

function fail(message) {
  state.errors.push(message);
  statusLine.textContent = message;
}

window.addEventListener('error', (event) => fail(`Error: ${event.message}`));
window.addEventListener('unhandledrejection', (event) =>
  fail(`Error: ${event.reason && event.reason.message ? event.reason.message : event.reason}`));

const point = ([lng, lat]) => ({
  type: 'FeatureCollection',
  features: [{ type: 'Feature', geometry: { type: 'Point', coordinates: [lng, lat] }, properties: {} }],
});

// The embed map's style: this server's coverage over the configured base map (streets and
// places) when it loads within 5 s, else on a plain dark background. A base map that cannot be
// had (no internet, a typo) is an event, not an error: the coverage is what matters here.
async function mapStyle(sources, coverageLayers) {
  const plain = {
    version: 8,
    sources,
    layers: [{ id: 'background', type: 'background', paint: { 'background-color': '#1d2a33' } }, ...coverageLayers],
  };
  if (!config.baseMapStyle) {
    return plain;
  }
  try {
    const response = await fetch(config.baseMapStyle, { signal: AbortSignal.timeout(5000) });
    if (!response.ok) {
      throw new Error(`HTTP ${response.status}`);
    }
    const base = await response.json();
    if (base.version !== 8 || !Array.isArray(base.layers) || typeof base.sources !== 'object') {
      throw new Error('not a MapLibre style');
    }
    record('basemap', { url: config.baseMapStyle });
    return { ...base, sources: { ...base.sources, ...sources }, layers: [...base.layers, ...coverageLayers] };
  } catch (error) {
    record('basemap-unavailable', { url: config.baseMapStyle, message: String(error && error.message ? error.message : error) });
    return plain;
  }
}

let map = null;
const mapContainer = document.getElementById('map');
if (mapContainer) {
  const token = encodeURIComponent(config.accessToken);
  // The coverage as this server describes it to every tile client (`/maps/style.json`: its
  // TileJSON sources and layers), without its background, plus the current image's marker.
  const described = await fetch(`${config.tilesUrl}/maps/style.json?access_token=${token}`)
    .then((response) => (response.ok ? response.json() : Promise.reject(new Error(`HTTP ${response.status}`))))
    .catch((error) => {
      fail(`Cannot load the map style: ${error.message}`);
      return { sources: {}, layers: [] };
    });
  const sources = {
    ...described.sources,
    current: { type: 'geojson', data: point(config.center) },
  };
  const coverageLayers = [
    ...described.layers.filter((layer) => layer.type !== 'background'),
    { id: 'current', type: 'circle', source: 'current',
      paint: { 'circle-radius': 8, 'circle-color': '#ffd400', 'circle-stroke-color': '#000', 'circle-stroke-width': 2 } },
  ];
  map = new MapLibreMap({
    container: mapContainer,
    center: config.center,
    zoom: 16,
    attributionControl: false,
    style: await mapStyle(sources, coverageLayers),
  });
  state.map = map;
  map.on('load', () => {
    state.mapLoaded = true;
    record('mapload');
  });
  map.on('sourcedata', (event) => {
    if (event.sourceId === 'coverage' && event.tile) {
      state.tilesLoaded += 1;
    }
  });
  map.on('error', (event) => {
    const message = event.error && event.error.message ? event.error.message : String(event.error);
    record('maperror', { message });
  });
}

function follow(image) {
  if (!map || !image.lngLat) {
    return;
  }
  const center = [image.lngLat.lng, image.lngLat.lat];
  state.currentLngLat = center;
  const source = map.getSource('current');
  if (source) {
    source.setData(point(center));
  }
  map.easeTo({ center, duration: 300 });
}

const { Viewer, GraphDataProvider } = window.mapillary;
const viewer = new Viewer({
  container: 'viewer',
  dataProvider: new GraphDataProvider({ endpoint: config.baseUrl, accessToken: config.accessToken }),
  imageId: config.imageId,
  component: { cover: false },
  imageTiling: false,
});
state.viewer = viewer;
viewer.on('image', (event) => {
  const image = event.image;
  state.currentImageId = image.id;
  // The report link names the image the viewer shows.
  const report = document.getElementById('report');
  if (report) {
    const url = new URL(report.href);
    url.searchParams.set('image_key', image.id);
    report.href = url.toString();
  }
  record('image', { imageId: image.id });
  statusLine.textContent = '';
  follow(image);
});
viewer.on('load', () => record('load'));

// Tile IDs are MVT unsigned integers, which MapLibre reads as JavaScript numbers: exact below
// 2^53, as every ID this server hands out is.
function idOf(value) {
  return typeof value === 'number' && Number.isSafeInteger(value) ? String(value)
    : typeof value === 'string' && /^[0-9]+$/.test(value) ? value : null;
}

// What a click on the map at `point` (pixels) points at: the image drawn nearest to it, else
// the first image of a sequence drawn there (below zoom 14 the map draws no image points).
function imageAt(point) {
  const slack = 6;
  const box = [[point.x - slack, point.y - slack], [point.x + slack, point.y + slack]];
  const images = map.queryRenderedFeatures(box, { layers: ['image'] })
    .filter((feature) => feature.geometry.type === 'Point' && idOf(feature.properties.id));
  if (images.length > 0) {
    const away = (feature) => {
      const at = map.project(feature.geometry.coordinates);
      return Math.hypot(at.x - point.x, at.y - point.y);
    };
    images.sort((a, b) => away(a) - away(b));
    return idOf(images[0].properties.id);
  }
  const sequences = map.queryRenderedFeatures(box, { layers: ['sequence', 'overview'] });
  for (const feature of sequences) {
    const id = idOf(feature.properties.image_id) ?? idOf(feature.properties.id);
    if (id) {
      return id;
    }
  }
  return null;
}

if (map) {
  map.on('click', (event) => {
    const imageId = imageAt(event.point);
    if (!imageId || imageId === state.currentImageId) {
      return;
    }
    record('mapclick', { imageId });
    viewer.moveTo(imageId).catch((error) => fail(`Cannot move to image ${imageId}: ${error.message}`));
  });
  for (const layer of ['image', 'sequence', 'overview']) {
    map.on('mouseenter', layer, () => { map.getCanvas().style.cursor = 'pointer'; });
    map.on('mouseleave', layer, () => { map.getCanvas().style.cursor = ''; });
  }
}

const swap = document.getElementById('swap');
if (swap && mapContainer) {
  const viewerContainer = document.getElementById('viewer');
  swap.addEventListener('click', () => {
    const mapWasLarge = mapContainer.classList.contains('large');
    mapContainer.classList.toggle('large', !mapWasLarge);
    mapContainer.classList.toggle('small', mapWasLarge);
    viewerContainer.classList.toggle('large', mapWasLarge);
    viewerContainer.classList.toggle('small', !mapWasLarge);
    swap.setAttribute('aria-pressed', String(!mapWasLarge));
    viewer.resize();
    map.resize();
    record('swap', { mapLarge: !mapWasLarge });
  });
}
