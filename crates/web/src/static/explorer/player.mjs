// The sequence player: play and pause, reverse, speed, the first and last image, staying in
// the sequence (navigation locked to it) and the position "image 3 of 120". It drives the
// viewer adapter only; the order of a sequence comes from the API (`/image_ids`).

const byId = (id) => document.getElementById(id);

// A player over `viewer`, reading sequences with `api(path)`. `initial` holds the URL's
// `lock` and `speed`; `changed({lock, speed})` is told when either changes.
export function createPlayer(viewer, api, initial, changed) {
  const bar = byId('player');
  const [play, reverse, lock, speed, position] = ['play', 'reverse', 'lock', 'speed', 'position'].map(byId);
  const orders = new Map();
  const state = { sequenceId: null, imageId: null, lock: initial.lock, reversed: false, playing: false };

  async function order(sequenceId) {
    if (!orders.has(sequenceId)) {
      const body = await api(`/image_ids?sequence_id=${encodeURIComponent(sequenceId)}`);
      orders.set(sequenceId, body.data.map((item) => item.id));
    }
    return orders.get(sequenceId);
  }

  function pressed(button, value) {
    button.setAttribute('aria-pressed', String(value));
  }

  speed.value = String(initial.speed);
  viewer.setSpeed(initial.speed);
  pressed(lock, Boolean(state.lock));

  play.addEventListener('click', () => (state.playing ? viewer.stop() : viewer.play()));
  reverse.addEventListener('click', () => {
    state.reversed = !state.reversed;
    pressed(reverse, state.reversed);
    viewer.setReverse(state.reversed);
  });
  speed.addEventListener('input', () => {
    viewer.setSpeed(Number(speed.value));
    changed({ speed: Number(speed.value) === 1 ? null : speed.value });
  });
  lock.addEventListener('click', () => {
    state.lock = state.lock ? null : state.sequenceId;
    pressed(lock, Boolean(state.lock));
    changed({ lock: state.lock });
  });
  for (const [id, last] of [['first', false], ['last', true]]) {
    byId(id).addEventListener('click', async () => {
      if (!state.sequenceId) return;
      const ids = await order(state.sequenceId);
      const target = last ? ids[ids.length - 1] : ids[0];
      if (target && target !== state.imageId) await viewer.show(target);
    });
  }
  viewer.on('playing', (playing) => {
    state.playing = playing;
    pressed(play, playing);
    play.textContent = playing ? 'Pause' : 'Play';
  });

  return {
    state,
    // The viewer shows `image`: its sequence and place in it.
    async shown(image) {
      bar.hidden = false;
      state.imageId = image.id;
      if (state.lock && image.sequenceId !== state.lock && state.sequenceId !== null) {
        // Shown from elsewhere (the map, the history): the lock follows the new sequence.
        state.lock = image.sequenceId;
        changed({ lock: state.lock });
      }
      state.sequenceId = image.sequenceId;
      const ids = await order(image.sequenceId).catch(() => []);
      const index = ids.indexOf(image.id);
      position.textContent = index < 0 ? '' : `Image ${index + 1} of ${ids.length}`;
      return { index, total: ids.length };
    },
  };
}
