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
  const listeners = { image: [], load: [] };
  viewer.on('image', (event) => {
    const image = describe(event.image);
    listeners.image.forEach((listener) => listener(image));
  });
  viewer.on('load', () => listeners.load.forEach((listener) => listener()));
  return {
    // Shows the image `id`; resolves with it, rejects when it cannot be shown.
    show(id) {
      return viewer.moveTo(id).then(describe);
    },
    // `type` is `image` (an image is shown; the listener gets its description) or `load`
    // (a first frame was drawn).
    on(type, listener) {
      listeners[type].push(listener);
    },
    resize() {
      viewer.resize();
    },
    // For tests and the console: the viewer underneath.
    get raw() {
      return viewer;
    },
  };
}
