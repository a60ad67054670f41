// DiffRhythm Studio: let Generate stick to the bottom of a phone's screen (studio.css, #gen-buttons).
// Gradio's outer container clips with `overflow: hidden`, which makes it a scroll box and turns
// `position: sticky` off for everything inside; `overflow: clip` clips the same without that. (The page's
// CSS cannot say it: Gradio scopes every rule of studio.css to elements inside that container.)
(() => {
  "use strict";
  function unclip() {
    const root = document.querySelector(".gradio-container");
    if (!root) return false;
    root.style.setProperty("overflow", "clip", "important");
    return true;
  }
  if (!unclip()) {
    const watch = new MutationObserver(() => { if (unclip()) watch.disconnect(); });
    watch.observe(document.documentElement, { childList: true, subtree: true });
  }
})();
