// "Other dates here": the images of other sequences within RADIUS_M metres of the image shown
// and facing within HEADING_DEG degrees of it (a panorama faces every way), grouped by capture
// day (UTC), from the API's own box search; open one, or compare two with a curtain. Without
// structure from motion across sequences this is geometric, as Mapillary's time travel was
// (12 m, 22.5°).

export const RADIUS_M = 15;
export const HEADING_DEG = 45;
// What the box search asks for each image near.
export const FIELDS = 'id,captured_at,compass_angle,computed_compass_angle,geometry,computed_geometry,sequence,is_pano,thumb_256_url';
const METRES_PER_DEGREE = 111_320;

const byId = (id) => document.getElementById?.(id);

// Metres between two `[lng, lat]` a few dozen metres apart (equirectangular).
export function metresBetween([lng1, lat1], [lng2, lat2]) {
  const east = (lng2 - lng1) * METRES_PER_DEGREE * Math.cos(((lat1 + lat2) / 2) * (Math.PI / 180));
  return Math.hypot(east, (lat2 - lat1) * METRES_PER_DEGREE);
}

// Degrees between two compass angles, 0 to 180.
export function headingGap(a, b) {
  const gap = Math.abs(a - b) % 360;
  return gap > 180 ? 360 - gap : gap;
}

// The `bbox` parameter of the square `metres` around `[lng, lat]`.
export function boxAround([lng, lat], metres) {
  const dLat = metres / METRES_PER_DEGREE;
  const dLng = dLat / Math.max(0.01, Math.cos(lat * (Math.PI / 180)));
  return [lng - dLng, lat - dLat, lng + dLng, lat + dLat].map((value) => value.toFixed(7)).join(',');
}

const millis = (value) => (typeof value === 'number' ? value : Date.parse(value));
const compassOf = (image) => image.computed_compass_angle ?? image.compass_angle;

// The other dates of `current` (viewer.mjs's description) among `candidates` (box search
// answers with FIELDS): other sequences' images within RADIUS_M facing within HEADING_DEG (a
// panorama on either side matches any way), the nearest of each sequence, grouped by capture
// day, newest first: `[{day: 'YYYY-MM-DD', images: [{id, capturedAt, metres, pano, thumb}]}]`.
export function otherDates(current, candidates) {
  const nearest = new Map();
  for (const image of candidates) {
    if (image.id === current.id || image.sequence === current.sequenceId) continue;
    const where = (image.computed_geometry ?? image.geometry)?.coordinates;
    if (!where) continue;
    const metres = metresBetween(current.lngLat, where);
    if (metres > RADIUS_M) continue;
    const compass = compassOf(image);
    const facing = current.pano || image.is_pano || !Number.isFinite(current.compassAngle) || !Number.isFinite(compass)
      || headingGap(current.compassAngle, compass) <= HEADING_DEG;
    if (!facing) continue;
    const known = nearest.get(image.sequence);
    if (known && known.metres <= metres) continue;
    nearest.set(image.sequence, {
      id: image.id, capturedAt: millis(image.captured_at), metres, pano: Boolean(image.is_pano), thumb: image.thumb_256_url,
    });
  }
  const days = new Map();
  for (const image of nearest.values()) {
    const day = new Date(image.capturedAt).toISOString().slice(0, 10);
    if (!days.has(day)) days.set(day, []);
    days.get(day).push(image);
  }
  return [...days.entries()]
    .sort(([a], [b]) => (a < b ? 1 : -1))
    .map(([day, images]) => ({ day, images: images.sort((a, b) => a.metres - b.metres) }));
}

