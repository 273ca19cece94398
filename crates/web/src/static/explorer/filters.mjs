// The explorer's filters (capture dates, panoramas, creator, organisation): the same choice
// as a MapLibre expression on the tiles' properties, a mapillary-js filter for the viewer's
// navigation, and the API query that counts the matching images in view.

const DAY_MS = 86_400_000;

// Milliseconds of the first and the last moment of the days `from` and `to` (UTC).
function bounds({ from, to }) {
  return {
    start: from ? Date.parse(`${from}T00:00:00Z`) : null,
    end: to ? Date.parse(`${to}T00:00:00Z`) + DAY_MS - 1 : null,
  };
}

// Whether any filter is set.
export function active(filters) {
  return Object.values(filters).some((value) => value !== null && value !== '');
}

// A MapLibre filter over the coverage layers' properties; `creatorId` is the creator's ID
// (tiles carry IDs, not usernames): -1 when the username is unknown, so nothing matches.
// The overview layer carries no `organization_id`: with an organisation set it draws nothing.
export function mapExpression(filters, creatorId) {
  const { start, end } = bounds(filters);
  const all = ['all'];
  if (start !== null) all.push(['>=', ['get', 'captured_at'], start]);
  if (end !== null) all.push(['<=', ['get', 'captured_at'], end]);
  if (filters.pano) all.push(['==', ['get', 'is_pano'], filters.pano === 'only']);
  if (filters.creator) all.push(['==', ['get', 'creator_id'], creatorId ?? -1]);
  if (filters.org) all.push(['==', ['to-string', ['get', 'organization_id']], filters.org]);
  return all.length > 1 ? all : null;
}

// The heat map's weight of an overview point standing for `count` images: 1 for one image,
// growing with the logarithm, so that a city's thousands do not drown a village's dozens.
export function countWeight(count) {
  return ['+', 1, ['ln', ['max', 1, count]]];
}

// The density layer's filter and weight: the cell's `count` (or, with `pano`, its
// `pano_count` or the images that are not panoramas) instead of the one point's `is_pano`,
// so a cell with panoramas shows with `pano=only` whatever its sample image; the other
// filters apply to the sample image, as on the overview points. Tiles without counts weigh 1.
export function densityStyle(filters, creatorId) {
  const count = ['to-number', ['coalesce', ['get', 'count'], 1]];
  const panoramas = ['to-number',
    ['coalesce', ['get', 'pano_count'], ['case', ['to-boolean', ['get', 'is_pano']], 1, 0]]];
  const matching = filters.pano === 'only' ? panoramas
    : filters.pano === 'exclude' ? ['-', count, panoramas] : count;
  const rest = mapExpression({ ...filters, pano: null }, creatorId);
  const all = ['all', ...(rest ? rest.slice(1) : [])];
  if (filters.pano) all.push(['>', matching, 0]);
  return { filter: all.length > 1 ? all : null, weight: countWeight(matching) };
}

// A mapillary-js filter for the viewer's navigation (its `setFilter`).
export function viewerFilter(filters) {
  const { start, end } = bounds(filters);
  const all = ['all'];
  if (start !== null) all.push(['>=', 'capturedAt', start]);
  if (end !== null) all.push(['<=', 'capturedAt', end]);
  if (filters.pano === 'only') all.push(['in', 'cameraType', 'spherical', 'equirectangular']);
  if (filters.pano === 'exclude') all.push(['!in', 'cameraType', 'spherical', 'equirectangular']);
  if (filters.creator) all.push(['==', 'creatorUsername', filters.creator]);
  if (filters.org) all.push(['==', 'ownerId', filters.org]);
  return all;
}

// The API's image search parameters for the filters (docs/API.md, 4.3).
export function searchParameters(filters) {
  const params = {};
  if (filters.from) params.start_captured_at = `${filters.from}T00:00:00Z`;
  if (filters.to) params.end_captured_at = `${filters.to}T23:59:59.999Z`;
  if (filters.pano) params.is_pano = String(filters.pano === 'only');
  if (filters.creator) params.creator_username = filters.creator;
  if (filters.org) params.organization_id = filters.org;
  return params;
}

// The date `months` months before `now`, as YYYY-MM-DD (UTC).
export function monthsBefore(now, months) {
  const date = new Date(now);
  date.setUTCMonth(date.getUTCMonth() - months);
  return date.toISOString().slice(0, 10);
}

// The filters the form shows.
export function formFilters(form) {
  const value = (name) => form.elements[name].value.trim() || null;
  return { from: value('from'), to: value('to'), pano: value('pano'), creator: value('creator'), org: value('org') };
}
