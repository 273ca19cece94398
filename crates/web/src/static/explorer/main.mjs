// The explorer: wires the map (map.mjs) and the viewer (viewer.mjs, the adapter over
// mapillary-js) to the server-rendered shell. A click on the map, or Enter on the focused map
// (the image nearest its centre), shows an image; the map follows the viewer. State for tests
// and the console is kept on `window.streetlevelExplorer`.
import { active, densityStyle, formFilters, mapExpression, monthsBefore, searchParameters, viewerFilter } from './filters.mjs';
import { createDates } from './dates.mjs';
import { createFeatureStepper } from './features.mjs';
import { createLayerSwitcher, layersParameter, readLayers } from './layers.mjs';
import { createLegend } from './legend.mjs';
import { createMap } from './map.mjs';
import { createPlayer } from './player.mjs';
import { createReport } from './report.mjs';
import { wireShortcuts } from './shortcuts.mjs';
import { mapParameter, readState, writeState } from './state.mjs';
import { wireSwipe } from './swipe.mjs';
import { createViewer } from './viewer.mjs';

const config = JSON.parse(document.getElementById('explorer-config').textContent);
// The short share link `/i/<id>` continues as the explorer's own address, whose URL holds
// the state from here on.
if (config.image && window.location.pathname === `/i/${config.image.id}`) {
  window.history.replaceState(null, '', `/explore?image=${config.image.id}`);
}
const announce = document.getElementById('announce');
const layout = document.getElementById('explorer');
const explorer = {
  config,
  events: [],
  errors: [],
  currentImageId: null,
  currentLngLat: null,
  mapLoaded: false,
  tilesLoaded: 0,
  map: null,
  viewer: null,
};
window.streetlevelExplorer = explorer;

function record(type, detail = {}) {
  explorer.events.push({ type, at: performance.now(), ...detail });
}

function fail(message) {
  explorer.errors.push(message);
  announce.textContent = message;
}

window.addEventListener('error', (event) => fail(`Error: ${event.message}`));
window.addEventListener('unhandledrejection', (event) => fail(`Error: ${event.reason?.message ?? event.reason}`));

const COMPASS = ['north', 'north-east', 'east', 'south-east', 'south', 'south-west', 'west', 'north-west'];
const dateFormat = new Intl.DateTimeFormat(document.documentElement.lang || undefined, { dateStyle: 'long' });

// What the live region says of an image: its date, the way it faces and who took it.
function describe(image) {
  const parts = [];
  if (Number.isFinite(image.capturedAt)) parts.push(dateFormat.format(new Date(image.capturedAt)));
  if (image.pano) parts.push('panorama');
  else if (Number.isFinite(image.compassAngle)) parts.push(`facing ${COMPASS[Math.round((((image.compassAngle % 360) + 360) % 360) / 45) % 8]}`);
  if (image.creator) parts.push(`by ${image.creator}`);
  return `Image ${image.id}: ${parts.join(', ')}`;
}

const initial = readState(window.location.search);
const imageId = initial.image ?? config.image?.id ?? null;
const view = initial.map ?? (config.image ? { center: config.image.lngLat, zoom: 16 }
  : config.extent ? { bounds: config.extent, fitBoundsOptions: { padding: 20 } } : { center: [0, 20], zoom: 1 });

const viewer = createViewer('viewer', { baseUrl: config.baseUrl, accessToken: config.accessToken, imageId });
explorer.viewer = viewer;
viewer.on('load', () => {
  layout.classList.add('viewer-loaded');
  record('load');
});

