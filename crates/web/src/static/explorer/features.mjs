// Map features on the map: the `point` and `traffic_sign` layers drawn with the icons of the
// npm package mapillary_sprite_source (MIT; its `sprites/`, served at
// /assets/mapillary_sprite_source/sprites/), a class without an icon as the server style's
// circle; and the panel that steps through the images that saw a feature picked on the map,
// with the feature's detection outlined in each (its geometry decoded here, spec 2.3).

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

// The rings of a detection's `geometry` (spec 2.3: base64 of a vector tile holding one polygon
// feature, coordinates on a 4096 grid) in the image's normalised coordinates (0..1, top left),
// each closed; [] when it cannot be read.
export function detectionRings(base64) {
  let bytes;
  try {
    bytes = Uint8Array.from(atob(base64), (character) => character.charCodeAt(0));
  } catch {
    return [];
  }
  let at = 0;
  const varint = (end) => {
    let value = 0;
    for (let shift = 0; at < end && shift < 35; shift += 7) {
      const byte = bytes[at++];
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
    }
    throw new Error('truncated varint');
  };
  // The fields of the message in `start..end`: `[number, wire type, value or [from, to]]`.
  const fields = (start, end) => {
    const found = [];
    at = start;
    while (at < end) {
      const key = varint(end);
      const wire = key & 7;
      if (wire === 0) found.push([key >>> 3, wire, varint(end)]);
      else if (wire === 2) {
        const length = varint(end);
        found.push([key >>> 3, wire, [at, at + length]]);
        at += length;
      } else if (wire === 5) at += 4;
      else if (wire === 1) at += 8;
      else throw new Error(`wire type ${wire}`);
    }
    return found;
  };
  try {
    const layer = fields(0, bytes.length).find(([number, wire]) => number === 3 && wire === 2);
    if (!layer) return [];
    const members = fields(...layer[2]);
    const extent = members.find(([number, wire]) => number === 5 && wire === 0)?.[2] ?? 4096;
    const feature = members.find(([number, wire]) => number === 2 && wire === 2);
    if (!feature) return [];
    const geometry = fields(...feature[2]).find(([number, wire]) => number === 4 && wire === 2);
    if (!geometry) return [];
    const commands = [];
    at = geometry[2][0];
    while (at < geometry[2][1]) commands.push(varint(geometry[2][1]));
    const zigzag = (value) => (value % 2 === 0 ? value / 2 : -(value + 1) / 2);
    const rings = [];
    let [x, y, ring] = [0, 0, []];
    for (let index = 0; index < commands.length;) {
      const command = commands[index] & 7;
      const count = Math.floor(commands[index] / 8);
      index += 1;
      if (command === 7) {
        if (ring.length > 0) rings.push([...ring, ring[0]]);
        ring = [];
        continue;
      }
      for (let step = 0; step < count && index + 1 < commands.length + 1; step += 1) {
        x += zigzag(commands[index]);
        y += zigzag(commands[index + 1]);
        index += 2;
        if (command === 1 && ring.length > 0) {
          rings.push([...ring, ring[0]]);
          ring = [];
        }
        ring.push([x / extent, y / extent]);
      }
    }
    if (ring.length > 0) rings.push([...ring, ring[0]]);
    return rings.filter((closed) => closed.length >= 4);
  } catch {
    return [];
  }
}

// `regulatory--stop--g1` as people read it: `regulatory › stop`.
export function className(value) {
  return String(value ?? '').split('--').filter((part) => part && !/^g\d+$/.test(part))
    .map((part) => part.replaceAll('-', ' ')).join(' › ');
}

// The panel (server-rendered, `#feature`): `open(feature)` with a feature the map picked
// (`{id, layer, value}`) reads the images that saw it and its detections (`api`) and shows the
// first image with `show(id)`; Previous and Next step through them. `shown(id)` is told of every
// image the viewer shows, and `outline(rings)` draws the feature's detection on it (null: none).
export function createFeatureStepper(api, show, record, returnFocus, outline) {
  const byId = (id) => document.getElementById(id);
  const panel = byId('feature');
  const title = byId('feature-title');
  const position = byId('feature-position');
  const previous = byId('feature-previous');
  const next = byId('feature-next');
  let images = [];
  let index = 0;
  let asked = 0;
  // The detection of the feature in each image that saw it, as rings.
  let detections = new Map();

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
    detections = new Map();
    outline(null);
    returnFocus();
  });

  return {
    async open(feature) {
      const mine = ++asked;
      const [body, seen] = await Promise.all([
        api(`/${feature.id}?fields=id,object_value,images`),
        api(`/${feature.id}/detections?fields=geometry,image`).catch(() => ({ data: [] })),
      ]);
      if (mine !== asked) return;
      images = (body.images?.data ?? []).map((image) => image.id);
      detections = new Map((seen.data ?? []).filter((detection) => detection.image?.id && detection.geometry)
        .map((detection) => [detection.image.id, detectionRings(detection.geometry)]));
      title.textContent = `${FEATURE_LAYERS[feature.layer] ?? 'Map feature'}: ${className(body.object_value ?? feature.value)}`;
      panel.hidden = false;
      record('feature', { featureId: feature.id, images: [...images] });
      step(0);
    },
    // The viewer shows the image `id`: the feature's detection outlined on it, if it saw it.
    shown(id) {
      const rings = panel.hidden ? null : detections.get(id);
      outline(rings?.length ? rings : null);
    },
  };
}
