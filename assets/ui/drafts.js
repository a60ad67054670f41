// DiffRhythm Studio: the unsent draft, kept in this browser as the form changes (studio/app.py writes it
// into a BrowserState; the sessions handler puts it back on the page's first load).
// On a loaded machine Gradio sends a page's first load only once every component is ready, which can be
// after the musician has begun to type. So each page load has its own mark ("life"), and until the first
// load has gone out, a draft also keeps the earlier page's draft ("before") and the fields typed on this
// page ("typed"). The first load then restores the earlier draft and leaves the typed fields as they are:
// restoring this page's own draft wiped what was typed after it (CI: Generate refused a style typed a
// moment before), and dropping it lost the earlier page's unsent lyrics.
(() => {
  "use strict";
  const life = Math.random().toString(36).slice(2);
  let sent = false; // the first load has gone out: later changes are the page's own or typed after it
  // Kept here, not read back from the draft: two fields changed in one moment can both read the draft as it
  // was (an event gathers its inputs before the previous one has written its output).
  const typed = new Set();
  let before; // the earlier page's draft, as the first change on this page found it

  // A change of field `name`; `names` and `values`: every draft field, in studio/app.py's order.
  window.drsDraft = (name, names, draft, session, values) => {
    const out = { session: session || "", life, form: Object.fromEntries(names.map((n, i) => [n, values[i]])) };
    if (!sent) {
      if (before === undefined) {
        before = draft && draft.life !== life && draft.form ? { session: draft.session, form: draft.form } : null;
      }
      typed.add(name);
      Object.assign(out, { typed: [...typed], before });
    }
    return out;
  };

  // The first load's inputs: a draft from an earlier page as it is; one written on this page becomes the
  // earlier page's draft plus the names of the fields typed here, which the handler leaves on the page.
  window.drsFirstLoad = (owner, session, draft) => {
    sent = true;
    if (!draft || draft.life !== life) return [owner, session, draft];
    return [owner, session, { ...(before || {}), typed: [...typed] }];
  };
})();