// GET `path` of the API with the page's token; the JSON answer.
async function api(path) {
  const response = await fetch(`${config.baseUrl}${path}`, { headers: { authorization: `OAuth ${config.accessToken}` } });
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

const legend = createLegend(config, api);
// The map feature panel: its images are shown as any other, so Back returns through them.
const features = createFeatureStepper(api, (id, how) => show(id, how), record, () => explorer.map?.getCanvas().focus(),
  (rings) => viewer.outline(rings));
wireShortcuts(record);
// "Other dates here" and the comparison, whose other image is the URL's `compare`.
const dayFormat = new Intl.DateTimeFormat(document.documentElement.lang || undefined, { dateStyle: 'long', timeZone: 'UTC' });
const dates = createDates(api, {
  show: (id, how) => show(id, how),
  changed: (compare) => writeState({ compare }),
  record,
  formatDay: (ms) => dayFormat.format(new Date(ms)),
});
explorer.dates = dates;
const report = createReport(config, { visibleBox: () => viewer.visibleBox(), record });
let compareAsked = initial.compare;

// The sequence player; the lock and the speed go into the URL as they change.
const player = createPlayer(viewer, api, initial, (changes) => {
  writeState(changes);
  if ('lock' in changes) applyFilters();
});
explorer.player = player;

// A swipe across the photo on a touch screen steps through its sequence (the player's
// direction: the viewer's own sequence arrows, which keep to a locked sequence, do likewise).
let shownPanorama = false;
wireSwipe(document.getElementById('viewer'), {
  step: (reverse) => viewer.step(reverse).catch(() => record('swipe-end', { reverse })),
  isPanorama: () => shownPanorama,
  record,
});

// Shows `id` in the viewer (from a map click, the keyboard or the URL).
function show(id, how) {
  if (!id || id === explorer.currentImageId) return;
  record('select', { imageId: id, how });
  viewer.show(id).catch((error) => fail(`Cannot show image ${id}: ${error.message}`));
}
explorer.show = show;

let mapView = null;
const mapContainer = document.getElementById('map');
// The first image keeps a view given in the URL, and so does one restored from the history;
// every other one is followed. The first image and a restored one replace the history entry,
// every other one pushes a new entry, so that Back returns to the previous image.
let keepView = Boolean(initial.map);
let replaceEntry = true;
viewer.on('image', (image) => {
  writeState({ image: image.id }, !replaceEntry);
  replaceEntry = false;
  explorer.currentImageId = image.id;
  explorer.currentLngLat = image.lngLat;
  shownPanorama = image.pano;
  document.getElementById('hint')?.remove();
  layout.classList.add('has-image');
  const reportLink = document.getElementById('report');
  if (reportLink) {
    const url = new URL(reportLink.href);
    url.searchParams.set('image_key', image.id);
    reportLink.href = url.toString();
    reportLink.hidden = false;
  }
  report.shown(image);
  record('image', { imageId: image.id });
  legend.shown(image);
  dates.shown(image);
  if (compareAsked) {
    dates.compare(compareAsked);
    compareAsked = null;
  }
  features.shown(image.id);
  player.shown(image).then(({ index, total }) => {
    announce.textContent = describe(image) + (index < 0 ? '' : `, image ${index + 1} of ${total} in its sequence`);
    if (image.id === explorer.currentImageId) record('position', { imageId: image.id, index, total });
  });
  mapView?.follow(image.lngLat, !keepView);
  keepView = false;
});

// The layers shown, from the URL (a form without JavaScript may have repeated the parameter:
// the URL gets the one comma list) and the "Layers" switcher.
let shownLayers = readLayers(window.location.search);
writeState({ layers: layersParameter(shownLayers) });
const layerSwitcher = createLayerSwitcher(document.getElementById('layers'), (shown) => {
  shownLayers = shown;
  mapView?.setLayers(shown);
  writeState({ layers: layersParameter(shown) });
  record('layers', { shown });
});
layerSwitcher.show(shownLayers);

// The filters: on the map's layers, on the viewer's navigation (with the player's lock), and
// counted in view through the API.
let filters = initial.filters;
const filterForm = document.getElementById('filters');
const creatorIds = new Map();
async function creatorId(username) {
  if (!creatorIds.has(username)) {
    const body = await api(`/images?creator_username=${encodeURIComponent(username)}&limit=1&fields=creator`).catch(() => ({ data: [] }));
    creatorIds.set(username, body.data[0]?.creator?.id ? Number(body.data[0].creator.id) : -1);
  }
  return creatorIds.get(username);
}
const count = document.getElementById('count');
let counting = 0;
async function updateCount() {
  if (!explorer.map) return;
  const asked = ++counting;
  const bounds = explorer.map.getBounds();
  const bbox = [Math.max(-180, bounds.getWest()), Math.max(-85, bounds.getSouth()), Math.min(180, bounds.getEast()), Math.min(85, bounds.getNorth())]
    .map((value) => value.toFixed(6)).join(',');
  const query = new URLSearchParams({ bbox, fields: 'id', limit: '2000', ...searchParameters(filters) });
  const body = await api(`/images?${query.toString().replaceAll('%2C', ',')}`).catch(() => null);
  if (asked !== counting || !body) return;
  const number = body.data.length;
  count.textContent = `${number.toLocaleString(document.documentElement.lang || undefined)}${body.paging ? '+' : ''} ${number === 1 && !body.paging ? 'image' : 'images'} in view`;
  explorer.count = { number, more: Boolean(body.paging) };
  record('count', explorer.count);
}
async function applyFilters() {
  const id = filters.creator ? await creatorId(filters.creator) : null;
  mapView?.setFilter(mapExpression(filters, id), densityStyle(filters, id));
  const navigation = viewerFilter(filters);
  if (player.state.lock) navigation.push(['==', 'sequenceId', player.state.lock]);
  await viewer.setFilter(navigation.length > 1 ? navigation : []);
  document.getElementById('filters-active').textContent = active(filters) ? ' (on)' : '';
  record('filters', { filters: { ...filters }, lock: player.state.lock });
  updateCount();
}
function filtersChanged() {
  filters = formFilters(filterForm);
  writeState(filters);
  applyFilters();
}
filterForm.addEventListener('submit', (event) => {
  event.preventDefault();
  filtersChanged();
});
filterForm.addEventListener('change', filtersChanged);
for (const preset of filterForm.querySelectorAll('[data-months]')) {
  preset.addEventListener('click', () => {
    const months = Number(preset.dataset.months);
    filterForm.elements.from.value = months ? monthsBefore(Date.now(), months) : '';
    filterForm.elements.to.value = '';
    filtersChanged();
  });
}

try {
  mapView = await createMap(mapContainer, config, view, record, shownLayers);
} catch (error) {
  fail(`Cannot load the map: ${error.message}`);
}
if (mapView) {
  const { map } = mapView;
  explorer.map = map;
  explorer.mapView = mapView;
  map.on('load', () => {
    explorer.mapLoaded = true;
    mapView.follow(explorer.currentLngLat, false);
    record('mapload');
  });
  map.on('sourcedata', (event) => {
    if (event.sourceId === 'coverage' && event.tile) explorer.tilesLoaded += 1;
  });
  map.on('error', (event) => record('maperror', { message: String(event.error?.message ?? event.error) }));
  // A click on a map feature steps through the images that saw it; elsewhere it shows an image.
  map.on('click', (event) => {
    const feature = mapView.featureNear(event.point, 8);
    if (feature) features.open(feature).catch((error) => fail(`Cannot read map feature ${feature.id}: ${error.message}`));
    else show(mapView.imageNear(event.point, 6), 'click');
  });
  // The map's view goes into the current history entry as it moves.
  let counter = null;
  map.on('moveend', () => {
    writeState({ map: mapParameter({ zoom: map.getZoom(), center: map.getCenter().toArray() }) });
    clearTimeout(counter);
    counter = setTimeout(updateCount, 250);
  });
  for (const layer of ['image', 'sequence', 'point', 'traffic_sign', 'point-other', 'traffic_sign-other']) {
    map.on('mouseenter', layer, () => { map.getCanvas().style.cursor = 'pointer'; });
    map.on('mouseleave', layer, () => { map.getCanvas().style.cursor = ''; });
  }
  // The map's canvas takes the focus (MapLibre: arrows pan, + and - zoom); Enter shows the
  // image nearest the centre, where the crosshair is.
  map.getCanvas().setAttribute('aria-label', 'Map of the imagery: arrow keys move it, + and - zoom, Enter shows the image nearest the centre');
  map.getCanvas().addEventListener('keydown', (event) => {
    if (event.key === 'Enter') {
      event.preventDefault();
      const canvas = map.getCanvas();
      const feature = mapView.featureNear({ x: canvas.clientWidth / 2, y: canvas.clientHeight / 2 }, 12);
      if (feature) features.open(feature).catch((error) => fail(`Cannot read map feature ${feature.id}: ${error.message}`));
      else show(mapView.imageNearCentre(), 'keyboard');
    }
  });
  document.getElementById('pick').addEventListener('click', () => show(mapView.imageNearCentre(), 'button'));
}

applyFilters();

// Back and Forward: the entry's view and image, without a new entry.
window.addEventListener('popstate', () => {
  const restored = readState(window.location.search);
  if (restored.map) explorer.map?.jumpTo(restored.map);
  if (JSON.stringify(restored.filters) !== JSON.stringify(filters)) {
    for (const [name, value] of Object.entries(restored.filters)) filterForm.elements[name].value = value ?? '';
    filters = restored.filters;
    applyFilters();
  }
  const restoredLayers = readLayers(window.location.search);
  if (restoredLayers.join() !== shownLayers.join()) {
    shownLayers = restoredLayers;
    layerSwitcher.show(shownLayers);
    mapView?.setLayers(shownLayers);
  }
  if (restored.image && restored.image !== explorer.currentImageId) {
    keepView = Boolean(restored.map);
    replaceEntry = true;
    record('history', { imageId: restored.image });
    viewer.show(restored.image).catch((error) => fail(`Cannot show image ${restored.image}: ${error.message}`));
  }
});

// Layout: which pane is large, and how wide (or, on a phone, how tall) the other one is.
function relayout() {
  viewer.resize();
  explorer.map?.resize();
}
const swap = document.getElementById('swap');
swap.addEventListener('click', () => {
  const mapLarge = !layout.classList.contains('map-large');
  layout.classList.toggle('map-large', mapLarge);
  swap.setAttribute('aria-pressed', String(mapLarge));
  relayout();
  record('swap', { mapLarge });
});
const split = document.getElementById('split');
split.addEventListener('input', () => {
  layout.style.setProperty('--side', `${split.value}%`);
  relayout();
});
