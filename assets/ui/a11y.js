// DiffRhythm Studio: names and keys for what has only a symbol.
// - the take list's ↻ button gets an accessible name (a screen reader read "↻" or nothing);
// - Ctrl+Enter (Cmd+Enter on a Mac) presses Generate from anywhere on the page, the lyrics box included.
// Gradio renders after this script runs and re-renders later, so labels are applied on every change.
(() => {
  "use strict";
  const LABELS = { "takes-refresh": "Refresh the take list" };

  function label() {
    for (const [id, name] of Object.entries(LABELS)) {
      const el = document.getElementById(id);
      const button = el && (el.tagName === "BUTTON" ? el : el.querySelector("button"));
      if (button && button.getAttribute("aria-label") !== name) {
        button.setAttribute("aria-label", name);
        button.title = name;
      }
    }
  }

  new MutationObserver(label).observe(document.documentElement, { childList: true, subtree: true });
  document.addEventListener("keydown", (e) => {
    if (e.key !== "Enter" || !(e.ctrlKey || e.metaKey)) return;
    const generate = document.getElementById("generate");
    if (!generate) return;
    e.preventDefault();
    generate.click();
  });
})();
