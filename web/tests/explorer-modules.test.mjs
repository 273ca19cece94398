// The explorer's modules that need no browser, in node: the detection geometry decoder (against
// an independent decoder, Python's mapbox-vector-tile 2.2.0, whose output is written here), the
// class names people read, the map feature layers with icons, and the `layers` URL parameter
// (every choice survives the URL). No server, no Chromium.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { className, detectionRings, withIcons } from '../../crates/web/src/static/explorer/features.mjs';
import { DEFAULT_LAYERS, LAYERS, layersParameter, readLayers } from '../../crates/web/src/static/explorer/layers.mjs';

const scaled = (rings) => rings.map((ring) => ring.map(([x, y]) => [x / 4096, y / 4096]));

describe('the explorer\'s modules', () => {
  test('detection geometry: the rings an independent decoder reads, normalised, each closed', () => {
    // docs/API.md's example detection; mapbox_vector_tile.decode(..., y_coord_down=True).
    assert.deepEqual(detectionRings('GiIKBm1weS1vchITGAMiDwnSKdYkGgCBFUIAAIIVDyiAIHgC'),
      scaled([[[2665, 2347], [2665, 1002], [2698, 1002], [2698, 2347], [2665, 2347]]]));
    // A polygon with a hole, encoded by mapbox_vector_tile.encode.
    assert.deepEqual(detectionRings('GjMKBm1weS1vchIkGAMiIAnIAcgBGogOAADADIcOAA8JkAOvCRoA2ATYBAAA1wQPKIAgeAI='),
      scaled([
        [[100, 100], [1000, 100], [1000, 900], [100, 900], [100, 100]],
        [[300, 300], [300, 600], [600, 600], [600, 300], [300, 300]],
      ]));
    // What cannot be read outlines nothing.
    for (const bad of ['', 'not base64!', 'GiIKBm1weS1vchITGAMiDwnSKdYk', 'AAAA']) {
      assert.deepEqual(detectionRings(bad), [], bad);
    }
  });

  test('class names as people read them', () => {
    assert.equal(className('regulatory--stop--g1'), 'regulatory › stop');
    assert.equal(className('warning--pedestrians-crossing--g4'), 'warning › pedestrians crossing');
    assert.equal(className('object--street-light'), 'object › street light');
    assert.equal(className(undefined), '');
  });

  test('map features: an icon where the sprite has one, the server\'s dot where not', () => {
    const circle = { id: 'traffic_sign', type: 'circle', source: 'traffic_signs', 'source-layer': 'traffic_sign', paint: { 'circle-radius': 4 } };
    const image = { id: 'image', type: 'circle', source: 'coverage', 'source-layer': 'image' };
    const [kept, other, icon] = withIcons([image, circle], ['regulatory--stop--g1']);
    assert.equal(kept, image);
    assert.deepEqual(other, { ...circle, id: 'traffic_sign-other', filter: ['!', ['in', ['get', 'value'], ['literal', ['regulatory--stop--g1']]]] });
    assert.equal(icon.id, 'traffic_sign');
    assert.equal(icon.type, 'symbol');
    assert.deepEqual(icon.filter, ['in', ['get', 'value'], ['literal', ['regulatory--stop--g1']]]);
    assert.deepEqual(icon.layout['icon-image'], ['concat', 'features:', ['get', 'value']]);
  });

  test('layers in the URL: the default left out, none for nothing, every choice read back', () => {
    assert.deepEqual(readLayers(''), DEFAULT_LAYERS);
    assert.deepEqual(readLayers('?layers=signs,points'), ['points', 'signs']);
    assert.deepEqual(readLayers('?layers=density&layers=none&layers=bogus'), ['density']);
    assert.deepEqual(readLayers('?layers=none'), []);
    assert.equal(layersParameter(DEFAULT_LAYERS), null);
    assert.equal(layersParameter([]), 'none');
    for (let subset = 0; subset < 2 ** LAYERS.length; subset += 1) {
      const shown = LAYERS.filter((_, index) => subset & (2 ** index));
      const parameter = layersParameter(shown);
      const search = parameter === null ? '' : `?${new URLSearchParams({ layers: parameter })}`;
      assert.deepEqual(readLayers(search), shown, `${shown} as ${search}`);
    }
  });
});
