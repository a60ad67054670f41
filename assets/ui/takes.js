// DiffRhythm Studio: "Hide cancelled takes" (the list's rows stay the server's; this only hides some).
// One Cancel of ten variations left ten cancelled rows between the takes that matter. The box is the
// browser's own setting (kept in localStorage across reloads); rows are marked as Gradio redraws them.
(() => {
  "use strict";
  const KEY = "diffrhythm-studio-hide-cancelled";
  const box = () => document.getElementById("hide-cancelled-box");

  function apply() {
    const list = document.getElementById("takes");
    const b = box();
    if (!list || !b) return;
    if (b.dataset.ready !== "1") {
      b.dataset.ready = "1";
      b.checked = localStorage.getItem(KEY) === "1";
    }
    list.classList.toggle("hide-cancelled", b.checked);
    for (const label of list.querySelectorAll("label")) {
      const cancelled = /·\s*cancelled\s*$/.test(label.textContent.trim());
      if (label.classList.contains("take-cancelled") !== cancelled) label.classList.toggle("take-cancelled", cancelled);
    }
  }

  document.addEventListener("change", (e) => {
    if (e.target.id !== "hide-cancelled-box") return;
    localStorage.setItem(KEY, e.target.checked ? "1" : "0");
    apply();
  });
  new MutationObserver(apply).observe(document.documentElement, { childList: true, subtree: true, characterData: true });
})();