// The "Other dates here" dialog and the comparison with a curtain. `api(path)` reads the API;
// `show(id, how)` shows an image; `changed(compare)` writes the compared image's ID (or null)
// into the URL; `record(type, detail)` notes events for tests.
export function createDates(api, { show, changed, record, formatDay }) {
  const opener = byId('dates-open');
  const dialog = byId('dates');
  const list = byId('dates-list');
  const summary = byId('dates-summary');
  const compare = byId('compare');
  const curtain = byId('curtain');
  const left = byId('compare-left');
  const right = byId('compare-right');
  let current = null;
  let groups = [];
  let compared = null;
  let closeFocus = opener;

  // The curtain: the right image is drawn from the curtain's position rightwards.
  const applyCurtain = () => {
    right.style.clipPath = `inset(0 0 0 ${curtain.value}%)`;
    byId('compare-line').style.left = `${curtain.value}%`;
  };
  curtain.addEventListener('input', applyCurtain);

  async function describeImage(id) {
    const image = await api(`/${id}?fields=id,captured_at,thumb_1024_url`);
    return { id, day: formatDay(millis(image.captured_at)), thumb: image.thumb_1024_url };
  }

  // Compares the image shown (left) with `otherId` (right).
  async function startCompare(otherId, swapped = false) {
    const [shown, other] = await Promise.all([describeImage(current.id), describeImage(otherId)]);
    const [a, b] = swapped ? [other, shown] : [shown, other];
    compared = { shown: shown.id, other: other.id, swapped };
    for (const [element, image, side] of [[left, a, 'Left'], [right, b, 'Right']]) {
      element.src = image.thumb;
      element.alt = `${side}: image ${image.id}, ${image.day}`;
      element.dataset.imageId = image.id;
      byId(`compare-${side.toLowerCase()}-date`).textContent = `${side}: ${image.day}`;
    }
    await Promise.all([left.decode(), right.decode()]).catch(() => {});
    compare.hidden = false;
    applyCurtain();
    changed(other.id);
    curtain.focus();
    record('compare', { left: a.id, right: b.id });
  }

  function stopCompare(focus = true) {
    if (compare.hidden) return;
    compare.hidden = true;
    compared = null;
    changed(null);
    record('compare-closed');
    if (focus) closeFocus.focus();
  }

  function button(label, name, action) {
    const element = document.createElement('button');
    element.type = 'button';
    element.textContent = label;
    element.setAttribute('aria-label', name);
    element.addEventListener('click', action);
    return element;
  }

  function render() {
    list.replaceChildren();
    const count = groups.reduce((total, group) => total + group.images.length, 0);
    summary.textContent = groups.length === 0
      ? `No image of another sequence within ${RADIUS_M} m facing this way.`
      : `${groups.length} other ${groups.length === 1 ? 'date' : 'dates'} within ${RADIUS_M} m facing this way (${count} ${count === 1 ? 'image' : 'images'}).`;
    for (const group of groups) {
      const heading = document.createElement('h3');
      const day = formatDay(Date.parse(`${group.day}T12:00:00Z`));
      heading.textContent = day;
      const items = document.createElement('ul');
      for (const image of group.images) {
        const item = document.createElement('li');
        item.dataset.imageId = image.id;
        const thumb = document.createElement('img');
        thumb.src = image.thumb;
        thumb.alt = `Image ${image.id}`;
        thumb.width = 128;
        thumb.height = 96;
        const text = document.createElement('span');
        text.textContent = `${Math.round(image.metres)} m away${image.pano ? ', panorama' : ''}`;
        item.append(thumb, text,
          button('Open', `Open the image of ${day}`, () => {
            dialog.close();
            show(image.id, 'dates');
          }),
          button('Compare', `Compare with the image of ${day}`, () => {
            closeFocus = opener;
            dialog.close();
            startCompare(image.id);
          }));
        items.append(item);
      }
      list.append(heading, items);
    }
  }

  opener.addEventListener('click', async () => {
    if (!current) return;
    const asked = current;
    summary.textContent = 'Looking for other dates here…';
    list.replaceChildren();
    dialog.showModal();
    const body = await api(`/images?bbox=${boxAround(asked.lngLat, 2 * RADIUS_M)}&fields=${FIELDS}&limit=500`)
      .catch(() => ({ data: [] }));
    if (asked !== current) return;
    groups = otherDates(asked, body.data);
    render();
    record('dates', { imageId: asked.id, days: groups.map((group) => group.day), ids: groups.flatMap((group) => group.images.map((image) => image.id)) });
  });
  dialog.addEventListener('close', () => {
    if (compare.hidden) opener.focus();
  });
  byId('compare-close').addEventListener('click', () => stopCompare());
  byId('compare-swap').addEventListener('click', () => {
    if (compared) startCompare(compared.other, !compared.swapped);
  });
  byId('compare-open').addEventListener('click', () => {
    if (!compared) return;
    const { other } = compared;
    stopCompare(false);
    show(other, 'compare');
  });
  compare.addEventListener('keydown', (event) => {
    if (event.key === 'Escape') {
      event.preventDefault();
      stopCompare();
    }
  });

  return {
    // The viewer shows `image`: the button works for it; a comparison of another image ends.
    shown(image) {
      current = image;
      opener.hidden = !image.lngLat;
      if (compared && compared.shown !== image.id) stopCompare(false);
    },
    // Compares the image shown with `id` (the URL's `compare`).
    compare(id) {
      if (current && id && id !== current.id) {
        startCompare(id).catch(() => changed(null));
      }
    },
    // The comparison now: `{shown, other, swapped}` or null.
    get compared() {
      return compared;
    },
  };
}
