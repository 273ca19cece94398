// Swiping a photo on a touch screen, as in a phone's photo gallery: a quick horizontal swipe
// across the viewer shows the next image of the sequence (swiping to the left) or the
// previous one (to the right). A panorama is left to the viewer, which turns it when dragged;
// a slow drag, a mostly vertical one and a pinch are not swipes.

const MIN_DISTANCE = 60;
const MAX_MS = 700;

// Listens on `element` (the viewer's container) before the viewer does, without taking the
// touches from it; `step(reverse)` moves, `isPanorama()` says whether the image shown is one.
export function wireSwipe(element, { step, isPanorama, record }) {
  let start = null;
  const options = { capture: true, passive: true };
  element.addEventListener('touchstart', (event) => {
    const [touch] = event.touches;
    start = event.touches.length === 1 ? { x: touch.clientX, y: touch.clientY, at: event.timeStamp } : null;
  }, options);
  element.addEventListener('touchend', (event) => {
    const began = start;
    start = null;
    if (!began || event.touches.length > 0) return;
    const [touch] = event.changedTouches;
    const dx = touch.clientX - began.x;
    const dy = touch.clientY - began.y;
    const quick = event.timeStamp - began.at <= MAX_MS;
    if (!quick || Math.abs(dx) < MIN_DISTANCE || Math.abs(dx) < 2 * Math.abs(dy) || isPanorama()) return;
    const reverse = dx > 0;
    record('swipe', { reverse });
    step(reverse);
  }, options);
  element.addEventListener('touchcancel', () => { start = null; }, options);
}
