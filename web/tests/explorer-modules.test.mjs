// The explorer's modules that need no browser, in node: the detection geometry decoder (against
// an independent decoder, Python's mapbox-vector-tile 2.2.0, whose output is written here), the
// class names people read, the map feature layers with icons, and the `layers` URL parameter
// (every choice survives the URL), which images "Other dates here" keeps, and the density
// layer's filter and weight (evaluated by MapLibre's own expression engine, the npm package
// @maplibre/maplibre-gl-style-spec that maplibre-gl depends on). No server, no Chromium.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { boxAround, headingGap, metresBetween, otherDates } from '../../crates/web/src/static/explorer/dates.mjs';
import { className, detectionRings, withIcons } from '../../crates/web/src/static/explorer/features.mjs';
import { densityStyle } from '../../crates/web/src/static/explorer/filters.mjs';
import { DEFAULT_LAYERS, LAYERS, layersParameter, readLayers } from '../../crates/web/src/static/explorer/layers.mjs';
import { createExpression, featureFilter } from '@maplibre/maplibre-gl-style-spec';

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
  test('other dates here: other sequences within 15 m facing within 45°, nearest per sequence, by day', () => {
    const here = [13.19, 55.7];
    // `east` and `north` metres from here.
    const at = (east, north) => ({ type: 'Point', coordinates: [here[0] + east / (111_320 * Math.cos(55.7 * Math.PI / 180)), here[1] + north / 111_320] });
    assert.ok(Math.abs(metresBetween(here, at(9, 12).coordinates) - 15) < 0.01);
    assert.equal(headingGap(350, 20), 30);
    assert.equal(headingGap(10, 190), 180);
    const [west, south, east, north] = boxAround(here, 30).split(',').map(Number);
    assert.ok(Math.abs(metresBetween([west, south], [east, south]) - 60) < 0.1 && Math.abs(metresBetween([west, south], [west, north]) - 60) < 0.1);
    const current = { id: '1', sequenceId: 'S', lngLat: here, compassAngle: 10, pano: false };
    const image = (id, sequence, day, geometry, compass, extra = {}) => ({
      id, sequence, captured_at: Date.parse(`${day}T10:00:00Z`), computed_geometry: geometry, compass_angle: compass, is_pano: false, ...extra,
    });
    const groups = otherDates(current, [
      image('2', 'S', '2020-01-01', at(1, 0), 10), // the same sequence
      image('3', 'A', '2021-05-01', at(5, 5), 340), // 30° off: kept
      image('4', 'A', '2021-05-01', at(2, 0), 15), // nearer in the same sequence: kept instead
      image('5', 'B', '2023-07-09', at(0, 14.9), 100, { is_pano: true }), // a panorama faces every way
      image('6', 'C', '2022-01-01', at(0, 15.5), 10), // too far
      image('7', 'D', '2022-01-01', at(3, 0), 190), // facing the other way
      image('8', 'E', '2022-01-01', at(0, 20), 10, { computed_geometry: null, geometry: at(0, 3) }), // GPS only: near
      image('9', 'F', '2021-05-01', at(-4, 0), 55), // 45° off: kept, same day as A
      image('10', 'G', '2019-03-03', at(-1, 0), null, { computed_compass_angle: 200 }), // computed compass wins
    ]);
    assert.deepEqual(groups.map(({ day, images }) => [day, images.map(({ id }) => id)]), [
      ['2023-07-09', ['5']],
      ['2022-01-01', ['8']],
      ['2021-05-01', ['4', '9']],
    ]);
    assert.equal(Math.round(groups[2].images[0].metres), 2);
    // A panorama shown: every way counts.
    assert.deepEqual(otherDates({ ...current, pano: true }, [image('7', 'D', '2022-01-01', at(3, 0), 190)]).map(({ day }) => day), ['2022-01-01']);
  });

  test('density: each cell weighs by its count, panoramas by theirs, other filters on the sample', () => {
    const weigh = (style, properties) => {
      const parsed = createExpression(style.weight, 'layers[density].paint.heatmap-weight', { type: 'number', 'property-type': 'data-driven', expression: { interpolated: false, parameters: ['zoom', 'feature'] } });
      assert.equal(parsed.result, 'success', JSON.stringify(parsed.value));
      return parsed.value.evaluate({ zoom: 3 }, { type: 'Point', properties });
    };
    const keeps = (style, properties) => style.filter === null
      || featureFilter(style.filter, 'layers[density].filter').filter({ zoom: 3 }, { type: 1, properties });
    const cell = (count, panoramas, isPano, capturedAt = 1_700_000_000_000) =>
      ({ count, pano_count: panoramas, is_pano: isPano, captured_at: capturedAt, creator_id: 7 });

    const plain = densityStyle({}, null);
    assert.equal(plain.filter, null);
    assert.equal(weigh(plain, cell(1, 0, false)), 1);
    assert.ok(Math.abs(weigh(plain, cell(1000, 0, false)) - (1 + Math.log(1000))) < 1e-9);
    assert.ok(weigh(plain, cell(1000, 0, false)) > weigh(plain, cell(10, 0, false)));
    // A tile without counts (another server) weighs each point 1.
    assert.equal(weigh(plain, { is_pano: false }), 1);

    // Panoramas only: a cell whose sample is not a panorama still shows by its panoramas.
    const panoramas = densityStyle({ pano: 'only' }, null);
    assert.equal(keeps(panoramas, cell(50, 3, false)), true);
    assert.equal(keeps(panoramas, cell(50, 0, false)), false);
    assert.ok(Math.abs(weigh(panoramas, cell(50, 3, false)) - (1 + Math.log(3))) < 1e-9);
    assert.equal(keeps(panoramas, { is_pano: true }), true, 'without counts the sample decides');
    // No panoramas: the rest of the cell.
    const flat = densityStyle({ pano: 'exclude' }, null);
    assert.equal(keeps(flat, cell(4, 4, true)), false);
    assert.equal(keeps(flat, cell(5, 4, true)), true);
    assert.equal(weigh(flat, cell(5, 4, true)), 1);

    // Dates and creator apply to the cell's sample image, as on the overview points.
    const dated = densityStyle({ from: '2024-01-01', creator: 'someone', pano: 'only' }, 7);
    assert.equal(keeps(dated, cell(9, 2, false, Date.parse('2024-06-01'))), true);
    assert.equal(keeps(dated, cell(9, 2, false, Date.parse('2023-06-01'))), false);
    assert.equal(keeps(densityStyle({ creator: 'someone' }, 8), cell(9, 2, false)), false);
  });
});
