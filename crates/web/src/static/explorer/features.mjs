// Map features on the map: the `point` and `traffic_sign` layers drawn with the icons of the
// npm package mapillary_sprite_source (MIT; its `sprites/`, served at
// /assets/mapillary_sprite_source/sprites/), a class without an icon as the server style's
// circle; and the panel that steps through the images that saw a feature picked on the map.

// The sprite's URL without its extension: MapLibre adds `.json` and `.png` (`@2x` on dense
// screens). MapLibre needs it absolute.
export const SPRITE_PATH = '/assets/mapillary_sprite_source/sprites/sprites';

// The map feature layers of the server's style, by ID, and what people call them.
export const FEATURE_LAYERS = { point: 'Map feature', traffic_sign: 'Traffic sign' };

// `layers` (the server style's, whose `point` and `traffic_sign` are circles) with each of those
// two drawn as icons where the class has one (`icons`: the sprite's names), and as the circle
// (`<id>-other`) where not.
export function withIcons(layers, icons) {
  const known = ['in', ['get', 'value'], ['literal', icons]];
  return layers.flatMap((layer) => {
    if (!(layer.id in FEATURE_LAYERS)) return [layer];
    return [
      { ...layer, id: `${layer.id}-other`, filter: ['!', known] },
      {
        id: layer.id,
        type: 'symbol',
        source: layer.source,
        'source-layer': layer['source-layer'],
        filter: known,
        layout: {
          'icon-image': ['concat', 'features:', ['get', 'value']],
          'icon-size': ['interpolate', ['linear'], ['zoom'], 14, 0.6, 18, 1],
          'icon-allow-overlap': true,
          'icon-ignore-placement': true,
        },
      },
    ];
  });
}

// `regulatory--stop--g1` as people read it: `regulatory › stop`.
export function className(value) {
  return String(value ?? '').split('--').filter((part) => part && !/^g\d+$/.test(part))
    .map((part) => part.replaceAll('-', ' ')).join(' › ');
}

// The panel (server-rendered, `#feature`): `open(feature)` with a feature the map picked
// (`{id, layer, value}`) reads the images that saw it (`api`) and shows the first with
// `show(id)`; Previous and Next step through them.
export function createFeatureStepper(api, show, record, returnFocus) {
  const byId = (id) => document.getElementById(id);
  const panel = byId('feature');
  const title = byId('feature-title');
  const position = byId('feature-position');
  const previous = byId('feature-previous');
  const next = byId('feature-next');
  let images = [];
  let index = 0;
  let asked = 0;

  function step(to) {
    index = Math.max(0, Math.min(images.length - 1, to));
    position.textContent = images.length > 0 ? `Image ${index + 1} of ${images.length} that saw it` : 'No public image saw it';
    previous.disabled = index <= 0;
    next.disabled = index >= images.length - 1;
    if (images.length > 0) show(images[index], 'feature');
  }
  previous.addEventListener('click', () => step(index - 1));
  next.addEventListener('click', () => step(index + 1));
  byId('feature-close').addEventListener('click', () => {
    panel.hidden = true;
    returnFocus();
  });

  return {
    async open(feature) {
      const mine = ++asked;
      const body = await api(`/${feature.id}?fields=id,object_value,images`);
      if (mine !== asked) return;
      images = (body.images?.data ?? []).map((image) => image.id);
      title.textContent = `${FEATURE_LAYERS[feature.layer] ?? 'Map feature'}: ${className(body.object_value ?? feature.value)}`;
      panel.hidden = false;
      record('feature', { featureId: feature.id, images: [...images] });
      step(0);
    },
  };
}
