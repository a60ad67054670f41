// DiffRhythm Studio: hear a take while it is made.
// The progress block names a signed stream of the rendering take's audio (data-live-src, studio/live.py):
// raw 16-bit little-endian stereo PCM, sent window by window as the decoder makes it. Each piece is
// scheduled on one Web Audio clock right after the previous one, so playback starts with the first
// window and never restarts or re-decodes. State is kept here, not in the DOM: Gradio re-renders the
// progress block at every step. `window.studioLive` tells tests (and the curious) what happened.
(() => {
  "use strict";
  const RATE = 44100;
  const CHANNELS = 2;
  const live = (window.studioLive = {
    src: null, label: "", state: "idle", starts: 0, underruns: 0, received: 0, scheduled: 0,
    heard: 0, startAt: 0, clickedAt: null, firstSoundMs: null, receivedAtFirstSound: null,
    progressAtFirstSound: null, error: null,
  });
  const queue = [];
  const seen = new Set();
  let ctx = null;

  function audio() {
    if (!ctx) ctx = new AudioContext({ sampleRate: RATE, latencyHint: "playback" });
    return ctx;
  }
  // A click is a user gesture: the only moment a browser lets a page start sound on its own.
  document.addEventListener("click", (e) => {
    if (e.target.closest("#generate")) {
      live.clickedAt = performance.now();
      audio().resume().catch(() => {});
    }
  }, true);

  // ------------------------------------------------------------ the little player at the bottom
  function bar() {
    let el = document.getElementById("live-player");
    if (el) return el;
    el = document.createElement("div");
    el.id = "live-player";
    el.setAttribute("role", "region");
    el.setAttribute("aria-label", "Live audio of the take being made");
    el.innerHTML = "<span class='live-dot'>●</span> <span class='live-text'></span> " +
      "<button type='button' class='live-toggle'></button>" +
      "<button type='button' class='live-close' aria-label='Close the live player' title='Close'>×</button>";
    el.querySelector(".live-toggle").addEventListener("click", () => {
      const c = audio();
      (c.state === "running" ? c.suspend() : c.resume()).then(render).catch(() => {});
    });
    // Closing stops the live audio; the finished take plays in the Take player.
    el.querySelector(".live-close").addEventListener("click", () => {
      live.closed = true;
      if (ctx) ctx.suspend().catch(() => {});
      hide();
    });
    const style = document.createElement("style"); // here, not in studio.css: this file is the whole feature
    style.textContent = "#live-player{position:fixed;left:50%;bottom:12px;transform:translateX(-50%);z-index:1000;" +
      "background:#1e293b;color:#f8fafc;border-radius:999px;padding:6px 8px 6px 16px;font-size:14px;" +
      "box-shadow:0 4px 16px rgba(0,0,0,.25);display:flex;gap:8px;align-items:center}" +
      "#live-player .live-dot{color:#94a3b8}#live-player.on .live-dot{color:#f97316}" +
      "#live-player button{background:#f97316;color:#fff;border:0;border-radius:999px;padding:4px 12px;cursor:pointer}" +
      "#live-player .live-close{background:transparent;font-size:18px;padding:0 8px}" +
      // The page scrolls past the bar instead of hiding its last lines under it.
      "body.live-on{padding-bottom:72px}" +
      "@media (max-width:640px){#live-player{bottom:auto;top:8px;max-width:94vw}body.live-on{padding-top:64px}}";
    document.head.appendChild(style);
    document.body.appendChild(el);
    document.body.classList.add("live-on");
    return el;
  }
  function hide() {
    document.getElementById("live-player")?.remove();
    document.body.classList.remove("live-on");
  }
  const mmss = (s) => `${Math.floor(s / 60)}:${String(Math.floor(s % 60)).padStart(2, "0")}`;
  function render() {
    if (!live.src || live.closed) return;
    const c = audio();
    const made = live.scheduled / RATE;
    live.heard = Math.max(0, Math.min(made, c.currentTime - live.startAt));
    // Once the take is made and nothing of it is left to hear (all played, or not playing), the bar goes:
    // the finished take is in the Take player, and two players of one take read as two takes.
    const over = live.state === "ended" && !queue.length && (c.state !== "running" || live.heard >= made - 0.05);
    if (over) {
      live.doneAt ??= performance.now();
      if (performance.now() - live.doneAt > 1500) return hide();
    } else live.doneAt = null;
    const el = bar();
    const first = live.firstSoundMs != null ? ` · first sound after ${(live.firstSoundMs / 1000).toFixed(1)} s` : "";
    const what = live.error ? `live audio unavailable (${live.error})`
      : live.scheduled === 0 ? "waiting for the first decoded window…"
      : `${mmss(live.heard)} heard of ${mmss(made)} decoded${live.state === "ended" ? " (all of it)" : ""}${first}`;
    el.querySelector(".live-text").textContent = `Live: ${live.label} — ${what}`;
    el.querySelector(".live-toggle").textContent = c.state === "running" ? "Pause" : "▶ Listen live";
    el.classList.toggle("on", live.state === "streaming" || live.heard < made - 0.05);
  }
  setInterval(render, 250);

  // ------------------------------------------------------------ the stream
  function schedule(bytes) {
    const c = audio();
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const n = bytes.byteLength / (2 * CHANNELS);
    const buf = c.createBuffer(CHANNELS, n, RATE);
    const left = buf.getChannelData(0);
    const right = buf.getChannelData(1);
    for (let i = 0; i < n; i++) {
      left[i] = view.getInt16(4 * i, true) / 32768;
      right[i] = view.getInt16(4 * i + 2, true) / 32768;
    }
    const node = c.createBufferSource();
    node.buffer = buf;
    node.connect(c.destination);
    // Times come from the sample count, not a running sum, so pieces meet exactly.
    let at = live.startAt + live.scheduled / RATE;
    if (live.scheduled === 0) {
      live.startAt = Math.max(c.currentTime + 0.1, live.startAt);
      at = live.startAt;
      live.starts += 1;
      live.receivedAtFirstSound = live.received;
      live.progressAtFirstSound = document.querySelector("#progress-list")?.innerText || "";
      if (live.clickedAt != null) live.firstSoundMs = performance.now() - live.clickedAt;
    } else if (at < c.currentTime) {
      live.underruns += 1; // the decoder fell behind the listener: a gap, counted, then carry on
      live.startAt += c.currentTime + 0.05 - at;
      at = live.startAt + live.scheduled / RATE;
    }
    node.start(at);
    live.scheduled += n;
  }

  async function play(src, label) {
    const c = audio();
    // The next take of a batch plays after the one before it has been heard.
    const end = live.src ? live.startAt + live.scheduled / RATE : 0;
    Object.assign(live, { src, label, state: "streaming", received: 0, scheduled: 0, error: null,
                          startAt: Math.max(end, c.currentTime), closed: false, doneAt: null });
    render();
    try {
      const resp = await fetch(src, { cache: "no-store" });
      if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
      const reader = resp.body.getReader();
      let carry = new Uint8Array(0);
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        live.received += value.byteLength;
        const bytes = new Uint8Array(carry.byteLength + value.byteLength);
        bytes.set(carry);
        bytes.set(value, carry.byteLength);
        const whole = bytes.byteLength - (bytes.byteLength % (2 * CHANNELS));
        carry = bytes.slice(whole);
        if (whole > 0) schedule(bytes.subarray(0, whole));
      }
      live.state = "ended";
    } catch (err) {
      live.state = "ended";
      live.error = String(err.message || err);
    }
    render();
    const next = queue.shift();
    if (next) play(...next);
  }

  // Listening to something else pauses the live audio (two songs at once helps nobody).
  document.addEventListener("play", () => { if (ctx && ctx.state === "running") ctx.suspend().then(render); }, true);

  new MutationObserver(() => {
    for (const el of document.querySelectorAll("[data-live-src]")) {
      const src = el.dataset.liveSrc;
      if (seen.has(src)) continue;
      seen.add(src);
      if (live.state === "streaming") queue.push([src, el.dataset.liveLabel || "take"]);
      else play(src, el.dataset.liveLabel || "take");
    }
  }).observe(document.body, { childList: true, subtree: true });
})();
