// DiffRhythm Studio: edit on the waveform.
// The server sends the shown take's peaks and duration (studio/waveform.py, #take-regions); here they are
// drawn on a canvas where a drag marks a region (several allowed, overlapping ones merge), clicking a
// region loops it on the take's player, and two buttons send the regions to the edit form as text
// ("12.3-20.5, 65.0-80.2"), which stays editable. The server's parse_ranges stays the authority.
(() => {
  "use strict";
  const MIN_S = 0.2; // a shorter drag is a click, not a region
  const st = { box: null, take: null, duration: 0, peaks: [], regions: [], drag: null, loop: null, mark: null,
    drawn: null, drawnAs: "" };
  const takeAudio = () => document.querySelector("#take-audio audio");
  const fmt = (t) => t.toFixed(1);
  const clamp = (t) => Math.max(0, Math.min(st.duration, t));

  // Sorted, clamped into the song, overlapping or touching regions merged into one.
  function normalise(regions) {
    const out = [];
    for (const r of regions.map((x) => ({ a: clamp(Math.min(x.a, x.b)), b: clamp(Math.max(x.a, x.b)) }))
      .filter((x) => x.b - x.a >= MIN_S).sort((x, y) => x.a - y.a)) {
      const last = out[out.length - 1];
      if (last && r.a <= last.b) last.b = Math.max(last.b, r.b);
      else out.push(r);
    }
    return out;
  }

  // What the last draw showed: the canvas, its size and the playhead. Nothing else on it changes unless
  // a handler here changed it, and those draw at once.
  const shown = (cv, media) => [cv.width, cv.clientWidth, media ? media.currentTime : 0].join(" ");

  function draw() {
    const box = st.box;
    if (!box) return;
    const cv = box.querySelector(".wr-canvas");
    if (!cv) return;
    const w = (cv.width = cv.clientWidth || 600);
    const h = cv.height;
    const g = cv.getContext("2d");
    g.fillStyle = "#18181f";
    g.fillRect(0, 0, w, h);
    const x = (t) => (st.duration ? (t / st.duration) * w : 0);
    for (const r of st.regions) {
      g.fillStyle = r === st.loop ? "rgba(14,165,233,0.45)" : "rgba(250,204,21,0.30)";
      g.fillRect(x(r.a), 0, Math.max(1, x(r.b) - x(r.a)), h);
    }
    if (st.drag) {
      g.fillStyle = "rgba(250,204,21,0.5)";
      g.fillRect(x(Math.min(st.drag.a, st.drag.b)), 0, Math.abs(x(st.drag.b) - x(st.drag.a)), h);
    }
    g.strokeStyle = "#ff8c3c";
    const mid = h / 2;
    g.beginPath(); // one path for every peak: a stroke per peak, ten times a second, kept a busy page busier
    st.peaks.forEach(([lo, hi], i) => {
      const px = (i / st.peaks.length) * w;
      g.moveTo(px, mid - hi * (mid - 4));
      g.lineTo(px, mid - lo * (mid - 4) + 0.5);
    });
    g.stroke();
    const media = takeAudio();
    if (media && st.duration) {
      g.fillStyle = "white";
      g.fillRect(x(media.currentTime), 0, 1, h);
    }
    if (st.mark != null) {
      g.fillStyle = "#facc15";
      g.fillRect(x(st.mark), 0, 2, h);
    }
    st.drawn = cv;
    st.drawnAs = shown(cv, media);
    const now = media ? media.currentTime : 0; // what a screen reader hears for the slider
    if (cv.getAttribute("aria-valuenow") !== now.toFixed(1)) {
      cv.setAttribute("aria-valuenow", now.toFixed(1));
      cv.setAttribute("aria-valuetext", `${fmt(now)} of ${fmt(st.duration)} seconds`);
    }
  }

  function list() {
    const el = st.box && st.box.querySelector(".wr-list");
    if (!el) return;
    el.replaceChildren(...st.regions.map((r, i) => {
      const item = document.createElement("span");
      item.className = "wr-region" + (r === st.loop ? " looping" : "");
      const play = document.createElement("button");
      play.type = "button";
      play.className = "wr-play";
      play.textContent = `${r === st.loop ? "⟲ " : "▶ "}${fmt(r.a)}–${fmt(r.b)} s`;
      play.onclick = () => loop(r);
      const del = document.createElement("button");
      del.type = "button";
      del.className = "wr-remove";
      del.title = "Remove this region";
      del.textContent = "✕";
      del.onclick = () => {
        if (st.loop === r) st.loop = null;
        st.regions.splice(i, 1);
        list();
        draw();
      };
      item.append(play, del);
      return item;
    }));
    st.box.dataset.regions = st.regions.map((r) => `${fmt(r.a)}-${fmt(r.b)}`).join(", ");
  }

  function loop(r) {
    const media = takeAudio();
    st.loop = st.loop === r ? null : r; // clicking the looping region again stops the loop
    if (media && st.loop) {
      media.currentTime = r.a;
      media.play().catch(() => {});
    }
    list();
    draw();
  }

  // The loop is kept by a short timer, not `timeupdate` (4 per second), so it turns back near the end.
  setInterval(() => {
    if (!st.loop) return;
    const media = takeAudio();
    if (media && !media.paused && (media.currentTime >= st.loop.b - 0.03 || media.currentTime < st.loop.a - 0.3)) {
      media.currentTime = st.loop.a;
    }
  }, 20);

  // A new take shown (or the block redrawn): read its data; the regions belong to one take. Gradio may
  // patch the block in place (the same element, new attributes, our chips and data-regions gone), so
  // "unchanged" means the same element, the same take and our data-regions still on it.
  function attach() {
    const box = document.querySelector("#take-regions .wave-regions");
    if (box === st.box && (!box || (box.dataset.take === st.take && box.dataset.regions !== undefined))) {
      // Redrawn only when the playhead, the canvas or its size moved: ten redraws a second of a page
      // left open kept a laptop (and a busy machine) working for nothing.
      const cv = box && box.querySelector(".wr-canvas");
      if (cv && (cv !== st.drawn || shown(cv, takeAudio()) !== st.drawnAs)) draw();
      return;
    }
    st.box = box;
    if (!box) return;
    if (box.dataset.take !== st.take) {
      st.regions = [];
      st.loop = null;
      st.mark = null;
    }
    st.take = box.dataset.take;
    st.duration = Number(box.dataset.duration) || 0;
    try { st.peaks = JSON.parse(box.dataset.peaks || "[]"); } catch { st.peaks = []; }
    list();
    draw();
  }
  setInterval(attach, 100);

  const timeAt = (e) => {
    const r = e.target.getBoundingClientRect();
    return clamp(((e.clientX - r.left) / Math.max(1, r.width)) * st.duration);
  };
  document.addEventListener("pointerdown", (e) => {
    if (!e.target.closest || !e.target.closest("#take-regions .wr-canvas") || !st.duration) return;
    e.preventDefault();
    e.target.setPointerCapture?.(e.pointerId);
    const t = timeAt(e);
    st.drag = { a: t, b: t, el: e.target };
  });
  document.addEventListener("pointermove", (e) => {
    if (!st.drag) return;
    const r = st.drag.el.getBoundingClientRect();
    st.drag.b = clamp(((e.clientX - r.left) / Math.max(1, r.width)) * st.duration);
    draw();
  });
  document.addEventListener("pointerup", () => {
    const d = st.drag;
    if (!d) return;
    st.drag = null;
    if (Math.abs(d.b - d.a) < MIN_S) {
      const hit = st.regions.find((r) => d.a >= r.a && d.a <= r.b); // a click: loop the region under it
      if (hit) loop(hit);
      else draw();
      return;
    }
    st.regions = normalise([...st.regions, d]);
    st.loop = null;
    list();
    draw();
  });
  window.addEventListener("resize", draw);

  // The keyboard path (the canvas is focusable, studio/waveform.py names it): arrows move the playhead
  // (Shift: 10 s), Home/End, Space or K plays/pauses, [ marks a region's start at the playhead and ]
  // its end, Escape drops a half-marked region.
  document.addEventListener("keydown", (e) => {
    if (!e.target.closest || !e.target.closest("#take-regions .wr-canvas") || !st.duration) return;
    const media = takeAudio();
    const at = media ? media.currentTime : 0;
    const seek = (t) => { if (media) media.currentTime = clamp(t); draw(); };
    const step = e.shiftKey ? 10 : 1;
    if (e.key === "ArrowLeft" || e.key === "ArrowDown") seek(at - step);
    else if (e.key === "ArrowRight" || e.key === "ArrowUp") seek(at + step);
    else if (e.key === "Home") seek(0);
    else if (e.key === "End") seek(st.duration);
    else if (e.key === " " || e.key === "k") {
      if (media) (media.paused ? media.play() : Promise.resolve(media.pause())).catch(() => {});
    } else if (e.key === "[") {
      st.mark = clamp(at);
      say(`Region starts at ${fmt(st.mark)} s: move on and press ] to end it.`);
      draw();
    } else if (e.key === "]") {
      if (st.mark == null) return say("Press [ first to mark where the region starts.");
      const added = normalise([...st.regions, { a: st.mark, b: clamp(at) }]);
      if (added.length === st.regions.length && Math.abs(at - st.mark) < MIN_S) {
        return say("A region needs some length: move the playhead on before pressing ].");
      }
      st.regions = added;
      st.mark = null;
      st.loop = null;
      list();
      draw();
      say(`Region ${st.box.dataset.regions} marked.`);
    } else if (e.key === "Escape" && st.mark != null) {
      st.mark = null;
      draw();
    } else return;
    e.preventDefault();
  });

  // ------------------------------------------------------------ regions -> the edit form
  // The note's own text (its status tracker shows a running timer while the answer is pending, so the
  // whole block's text changes before the server has answered), and whether that answer is pending.
  const noteText = () => document.querySelector("#take-note [data-testid=markdown]")?.textContent ?? "";
  const notePending = () => {
    const tracker = document.querySelector("#take-note [data-testid=status-tracker]");
    return !!tracker && !tracker.classList.contains("hide");
  };
  function setField(el, value) {
    el.value = value;
    el.dispatchEvent(new Event("input", { bubbles: true })); // so Gradio sees the change
    el.dispatchEvent(new Event("change", { bubbles: true }));
  }
  function say(text) {
    const hint = st.box && st.box.querySelector(".wr-hint");
    if (hint) hint.textContent = text;
  }
  const continueField = () => document.querySelector("#continue-from input[type=number]");
  // "Edit / continue this take" sets the source take and the mode on the server; once it has answered,
  // the regions are written in (after it, so its form refresh does not overwrite them, and so Generate
  // never goes out with the source take of an earlier edit: seen on a loaded machine when the pending
  // timer's text was read as the answer).
  function send(mode) {
    if (!st.regions.length) return say("Drag on the waveform to mark a region first.");
    const button = document.querySelector("#use-edit");
    if (!button) return;
    const ranges = st.regions.map((r) => `${fmt(r.a)}-${fmt(r.b)}`).join(", ");
    const start = st.regions[0].a;
    const before = noteText();
    // The edit form lives in a closed accordion, whose fields are not in the page until it opens.
    if (!document.querySelector("#edit-ranges")) {
      [...document.querySelectorAll(".label-wrap, button")]
        .find((el) => el.textContent.trim().startsWith("Edit or continue a take"))?.click();
    }
    button.click();
    const t0 = Date.now();
    let sawPending = false;
    const hint = st.box?.querySelector(".wr-hint")?.textContent ?? "";
    say("Setting up the edit...");
    const wait = setInterval(() => {
      const late = Date.now() - t0;
      if (late > 120000) {
        clearInterval(wait);
        return say("The studio did not answer: press the button again.");
      }
      if (notePending()) {
        sawPending = true;
        return;
      }
      const now = noteText();
      if (sawPending && !now.includes("Editing")) {  // refused: the note says why
        clearInterval(wait);
        return say(hint);
      }
      // Answered once the pending state has come and gone, or the note changed. The same note twice (this
      // take was already being edited) with the pending state missed between two looks: after 2 s.
      const answered = now.includes("Editing") && (sawPending || now !== before || late > 2000);
      if (!answered || !document.querySelector("#edit-ranges")) return;
      clearInterval(wait);
      setTimeout(() => {
        document.querySelector(`#edit-mode input[value="${mode}"]`)?.click();
        const box = document.querySelector("#edit-ranges textarea, #edit-ranges input");
        if (box && mode === "edit") setField(box, ranges);
        const from = continueField();
        if (from && mode === "continue") setField(from, fmt(start));
        say(mode === "edit" ? `Sent ${ranges} to the edit form: press Generate.`
          : `Continue from ${fmt(start)} s is in the edit form: press Generate.`);
      }, 300);
    }, 100);
  }
  document.addEventListener("click", (e) => {
    if (e.target.closest?.("#take-regions .wr-repaint")) send("edit");
    else if (e.target.closest?.("#take-regions .wr-extend")) send("continue");
  });
})();
