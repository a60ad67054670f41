// DiffRhythm Studio: the page's own small behaviours, with no server round trip.
// - lyrics follow the take: the line being sung is highlighted; clicking a line seeks the player to it;
// - tap to time: while anything plays, Space stamps the next plain line with the player's time (LRC);
// - A/B: two takes at one playhead, a toggle swaps which one is heard.
(() => {
  "use strict";
  // The player that played last (take, preview or an uploaded style reference). Gradio's waveform
  // players keep their <audio> out of the page, so `play` is noted on the prototype, not in the DOM.
  let lastPlayed = null;
  const play = HTMLMediaElement.prototype.play;
  HTMLMediaElement.prototype.play = function (...args) {
    lastPlayed = this;
    return play.apply(this, args);
  };

  const takeAudio = () => document.querySelector("#take-audio audio");
  const stamp = (t) => {
    const cs = Math.max(0, Math.floor(t * 100));
    const mm = String(Math.floor(cs / 6000)).padStart(2, "0");
    const ss = String(Math.floor((cs % 6000) / 100)).padStart(2, "0");
    return `[${mm}:${ss}.${String(cs % 100).padStart(2, "0")}]`;
  };

  // ------------------------------------------------------------ lyrics follow the music
  function highlight(media) {
    const box = document.querySelector("#lyric-lines .lrc-lines");
    if (!box || media !== takeAudio()) return;
    const lines = [...box.querySelectorAll(".lrc-line")];
    let current = null;
    for (const line of lines) if (Number(line.dataset.t) <= media.currentTime + 0.01) current = line;
    for (const line of lines) line.classList.toggle("current", line === current);
    if (current && box.dataset.current !== current.dataset.t) {
      box.dataset.current = current.dataset.t;
      current.scrollIntoView({ block: "nearest" });
    }
  }
  for (const kind of ["timeupdate", "seeked", "play"]) {
    document.addEventListener(kind, (e) => highlight(e.target), true); // media events do not bubble
  }
  document.addEventListener("play", (e) => { lastPlayed = e.target; }, true); // native controls skip .play()
  document.addEventListener("click", (e) => {
    const line = e.target.closest("#lyric-lines .lrc-line");
    const media = takeAudio();
    if (!line || !media) return;
    media.currentTime = Number(line.dataset.t);
    highlight(media);
    if (media.paused) media.play().catch(() => {});
  });

  // ------------------------------------------------------------ tap to time
  const tap = { on: false, lines: [], done: [] };
  const field = (id) => document.querySelector(`#${id} textarea`);
  const say = (text) => { const s = document.querySelector("#tap-status"); if (s) s.textContent = text; };
  const SECTION = /^\s*\[[A-Za-z][A-Za-z0-9 _-]*\]\s*$/; // [Verse], [Chorus]: not sung
  const TIME = /^\s*(\[\d{2}:\d{2}(\.\d{1,3})?\])+/;

  function setLyrics(text) {
    const box = field("lyrics");
    box.value = text;
    box.dispatchEvent(new Event("input", { bubbles: true })); // so Gradio sees the change
  }
  function startTap() {
    const plain = field("plain-lyrics")?.value.trim() ? field("plain-lyrics").value : field("lyrics").value;
    tap.lines = plain.split("\n").map((l) => l.replace(TIME, "").trim()).filter((l) => l && !SECTION.test(l));
    tap.done = [];
    tap.on = tap.lines.length > 0;
    document.activeElement?.blur(); // Space must not press the focused button again
    say(tap.on ? `Play a take or your reference, then press Space at each line. Next: “${tap.lines[0]}”`
               : "Write the lyrics first (one line per sung line).");
    document.querySelector("#tap-time")?.classList.toggle("on", tap.on);
  }
  function stopTap(note) {
    tap.on = false;
    document.querySelector("#tap-time")?.classList.remove("on");
    say(note);
  }
  document.addEventListener("click", (e) => {
    if (e.target.closest("#tap-time")) tap.on ? stopTap(`Stopped: ${tap.done.length} line(s) timed.`) : startTap();
  });
  document.addEventListener("keydown", (e) => {
    if (!tap.on || (e.key !== " " && e.key !== "Escape")) return;
    e.preventDefault();
    if (e.key === "Escape") return stopTap(`Stopped: ${tap.done.length} line(s) timed.`);
    const media = lastPlayed && !lastPlayed.paused ? lastPlayed : null;
    if (!media) return say("Nothing is playing: start a take or your reference first.");
    const line = tap.lines[tap.done.length];
    tap.done.push(stamp(media.currentTime) + line);
    setLyrics(tap.done.join("\n") + "\n");
    const next = tap.lines[tap.done.length];
    if (next === undefined) stopTap(`All ${tap.done.length} lines timed: the lyrics box holds the LRC.`);
    else say(`${stamp(media.currentTime)} ${line} ✓ — next: “${next}”`);
  }, true);
  document.addEventListener("keyup", (e) => { if (tap.on && e.key === " ") e.preventDefault(); }, true);

  // ------------------------------------------------------------ A/B two takes at one playhead
  document.addEventListener("click", (e) => {
    const button = e.target.closest("#ab-toggle");
    if (!button) return;
    const [a, b] = ["#ab-a", "#ab-b"].map((s) => document.querySelector(s));
    if (!a || !b) return;
    const [from, to] = a.muted ? [b, a] : [a, b];
    to.currentTime = from.currentTime;
    from.muted = true;
    to.muted = false;
    if (!from.paused && to.paused) to.play().catch(() => {});
    button.textContent = to === a ? "Hearing A — switch to B" : "Hearing B — switch to A";
  });
  // Both play together (one muted), so the swap is instant; play/pause/seek on either moves both.
  for (const kind of ["play", "pause", "seeked"]) {
    document.addEventListener(kind, (e) => {
      const pair = ["ab-a", "ab-b"];
      if (!pair.includes(e.target.id)) return;
      const other = document.getElementById(pair[1 - pair.indexOf(e.target.id)]);
      if (!other) return;
      if (Math.abs(other.currentTime - e.target.currentTime) > 0.05) other.currentTime = e.target.currentTime;
      if (kind === "play" && other.paused) other.play().catch(() => {});
      if (kind === "pause" && !other.paused) other.pause();
    }, true);
  }
})();
