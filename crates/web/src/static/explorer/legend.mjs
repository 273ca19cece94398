// "About this image" (date, absolute and relative, creator, organisation, camera, coordinates,
// IDs with copy buttons, the API JSON and an OpenStreetMap editor here) and the share dialog
// (the exact view's link, the image's short link `/i/<id>` and the `/embed` snippet).

const byId = (id) => document.getElementById(id);
const lang = document.documentElement.lang || undefined;
const dateFormat = new Intl.DateTimeFormat(lang, { dateStyle: 'long', timeStyle: 'short', timeZone: 'UTC' });
const relativeFormat = new Intl.RelativeTimeFormat(lang, { numeric: 'auto' });
const UNITS = [['year', 365.25 * 86_400_000], ['month', 30.44 * 86_400_000], ['week', 604_800_000], ['day', 86_400_000], ['hour', 3_600_000], ['minute', 60_000]];

// "3 years ago" for a moment `ms` before now.
export function relative(ms, now = Date.now()) {
  const away = ms - now;
  const [unit, size] = UNITS.find(([, length]) => Math.abs(away) >= length) ?? UNITS.at(-1);
  return relativeFormat.format(Math.trunc(away / size), unit);
}

// Copies the text of the element named by each copy button's `data-copy`.
function wireCopyButtons() {
  for (const button of document.querySelectorAll('button.copy')) {
    button.addEventListener('click', async () => {
      const source = byId(button.dataset.copy);
      const text = 'value' in source && source.tagName !== 'BUTTON' ? source.value : source.textContent;
      await navigator.clipboard.writeText(text).catch(() => {});
      // The visible text stays part of the button's name (WCAG 2.5.3).
      const label = button.getAttribute('aria-label');
      button.textContent = 'Copied';
      button.setAttribute('aria-label', label.replace(/^Copy/, 'Copied'));
      setTimeout(() => {
        button.textContent = 'Copy';
        button.setAttribute('aria-label', label);
      }, 1500);
    });
  }
}

// The legend and the share dialog; `api(path)` reads this server's API.
export function createLegend(config, api) {
  wireCopyButtons();
  const legend = byId('legend');
  const dialog = byId('share');
  const opener = byId('share-open');
  opener.addEventListener('click', () => {
    byId('permalink').value = window.location.href;
    const image = new URL(window.location.href).searchParams.get('image');
    byId('short-link').value = image ? `${config.webUrl}/i/${image}` : '';
    byId('short-link-row').hidden = !image;
    byId('embed-code').value = image
      ? `<iframe src="${config.webUrl}/embed?image_key=${image}&style=split" width="640" height="360" title="Street-level image" allowfullscreen></iframe>`
      : '';
    dialog.showModal();
  });
  dialog.addEventListener('close', () => opener.focus());

  return {
    // The viewer shows `image` (viewer.mjs's description).
    async shown(image) {
      legend.hidden = false;
      byId('legend-date').textContent = Number.isFinite(image.capturedAt)
        ? `${dateFormat.format(new Date(image.capturedAt))} UTC (${relative(image.capturedAt)})` : '';
      byId('legend-creator').textContent = image.creator ?? '';
      byId('legend-org').textContent = image.organization ?? 'none';
      byId('legend-image').textContent = image.id;
      byId('legend-sequence').textContent = image.sequenceId ?? '';
      const [lng, lat] = image.lngLat ?? [0, 0];
      byId('legend-coordinates').textContent = `${lat.toFixed(6)}, ${lng.toFixed(6)}`;
      byId('legend-json').href = `${config.baseUrl}/${image.id}?fields=id,captured_at,compass_angle,creator,geometry,make,model,camera_type,sequence,thumb_1024_url&access_token=${encodeURIComponent(config.accessToken)}`;
      byId('legend-osm').href = `https://www.openstreetmap.org/edit?editor=id#map=19/${lat.toFixed(6)}/${lng.toFixed(6)}`;
      const camera = await api(`/${image.id}?fields=make,model,camera_type`).catch(() => ({}));
      if (byId('legend-image').textContent === image.id) {
        byId('legend-camera').textContent = [camera.make, camera.model].filter(Boolean).join(' ')
          + (camera.camera_type ? ` (${camera.camera_type})` : '');
      }
    },
  };
}
