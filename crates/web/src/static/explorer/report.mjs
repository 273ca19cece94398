// The report dialog: the "Report / request blurring" link opens it on the image shown (the link
// itself, to the full `/report` form, is the way without JavaScript). It posts to `/report` as
// that form does, with that form's own token: the form's page is read first, which sets its
// cookie, so the server's double-submit check is the one every report passes. For a signed-in
// owner of the image or an administrator, the links to its management pages are shown.

const byId = (id) => document.getElementById(id);

// The form's token in the `/report` page `html`, or null.
function formToken(html) {
  return new DOMParser().parseFromString(html, 'text/html').querySelector('input[name="csrf"]')?.value ?? null;
}

// `config.signedIn` ({username, administrator} or null) decides the management links;
// `visibleBox()` resolves with the part of the picture in view (shares) or null; `record`
// notes events for tests.
export function createReport(config, { visibleBox, record }) {
  const link = byId('report');
  const dialog = byId('report-dialog');
  const form = byId('report-form');
  const said = byId('report-said');
  const send = byId('report-send');
  const viewRow = byId('report-view-row');
  const viewBox = byId('report-view');
  const manage = byId('manage');
  let image = null;
  let token = null;
  let box = null;

  link.setAttribute('aria-haspopup', 'dialog');
  link.addEventListener('click', async (event) => {
    if (!image) return;
    event.preventDefault();
    const asked = image;
    byId('report-image').textContent = asked.id;
    byId('report-full').href = `/report?image_key=${asked.id}`;
    // Each opening is a new request.
    form.reset();
    said.textContent = '';
    send.disabled = true;
    dialog.showModal();
    const [page, thumb, inView] = await Promise.all([
      fetch(`/report?image_key=${asked.id}`, { credentials: 'same-origin' })
        .then(async (response) => ({ status: response.status, html: await response.text() }))
        .catch(() => ({ status: 0, html: '' })),
      fetch(`${config.baseUrl}/${asked.id}?fields=thumb_256_url`, { headers: { authorization: `OAuth ${config.accessToken}` } })
        .then((response) => (response.ok ? response.json() : {}))
        .catch(() => ({})),
      visibleBox().catch(() => null),
    ]);
    if (asked !== image) return;
    token = page.status === 200 ? formToken(page.html) : null;
    byId('report-thumb').src = thumb.thumb_256_url ?? '';
    byId('report-thumb').alt = `Image ${asked.id}`;
    box = inView;
    viewRow.hidden = !box;
    viewBox.checked = false;
    send.disabled = !token;
    if (!token) said.textContent = 'This server takes no reports from here now; the full form may say why.';
    record('report-open', { imageId: asked.id, ready: Boolean(token), box });
  });
  byId('report-cancel').addEventListener('click', () => dialog.close());
  dialog.addEventListener('close', () => link.focus());

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (!token || !image) return;
    const body = new URLSearchParams({
      csrf: token,
      kind: form.elements.kind.value,
      reason: form.elements.reason.value,
      contact: form.elements.contact.value,
    });
    if (viewBox.checked && box) {
      for (const name of ['left', 'top', 'width', 'height']) body.set(`box_${name}`, box[name].toFixed(6));
    }
    send.disabled = true;
    said.textContent = 'Sending…';
    const answer = await fetch(`/report?image_key=${image.id}`, {
      method: 'POST', body, credentials: 'same-origin', headers: { 'content-type': 'application/x-www-form-urlencoded' },
    }).then(async (response) => ({ status: response.status, html: await response.text() }))
      .catch((error) => ({ status: 0, html: '', error }));
    const page = new DOMParser().parseFromString(answer.html, 'text/html');
    if (answer.status === 201) {
      const number = page.querySelector('[data-request]')?.textContent ?? '';
      said.textContent = `Thank you. Your request number ${number} is in the administrators' queue.`;
      token = null;
      record('report-sent', { imageId: image.id, request: number });
      return;
    }
    // The form's page again, with what went wrong and a new token.
    said.textContent = page.querySelector('[role="alert"]')?.textContent
      ?? (answer.error ? `Not sent: ${answer.error.message}` : `Not sent (HTTP ${answer.status}).`);
    token = formToken(answer.html);
    send.disabled = !token;
    record('report-refused', { status: answer.status });
  });

  return {
    // The viewer shows `shown` (viewer.mjs's description).
    shown(shown) {
      image = shown;
      const { signedIn } = config;
      const mayManage = Boolean(signedIn && (signedIn.administrator || signedIn.username === shown.creator));
      manage.hidden = !mayManage;
      if (mayManage) {
        byId('manage-blur').href = `/dashboard/image?image_key=${shown.id}`;
        byId('manage-takedown').href = `/dashboard?takedown=${shown.id}#images`;
      }
    },
  };
}
