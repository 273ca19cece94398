// Drawing one box on a picture (the report form and the dashboard's image page): a drag on
// the picture draws it, and the form's hidden inputs box_left, box_top, box_width and
// box_height get it as shares (0 to 1) of the picture's width and height. Regions already
// blurred (`span.region` with data-left/top/width/height, also shares) are outlined. Styles
// are set through the DOM, which the pages' Content-Security-Policy allows (no inline style).
for (const figure of document.querySelectorAll('figure[data-draw]')) {
  const form = figure.closest('form');
  const picture = figure.querySelector('img.picture');
  const said = figure.querySelector('.box-said');
  if (!form || !picture) {
    continue;
  }
  const input = (name) => form.querySelector(`input[name="${name}"]`);
  const place = (element, [left, top, width, height]) => {
    element.style.left = `${left * 100}%`;
    element.style.top = `${top * 100}%`;
    element.style.width = `${width * 100}%`;
    element.style.height = `${height * 100}%`;
  };
  for (const region of figure.querySelectorAll('span.region')) {
    place(region, ['left', 'top', 'width', 'height'].map((name) => Number(region.dataset[name])));
  }
  const drawn = document.createElement('span');
  drawn.className = 'drawn';
  drawn.hidden = true;
  figure.appendChild(drawn);
  const share = (event) => {
    const bounds = picture.getBoundingClientRect();
    const clamp = (value) => Math.min(1, Math.max(0, value));
    return [
      clamp((event.clientX - bounds.left) / bounds.width),
      clamp((event.clientY - bounds.top) / bounds.height),
    ];
  };
  const show = (box) => {
    const names = ['box_left', 'box_top', 'box_width', 'box_height'];
    names.forEach((name, index) => {
      const field = input(name);
      if (field) {
        field.value = box ? box[index].toFixed(5) : '';
      }
    });
    drawn.hidden = !box;
    if (box) {
      place(drawn, box);
    }
    if (said) {
      said.textContent = box
        ? `Box drawn: ${Math.round(box[2] * 100)} % × ${Math.round(box[3] * 100)} % of the picture.`
        : '';
    }
  };
  let start = null;
  const boxTo = (event) => {
    const [x, y] = share(event);
    const left = Math.min(start[0], x);
    const top = Math.min(start[1], y);
    return [left, top, Math.abs(x - start[0]), Math.abs(y - start[1])];
  };
  picture.addEventListener('pointerdown', (event) => {
    event.preventDefault();
    start = share(event);
    picture.setPointerCapture(event.pointerId);
  });
  picture.addEventListener('pointermove', (event) => {
    if (start) {
      show(boxTo(event));
    }
  });
  picture.addEventListener('pointerup', (event) => {
    if (!start) {
      return;
    }
    const box = boxTo(event);
    start = null;
    // A click is not a box.
    show(box[2] > 0.002 && box[3] > 0.002 ? box : null);
  });
  const clear = figure.querySelector('.clear-box');
  if (clear) {
    clear.addEventListener('click', () => show(null));
  }
}
