// DiffRhythm Studio: names and keys for what has only a symbol.
// - the take list's ↻ button gets an accessible name (a screen reader read "↻" or nothing);
// - Ctrl+Enter (Cmd+Enter on a Mac) presses Generate from anywhere on the page, the lyrics box included;
// - Space plays or pauses the shown take (outside fields and buttons);
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
  // Space plays or pauses the shown take when no field or button has the focus (tap to time takes Space
  // first while it runs; the waveform handles its own keys).
  const TYPING = "input, textarea, select, button, [contenteditable], [role=slider], .wr-canvas, audio";
  document.addEventListener("keydown", (e) => {
    if (e.key !== " " || e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.target.closest && e.target.closest(TYPING)) return;
    const media = document.querySelector("#take-audio audio");
    if (!media || !media.src) return;
    e.preventDefault();
    (media.paused ? media.play() : Promise.resolve(media.pause())).catch(() => {});
  });
  document.addEventListener("keydown", (e) => {
    if (e.key !== "Enter" || !(e.ctrlKey || e.metaKey)) return;
    const generate = document.getElementById("generate");
    if (!generate) return;
    e.preventDefault();
    generate.click();
  });
})();
