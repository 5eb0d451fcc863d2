// The dashboard's refresh: every data-every seconds, ask data-live for what the page
// shows (with If-None-Match: an unchanged answer is a bodiless 304). The overview is
// updated in place; a task's page (data-version) reloads when its version changes.
// Text goes in with textContent only: nothing from the answer is read as HTML.
(() => {
  "use strict";
  const body = document.body;
  const url = body.dataset.live;
  if (!url) return;
  const every = Number(body.dataset.every || "5") * 1000;
  let etag = null;

  const text = (id, value) => {
    const el = document.getElementById(id);
    if (el !== null) el.textContent = String(value);
  };

  const cell = (content) => {
    const td = document.createElement("td");
    if (content instanceof Node) td.appendChild(content); else td.textContent = String(content);
    return td;
  };

  const rows = (tasks) => {
    const table = document.getElementById("tasks");
    if (table === null) return;
    const header = table.querySelector("tr");
    const fresh = [header];
    for (const t of tasks) {
      const tr = document.createElement("tr");
      const link = document.createElement("a");
      link.href = "/dashboard/tasks/" + encodeURIComponent(t.id);
      link.textContent = t.id.slice(0, 8);
      const state = document.createElement("span");
      state.className = "state " + t.state;
      state.textContent = t.state;
      tr.append(cell(link), cell(t.repository + "#" + t.issue), cell(state), cell(t.updated));
      fresh.push(tr);
    }
    if (tasks.length === 0) {
      const tr = document.createElement("tr");
      const td = cell("No tasks yet.");
      td.colSpan = 4;
      tr.appendChild(td);
      fresh.push(tr);
    }
    table.replaceChildren(...fresh);
  };

  const apply = (data) => {
    if ("version" in data) {  // a task's page: reload when the task changed
      if (data.version !== body.dataset.version) location.reload();
      return;
    }
    if (String(data.paused) !== body.dataset.paused) { location.reload(); return; }
    text("queued", data.queued);
    text("busy", data.busy);
    text("running", data.running);
    text("llm", data.llm);
    data.rates.forEach((r, i) => {
      text("success-" + i, r.success);
      text("ended-" + i, r.ended);
      text("help-" + i, r.help);
    });
    rows(data.tasks);
  };

  const tick = async () => {
    try {
      const headers = etag === null ? {} : {"If-None-Match": etag};
      const answer = await fetch(url, {headers, credentials: "same-origin", cache: "no-store"});
      if (answer.status === 200) {
        etag = answer.headers.get("ETag");
        apply(await answer.json());
      } else if (answer.status === 401) {
        location.href = "/dashboard/login";
        return;
      }
      body.dataset.refreshed = String(Number(body.dataset.refreshed || "0") + 1);
    } catch (error) {
      // the bot restarting or the network gone: try again at the next tick
    }
    setTimeout(tick, every);
  };
  setTimeout(tick, every);
})();
