// The explorer's one door to the image viewer: everything it asks of mapillary-js goes
// through here, so another viewer (Photo Sphere Viewer, say) can replace it by implementing
// the same few calls. The viewer reads this server's API with the page's read-only token.

// What the explorer knows of an image, whichever viewer shows it.
function describe(image) {
  return {
    id: image.id,
    lngLat: image.lngLat ? [image.lngLat.lng, image.lngLat.lat] : null,
    capturedAt: image.capturedAt,
    compassAngle: Number.isFinite(image.computedCompassAngle) ? image.computedCompassAngle : image.compassAngle,
    sequenceId: image.sequenceId,
    creator: image.creatorUsername,
    organization: image.ownerId || null,
    pano: image.cameraType === 'spherical' || image.cameraType === 'equirectangular',
  };
}

// A viewer in `container` (an element's ID) reading `baseUrl` with `accessToken`, showing
// `imageId` first when given.
export function createViewer(container, { baseUrl, accessToken, imageId }) {
  const { Viewer, GraphDataProvider } = window.mapillary;
  const viewer = new Viewer({
    container,
    dataProvider: new GraphDataProvider({ endpoint: baseUrl, accessToken }),
    imageId: imageId || undefined,
    component: { cover: false },
    imageTiling: false,
  });
  const listeners = { image: [], load: [], playing: [] };
  // The tag component draws detection outlines; it is activated the first time one is drawn.
  let tagsActive = false;
  const sequence = () => viewer.getComponent('sequence');
  const { NavigationDirection } = window.mapillary;
  viewer.on('image', (event) => {
    const image = describe(event.image);
    listeners.image.forEach((listener) => listener(image));
  });
  viewer.on('load', () => listeners.load.forEach((listener) => listener()));
  // The images the viewer's spatial arrows lead to, which its filter decides (its sequence
  // arrows always follow the sequence).
  let neighbours = [];
  viewer.on('spatialedges', (event) => {
    neighbours = event.status.cached ? event.status.edges.map((edge) => edge.target) : [];
  });
  sequence().on('playing', (event) => listeners.playing.forEach((listener) => listener(event.playing)));
  return {
    // Shows the image `id`; resolves with it, rejects when it cannot be shown.
    show(id) {
      return viewer.moveTo(id).then(describe);
    },
    // `type` is `image` (an image is shown; the listener gets its description), `load` (a
    // first frame was drawn) or `playing` (the player started or stopped: true or false).
    on(type, listener) {
      listeners[type].push(listener);
    },
    resize() {
      viewer.resize();
    },
    // The IDs the spatial arrows lead to now.
    neighbours() {
      return [...new Set(neighbours)];
    },
    // Spatial navigation only to images the mapillary-js filter `filter` keeps.
    setFilter(filter) {
      return viewer.setFilter(filter);
    },
    // The next image in the sequence, or the previous one when `reverse`.
    step(reverse) {
      return viewer.moveDir(reverse ? NavigationDirection.Prev : NavigationDirection.Next).then(describe);
    },
    play() {
      sequence().play();
    },
    stop() {
      sequence().stop();
    },
    // Play backwards when `reverse`.
    setReverse(reverse) {
      sequence().configure({ direction: reverse ? NavigationDirection.Prev : NavigationDirection.Next });
    },
    // `speed` 0.25 to 4 times the normal pace (mapillary-js: 0 to 1, normal 0.5). mapillary-js
    // 4.1.2 sets it only from its own keyboard handler and sequence controls, through its
    // navigator's play service (not in its typed API): this is the one place that reaches it.
    setSpeed(speed) {
      viewer._navigator?.playService?.setSpeed(Math.min(1, Math.max(0, 0.5 + Math.log2(speed) / 4)));
    },
    // Outlines the regions `rings` (closed rings in the image's normalised coordinates) on the
    // image shown, replacing any outline before; null removes them.
    outline(rings) {
      const { OutlineTag, PolygonGeometry } = window.mapillary;
      if (!tagsActive) {
        if (!rings) return;
        viewer.activateComponent('tag');
        tagsActive = true;
      }
      const tags = viewer.getComponent('tag');
      tags.removeAll();
      if (!rings) return;
      tags.add(rings.map((ring, number) => new OutlineTag(`detection-${number}`, new PolygonGeometry(ring), {
        lineColor: 0xffd400, lineWidth: 3, fillOpacity: 0,
      })));
    },
    // The part of the picture in view, as shares of it (`{left, top, width, height}`), or null
    // when all of it is in view or it is a panorama.
    async visibleBox() {
      const image = await viewer.getImage();
      if (!image || image.cameraType === 'spherical' || image.cameraType === 'equirectangular') return null;
      const { offsetWidth: width, offsetHeight: height } = viewer.getContainer();
      const corners = await Promise.all([[0, 0], [width, 0], [0, height], [width, height]]
        .map((point) => viewer.unprojectToBasic(point)));
      if (corners.some((corner) => !corner)) return null;
      const clamp = (value) => Math.min(1, Math.max(0, value));
      const xs = corners.map(([x]) => clamp(x));
      const ys = corners.map(([, y]) => clamp(y));
      const box = { left: Math.min(...xs), top: Math.min(...ys), width: Math.max(...xs) - Math.min(...xs), height: Math.max(...ys) - Math.min(...ys) };
      return box.width > 0.98 && box.height > 0.98 ? null : box;
    },
    // For tests and the console: the viewer underneath.
    get raw() {
      return viewer;
    },
  };
}
