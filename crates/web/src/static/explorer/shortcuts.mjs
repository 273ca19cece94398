// The shortcut sheet (a native `<dialog>` rendered by the server): `?` opens it from anywhere
// but a text field, and so does the "Shortcuts" button; Escape or "Close" closes it and the
// focus returns to where it was.

const TYPING = 'input, textarea, select, [contenteditable=""], [contenteditable="true"]';

export function wireShortcuts(record) {
  const dialog = document.getElementById('shortcuts');
  const opener = document.getElementById('shortcuts-open');
  let returnTo = null;
  const open = () => {
    if (dialog.open || document.querySelector('dialog[open]')) return;
    returnTo = document.activeElement && document.activeElement !== document.body ? document.activeElement : opener;
    dialog.showModal();
    record('shortcuts');
  };
  opener.addEventListener('click', open);
  dialog.addEventListener('close', () => returnTo?.focus());
  document.addEventListener('keydown', (event) => {
    if (event.key !== '?' || event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.target instanceof Element && event.target.closest(TYPING)) return;
    event.preventDefault();
    open();
  });
}
