// aicp dashboard: fills the server-rendered pages from /api/v1 and keeps them live.
// Everything the server sends is put into the page as text (textContent), never as HTML.
// Writes send the session's CSRF token (X-CSRF-Token); the session cookie is HttpOnly.

const API = "/api/v1";
const PAGE_SIZE = 50;
const MAX_ROWS = 200; // rows a project table holds at most (older ones leave from the bottom)
const MAX_LOG_LINES = 2000; // log lines kept on the page (older ones leave from the top)
const POLL_SECONDS = 5; // how often a view reads again what the server offers no stream of

const body = document.body;
const csrf = document.querySelector('meta[name="csrf-token"]')?.content ?? "";

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function enc(value) {
  return encodeURIComponent(value);
}

// `task` run once per call, except that calls made while it runs make one more run after it
// (not one each): a read asked for on every change, never two at once, and never missing the
// last change.
function coalesced(task) {
  let running = null;
  let again = false;
  return function run() {
    if (running) { again = true; return running; }
    running = (async () => {
      try {
        do { again = false; await task(); } while (again);
      } finally {
        running = null;
      }
    })();
    return running;
  };
}

class ApiError extends Error {
  constructor(status, problem) {
    super(problem?.detail || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
}

async function api(path, { method = "GET", json, text, headers = {}, signal } = {}) {
  const init = { method, headers: { Accept: "application/json", ...headers }, signal };
  if (method !== "GET" && method !== "HEAD") init.headers["X-CSRF-Token"] = csrf;
  if (json !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(json);
  } else if (text !== undefined) {
    init.headers["Content-Type"] = "text/plain; charset=utf-8";
    init.body = text;
  }
  const response = await fetch(path.startsWith("/") ? path : `${API}/${path}`, init);
  if (response.status === 401) {
    window.location.assign("/sign-in");
    throw new ApiError(401, { detail: "Signed out." });
  }
  const answer = await response.text();
  const data = answer ? JSON.parse(answer) : null;
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

function age(iso) {
  const seconds = Math.max(0, Math.floor((Date.now() - Date.parse(iso)) / 1000));
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86400)}d`;
}

function duration(seconds) {
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 120) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

function stateBadge(state) {
  return el("span", { class: `state state-${String(state).toLowerCase()}`, text: state });
}

function gpus(workload) {
  const spec = workload.spec || {};
  return (spec.accelerators || 0) * (spec.replicas || 1);
}

// Keeps a view live from an API stream (`streamPath`: SSE with ADDED, MODIFIED and DELETED, each `{"type",
// "object"}`), calling `onEvent(type, object)` per event; `onFresh()` runs before a stream that
// starts over (its first events are every current object again), `onOpen()` once one is open.
// The browser resumes a lost connection with Last-Event-ID; a stream closed once open (410: the
// resume point is no longer kept) is opened afresh. When the server answers with no stream at
// all (429: the token has too many open), `poll()` runs at once and every POLL_SECONDS instead,
// until it returns false (a `poll()` that throws is tried again). `say(text)` tells which of the
// two keeps the view live.
function keepLive(streamPath, { onEvent, onFresh = () => {}, onOpen = () => {}, poll, say, liveText }) {
  let source = null;
  let stopped = false;

  function open() {
    onFresh();
    let opened = false;
    source = new EventSource(streamPath);
    const mine = source;
    source.onopen = () => { opened = true; say(liveText); onOpen(); };
    source.onerror = () => {
      if (mine.readyState !== EventSource.CLOSED) { say("Reconnecting…"); return; }
      if (!opened) { startPolling(); return; }
      say("Live updates stopped; reading again…");
      setTimeout(() => { if (mine === source && !stopped) open(); }, 2000);
    };
    for (const type of ["ADDED", "MODIFIED", "DELETED"]) {
      source.addEventListener(type, (event) => onEvent(type, JSON.parse(event.data).object));
    }
  }

  async function startPolling() {
    source = null;
    const polling = `Read again every ${POLL_SECONDS} seconds.`;
    say(polling);
    while (!stopped) {
      try {
        if ((await poll()) === false) return;
        say(polling);
      } catch (error) {
        say(error.message); // and again after the pause
      }
      await new Promise((resolve) => { setTimeout(resolve, POLL_SECONDS * 1000); });
    }
  }

  open();
  return {
    stop() {
      stopped = true;
      if (source) { source.close(); source = null; }
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Project view: pools, and the workloads table kept live by the change feed's deltas.

// A Kubernetes quantity ("500m", "16Gi", "2Ti", "1e3") as a number; null when unreadable.
const QUANTITY_SUFFIXES = {
  "": 1, m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60,
};

function quantity(text) {
  const match = /^([0-9.]+(?:[eE][-+]?[0-9]+)?)([a-zA-Z]*)$/.exec(String(text ?? "").trim());
  if (!match || !(match[2] in QUANTITY_SUFFIXES)) return null;
  return Number(match[1]) * QUANTITY_SUFFIXES[match[2]];
}

function cores(value) {
  return String(Math.round(value * 1000) / 1000);
}

function gibibytes(value) {
  return `${Math.round((value / 2 ** 30) * 10) / 10}Gi`;
}

// One labelled bar: what admitted workloads hold against the pool's quota.
function quotaBar(id, label, used, total, show) {
  return [
    el("label", { for: id, text: `${label} in use: ${show(used)} of ${show(total)}` }),
    el("meter", { id, min: 0, max: total > 0 ? total : 1, value: Math.min(used, Math.max(total, 0)) }),
  ];
}

function poolCard(pool) {
  const quota = pool.quota || {};
  const usage = pool.status?.usage || {};
  const id = `pool-${pool.name}`;
  const cpuQuota = quantity(quota.cpu) ?? 0;
  const memoryQuota = quantity(quota.memory) ?? 0;
  return el(
    "article",
    { class: "pool card", "aria-labelledby": id },
    el("h3", { id, text: pool.name }),
    el("p", { class: "muted", text: `${pool.accelerator_class} · ${pool.status?.state ?? ""}` }),
    ...quotaBar(`${id}-bar`, "GPUs", usage.accelerators_admitted || 0, quota.accelerators || 0, String),
    ...quotaBar(`${id}-cpu`, "cpu", quantity(usage.cpu_admitted) ?? 0, cpuQuota, cores),
    ...quotaBar(`${id}-memory`, "Memory", quantity(usage.memory_admitted) ?? 0, memoryQuota, gibibytes),
    el("p", {
      text: `${usage.workloads_admitted ?? 0} admitted · ${usage.workloads_pending ?? 0} waiting`,
    }),
  );
}

async function projectView() {
  const project = body.dataset.project;
  const base = `projects/${enc(project)}`;
  const tbody = document.querySelector("#workloads tbody");
  const filters = document.getElementById("filters");
  const status = document.getElementById("live-status");
  const more = document.getElementById("more");
  const empty = document.getElementById("empty");
  const poolSelect = filters.elements.compute_pool;
  const rows = new Map(); // workload name -> row
  let source = null;
  let cursor = null;
  let generation = 0; // bumps on each (re)load: answers of an older load are dropped

  async function loadPools() {
    const holder = document.getElementById("pools");
    try {
      const pools = await api(`${base}/compute-pools?limit=100`);
      holder.replaceChildren(...pools.items.map(poolCard));
      if (!pools.items.length) holder.replaceChildren(el("p", { class: "muted", text: "No pools yet." }));
      const chosen = poolSelect.value;
      poolSelect.replaceChildren(el("option", { value: "", text: "any" }),
        ...pools.items.map((p) => el("option", { value: p.name, text: p.name })));
      poolSelect.value = chosen;
    } catch (error) {
      holder.replaceChildren(el("p", { class: "field-error", text: error.message }));
    }
  }

  // A change patches only the cells whose text differs: an unchanged cell is not rewritten, so
  // the browser lays out and paints no more of the table than the change moved.
  function setText(cell, text) {
    if (cell.textContent !== text) cell.textContent = text;
  }

  function fill(row, w) {
    const cells = row.cells;
    const state = w.status?.state ?? "";
    if (row.dataset.state !== state || !cells[1].firstChild) {
      cells[1].replaceChildren(stateBadge(state));
      row.dataset.state = state;
    }
    setText(cells[2], w.status?.reason ?? "");
    setText(cells[3], w.compute_pool ?? "");
    setText(cells[4], String(gpus(w)));
    setText(cells[5], age(w.created_at));
    if (cells[5].dataset.created !== w.created_at) cells[5].dataset.created = w.created_at;
    setText(cells[6], (w.status?.nodes || []).join(", "));
  }

  function newRow(w) {
    const link = el("a", { href: `/projects/${enc(project)}/workloads/${enc(w.name)}`, text: w.name });
    const row = el("tr", { "data-name": w.name }, el("th", { scope: "row" }, link),
      el("td"), el("td", { class: "reason" }), el("td"), el("td", { class: "num" }), el("td"), el("td"));
    fill(row, w);
    return row;
  }

  function showEmpty() {
    const visible = [...rows.values()].some((r) => !r.hidden);
    empty.hidden = visible;
  }

  function trim() {
    while (rows.size > MAX_ROWS) {
      const last = tbody.lastElementChild;
      rows.delete(last.dataset.name);
      last.remove();
      cursor = cursor ?? "more"; // older rows are one click away again
    }
  }

  function apply(type, w) {
    const row = rows.get(w.name);
    if (type === "DELETED") {
      if (row) { row.remove(); rows.delete(w.name); }
    } else if (row) {
      fill(row, w);
    } else {
      const added = newRow(w);
      tbody.prepend(added);
      rows.set(w.name, added);
      trim();
    }
    showEmpty();
  }

  function listParams() {
    const params = new URLSearchParams();
    if (filters.elements.state.value) params.set("state", filters.elements.state.value);
    if (filters.elements.compute_pool.value) params.set("compute_pool", filters.elements.compute_pool.value);
    // Filtered by the server (the list and the live stream alike), 40 characters at most.
    const text = filters.elements.name_contains.value.trim().slice(0, 40);
    if (text) params.set("name_contains", text);
    return params;
  }

  async function loadPage(params) {
    const query = new URLSearchParams(params);
    query.set("limit", String(PAGE_SIZE));
    if (cursor) query.set("cursor", cursor);
    const page = await api(`${base}/workloads?${query}`);
    for (const w of page.items) {
      if (rows.has(w.name)) continue;
      const row = newRow(w);
      tbody.append(row);
      rows.set(w.name, row);
    }
    cursor = page.next_cursor;
    more.hidden = !cursor;
    showEmpty();
  }

  function openStream(after, params) {
    const query = new URLSearchParams(params);
    query.set("after", String(after));
    source = new EventSource(`/projects/${enc(project)}/live?${query}`);
    const mine = source;
    source.onopen = () => { status.textContent = "Live: rows change as the workloads do."; };
    source.onerror = () => {
      if (mine.readyState === EventSource.CLOSED) {
        // Refused (410: the resume point is no longer kept, or 429): read the page again.
        status.textContent = "Live updates stopped; reloading the list…";
        setTimeout(() => { if (mine === source) reload(); }, 2000);
      } else {
        status.textContent = "Reconnecting…";
      }
    };
    for (const type of ["ADDED", "MODIFIED", "DELETED"]) {
      source.addEventListener(type, (event) => {
        const frame = JSON.parse(event.data);
        apply(type, frame.object);
      });
    }
  }

  async function reload() {
    const mine = ++generation;
    if (source) { source.close(); source = null; }
    const params = listParams();
    try {
      // The feed's position first, then the page: every change after the position is
      // replayed onto the rows, so none between the two reads is missed.
      const { after } = await api(`/projects/${enc(project)}/position`);
      if (mine !== generation) return;
      rows.clear();
      tbody.replaceChildren();
      cursor = null;
      await loadPage(params);
      if (mine !== generation) return;
      openStream(after, params);
    } catch (error) {
      status.textContent = error.message;
    }
  }

  more.addEventListener("click", () => loadPage(listParams()).catch((e) => { status.textContent = e.message; }));
  filters.addEventListener("submit", (event) => { event.preventDefault(); });
  filters.elements.state.addEventListener("change", reload);
  poolSelect.addEventListener("change", reload);
  let typing = null; // a new list once typing pauses, not one per key
  filters.elements.name_contains.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(reload, 250);
  });
  setInterval(() => {
    for (const cell of tbody.querySelectorAll("td[data-created]")) setText(cell, age(cell.dataset.created));
  }, 15000);
  servicesTable(project);
  await loadPools();
  await reload();
}

// ---------------------------------------------------------------------------------------------
// Project view: the services table, kept live by the services stream (or read again).

function desiredReplicas(service) {
  // 0 until the controller first looked: the spec's count (the autoscaler's least) until then.
  const counted = service.status?.replicas?.desired;
  if (counted) return counted;
  const spec = service.spec || {};
  return spec.autoscaling ? spec.autoscaling.min_replicas : (spec.replicas ?? 0);
}

function servicesTable(project) {
  const base = `projects/${enc(project)}/services`;
  const tbody = document.querySelector("#services tbody");
  const status = document.getElementById("services-status");
  const empty = document.getElementById("services-empty");
  const rows = new Map(); // service name -> row

  function setText(cell, text) {
    if (cell.textContent !== text) cell.textContent = text;
  }

  function fill(row, service) {
    const cells = row.cells;
    const s = service.status || {};
    const state = s.state ?? "";
    if (row.dataset.state !== state || !cells[1].firstChild) {
      cells[1].replaceChildren(stateBadge(state));
      row.dataset.state = state;
    }
    setText(cells[2], `${s.replicas?.ready ?? 0}/${desiredReplicas(service)}`);
    setText(cells[3], s.reason ?? "");
    setText(cells[4], service.compute_pool ?? "");
    setText(cells[5], String(service.spec?.accelerators ?? 0));
    setText(cells[6], s.endpoint ?? "");
    setText(cells[7], age(service.created_at));
    if (cells[7].dataset.created !== service.created_at) cells[7].dataset.created = service.created_at;
  }

  function place(row, created) {
    // Newest first: before the first row created earlier than this one.
    const at = Date.parse(created);
    const older = [...tbody.rows].find((other) => Date.parse(other.cells[7].dataset.created) < at);
    if (older) tbody.insertBefore(row, older); else tbody.append(row);
  }

  function apply(type, service) {
    const row = rows.get(service.name);
    if (type === "DELETED") {
      if (row) { row.remove(); rows.delete(service.name); }
    } else if (row) {
      fill(row, service);
    } else {
      const link = el("a", { href: `/projects/${enc(project)}/services/${enc(service.name)}`, text: service.name });
      const added = el("tr", { "data-name": service.name }, el("th", { scope: "row" }, link),
        el("td"), el("td", { class: "num" }), el("td", { class: "reason" }), el("td"),
        el("td", { class: "num" }), el("td", { class: "endpoint" }), el("td"));
      fill(added, service);
      place(added, service.created_at);
      rows.set(service.name, added);
      while (rows.size > MAX_ROWS) {
        const last = tbody.lastElementChild;
        rows.delete(last.dataset.name);
        last.remove();
      }
    }
    empty.hidden = rows.size > 0;
  }

  async function poll() {
    const page = await api(`${base}?limit=${MAX_ROWS}`);
    const names = new Set(page.items.map((service) => service.name));
    for (const name of [...rows.keys()]) if (!names.has(name)) apply("DELETED", { name });
    for (const service of page.items) apply(rows.has(service.name) ? "MODIFIED" : "ADDED", service);
    empty.hidden = rows.size > 0;
    return true;
  }

  keepLive(`${API}/${base}?watch=true`, {
    onEvent: apply,
    onFresh: () => { rows.clear(); tbody.replaceChildren(); },
    onOpen: () => { empty.hidden = rows.size > 0; },
    poll,
    say: (text) => { status.textContent = text; },
    liveText: "Live: rows change as the services do.",
  });
  setInterval(() => {
    for (const cell of tbody.querySelectorAll("td[data-created]")) setText(cell, age(cell.dataset.created));
  }, 15000);
}

// ---------------------------------------------------------------------------------------------
// The logs of a workload or a service: `pre#logs`, `#logs-status`, the `#follow` button and
// `select`, which picks one source (`param=` its value: a rank, a pod) or all (""). Followed
// (`GET {path}/logs?follow=true&tail=200`) until the containers end or the person stops it;
// the page keeps the newest MAX_LOG_LINES lines.

function logPane({ path, select, param, waiting }) {
  const logs = document.getElementById("logs");
  const logsStatus = document.getElementById("logs-status");
  const followButton = document.getElementById("follow");
  let follow = null; // AbortController of the log follow
  let wantFollow = true;

  function appendLines(text) {
    logs.append(document.createTextNode(text));
    // Bounded: the page keeps the newest lines only.
    let lines = logs.textContent.split("\n");
    if (lines.length > MAX_LOG_LINES) {
      lines = lines.slice(lines.length - MAX_LOG_LINES);
      logs.textContent = lines.join("\n");
    }
    logs.scrollTop = logs.scrollHeight;
  }

  async function startFollow() {
    if (follow || !wantFollow) return;
    const controller = new AbortController();
    follow = controller;
    followButton.setAttribute("aria-pressed", "true");
    followButton.textContent = "Stop following";
    const query = new URLSearchParams({ follow: "true", tail: "200" });
    if (select.value !== "") query.set(param, select.value);
    logs.textContent = "";
    logsStatus.textContent = "Following…";
    try {
      const response = await fetch(`${API}/${path}/logs?${query}`, { signal: controller.signal });
      if (!response.ok) {
        const problem = await response.json().catch(() => ({}));
        logsStatus.textContent = response.status === 404 && waiting
          ? waiting
          : problem.detail || `HTTP ${response.status}`;
        return;
      }
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        appendLines(decoder.decode(value, { stream: true }));
      }
      logsStatus.textContent = "The containers ended; nothing more to follow.";
    } catch (error) {
      if (error.name !== "AbortError") logsStatus.textContent = error.message;
      else logsStatus.textContent = "Not following.";
    } finally {
      if (follow === controller) follow = null;
      followButton.setAttribute("aria-pressed", "false");
      followButton.textContent = "Follow";
    }
  }

  function stopFollow() {
    if (follow) follow.abort();
    follow = null;
  }

  function restart() {
    // After the aborted follow's own ending (a promise's), so that its `finally` runs first.
    stopFollow();
    wantFollow = true;
    setTimeout(startFollow, 0);
  }

  followButton.addEventListener("click", () => {
    if (follow) { wantFollow = false; stopFollow(); } else { wantFollow = true; startFollow(); }
  });
  select.addEventListener("change", restart);
  return {
    start: startFollow, // unless following already, or the person stopped it
    restart,
    get following() { return follow !== null; },
  };
}

// ---------------------------------------------------------------------------------------------
// Workload view: state, timeline, evidence, events, logs (followed), delete and replace.

const SPEC_FIELDS = ["name", "compute_pool", "image", "command", "args", "env", "accelerators",
  "cpu", "memory", "replicas", "max_runtime_seconds", "start_deadline_seconds", "retries",
  "priority", "labels"];

function specBody(workload) {
  const spec = { ...workload.spec, name: workload.name, compute_pool: workload.compute_pool };
  const out = {};
  for (const key of SPEC_FIELDS) if (spec[key] !== undefined && spec[key] !== null) out[key] = spec[key];
  for (const [key, value] of Object.entries(workload.spec || {})) if (!(key in out)) out[key] = value;
  return out;
}

function renderTimeline(timeline) {
  const bar = document.getElementById("timeline-bar");
  const list = document.getElementById("timeline");
  const total = timeline.segments.reduce((sum, s) => sum + s.seconds, 0) || 1;
  bar.replaceChildren(...timeline.segments.map((s) => {
    const part = el("span", { class: `segment phase-${s.phase}`, title: `${s.phase} (${s.cause}) ${duration(s.seconds)}` });
    part.style.flexGrow = String(Math.max(s.seconds / total, 0.02));
    return part;
  }));
  if (timeline.outcome) bar.append(el("span", { class: `segment end outcome-${timeline.outcome}` }));
  list.replaceChildren(...timeline.segments.map((s, index) => el("li", {},
    el("span", { class: `swatch phase-${s.phase}` }),
    el("strong", { text: s.phase }),
    ` ${duration(s.seconds)}${s.ended_at ? "" : " so far"} · `,
    el("span", { class: "muted", text: `${index === 0 ? "from" : "after"} ${s.cause} · generation ${s.generation}` }),
  )));
  if (timeline.outcome) {
    list.append(el("li", {}, el("span", { class: `swatch outcome-${timeline.outcome}` }),
      el("strong", { text: timeline.outcome }), ` at ${new Date(timeline.finished_at).toLocaleString()}`));
  }
}

function fact(dl, term, value) {
  if (value === undefined || value === null || value === "") return;
  dl.append(el("dt", { text: term }), el("dd", { text: value }));
}

function renderWorkload(w) {
  const s = w.status || {};
  document.getElementById("state").replaceChildren(stateBadge(s.state ?? ""));
  document.getElementById("reason").textContent = s.reason ?? "";
  const dl = document.getElementById("evidence");
  dl.replaceChildren();
  fact(dl, "Pool", w.compute_pool);
  fact(dl, "Generation", String(w.generation));
  fact(dl, "Cluster queue", s.admission?.cluster_queue);
  fact(dl, "Flavor", s.admission?.flavor);
  fact(dl, "Admitted at", s.admission?.admitted_at && new Date(s.admission.admitted_at).toLocaleString());
  fact(dl, "Nodes", (s.nodes || []).join(", "));
  fact(dl, "GPU product", s.accelerator?.product);
  fact(dl, "GPU memory", s.accelerator?.memory_mib && `${s.accelerator.memory_mib} MiB`);
  fact(dl, "GPUs", s.accelerator?.count && String(s.accelerator.count));
  fact(dl, "Attempts", s.attempts !== undefined ? String(s.attempts) : null);
  fact(dl, "Started", s.started_at && new Date(s.started_at).toLocaleString());
  fact(dl, "Finished", s.finished_at && new Date(s.finished_at).toLocaleString());
  fact(dl, "Exit code", s.exit_code !== null && s.exit_code !== undefined ? String(s.exit_code) : null);
  fact(dl, "Job", s.job?.name);
  fact(dl, "Created by", w.created_by);
  document.getElementById("spec").textContent = JSON.stringify(w.spec, null, 2);
}

function renderEvents(events) {
  const tbody = document.querySelector("#events tbody");
  tbody.replaceChildren(...events.items.map((e) => el("tr", {},
    el("td", { text: new Date(e.at).toLocaleTimeString() }),
    el("td", { text: e.reason ? `${e.type} (${e.reason})` : e.type }),
    el("td", { text: e.message ?? "" }),
    el("td", { text: e.actor_name ?? e.actor }))));
}

async function workloadView() {
  const project = body.dataset.project;
  const name = body.dataset.workload;
  const path = `projects/${enc(project)}/workloads/${enc(name)}`;
  const rank = document.getElementById("rank");
  const actionStatus = document.getElementById("action-status");
  let current = null;
  // Called once per change of the workload (never on a timer); overlapping calls coalesce.
  const refreshTrail = coalesced(async () => {
    try {
      const [timeline, events] = await Promise.all([
        api(`/${"projects"}/${enc(project)}/workloads/${enc(name)}/timeline`),
        api(`${path}/events?limit=100`),
      ]);
      renderTimeline(timeline);
      renderEvents(events);
    } catch (error) {
      if (error.status !== 404) actionStatus.textContent = error.message;
    }
  });

  const pane = logPane({ path, select: rank, param: "replica",
    waiting: "No pod has started yet; the logs follow once one does." });

  function show(w) {
    current = w;
    renderWorkload(w);
    const replicas = w.spec?.replicas || 1;
    const label = document.getElementById("rank-label");
    if (replicas > 1 && rank.options.length !== replicas + 1) {
      rank.replaceChildren(el("option", { value: "", text: "all" }),
        ...Array.from({ length: replicas }, (_, i) => el("option", { value: String(i), text: String(i) })));
      label.hidden = false;
    }
    const state = w.status?.state;
    if (["RUNNING", "SUCCEEDED", "FAILED"].includes(state)) pane.start();
    refreshTrail();
  }

  const replaceSpec = document.getElementById("replace-spec"); // absent for viewers
  try {
    const w = await api(path);
    if (replaceSpec) replaceSpec.value = JSON.stringify(specBody(w), null, 2);
    show(w);
  } catch (error) {
    document.getElementById("gone").hidden = false;
    document.getElementById("gone").textContent = error.message;
    return;
  }

  const source = new EventSource(`${API}/${path}/watch`);
  source.addEventListener("MODIFIED", (event) => show(JSON.parse(event.data).object));
  source.addEventListener("ADDED", (event) => show(JSON.parse(event.data).object));
  source.addEventListener("DELETED", () => {
    const gone = document.getElementById("gone");
    gone.hidden = false;
    gone.textContent = "This workload is gone (deleted).";
    source.close();
    refreshTrail();
  });

  if (!replaceSpec) return; // a viewer: no write controls

  // Delete: two steps, no dialog.
  const del = document.getElementById("delete");
  const confirmDel = document.getElementById("delete-confirm");
  del.addEventListener("click", () => { confirmDel.hidden = false; confirmDel.focus(); });
  confirmDel.addEventListener("click", async () => {
    confirmDel.hidden = true;
    try {
      await api(path, { method: "DELETE" });
      actionStatus.textContent = "Deletion requested.";
    } catch (error) {
      actionStatus.textContent = error.message;
    }
  });

  // Replace: the server's dry run shows the diff first, then the real PUT.
  const form = document.getElementById("replace");
  const apply = document.getElementById("apply");
  const diff = document.getElementById("diff");
  let pending = null;
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    apply.hidden = true;
    diff.replaceChildren();
    let spec;
    try {
      spec = JSON.parse(form.elements.spec.value);
    } catch (error) {
      diff.replaceChildren(el("p", { class: "field-error", text: `Not JSON: ${error.message}` }));
      return;
    }
    try {
      const answer = await api(`${path}?dry_run=true`, { method: "PUT", json: spec,
        headers: { "If-Match": `"${current.generation}"` } });
      pending = spec;
      if (!answer.changes.length) {
        diff.replaceChildren(el("p", { text: "No field changes (a replace would still make a new generation)." }));
      } else {
        diff.replaceChildren(el("table", { class: "diff" },
          el("caption", { text: "What the replace changes" }),
          el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "Field" }),
            el("th", { scope: "col", text: "Before" }), el("th", { scope: "col", text: "After" }))),
          el("tbody", {}, ...answer.changes.map((c) => el("tr", {},
            el("th", { scope: "row", text: c.field }),
            el("td", { class: "before", text: JSON.stringify(c.before) }),
            el("td", { class: "after", text: JSON.stringify(c.after) }))))));
      }
      apply.hidden = false;
    } catch (error) {
      diff.replaceChildren(problemList(error));
    }
  });
  apply.addEventListener("click", async () => {
    apply.hidden = true;
    try {
      await api(path, { method: "PUT", json: pending, headers: { "If-Match": `"${current.generation}"` } });
      actionStatus.textContent = "Replaced: a new generation is on its way.";
      diff.replaceChildren();
    } catch (error) {
      diff.replaceChildren(problemList(error));
    }
  });
}

function problemList(error) {
  const items = (error.problem?.errors || []).map((e) => el("li", { text: `${e.field}: ${e.message}` }));
  return el("div", { class: "field-error", role: "alert" }, el("p", { text: error.message }),
    items.length ? el("ul", {}, ...items) : null);
}

// ---------------------------------------------------------------------------------------------
// Service view: state, replicas and their pods, spec, events; scale and delete for editors.

function count(n, word) {
  return `${n} ${n === 1 ? word : `${word}s`}`;
}

function localTime(iso) {
  return iso ? new Date(iso).toLocaleString() : null;
}

function termination(last) {
  if (!last) return "";
  const parts = [last.reason || "ended"];
  if (last.exit_code !== null && last.exit_code !== undefined) parts.push(`exit code ${last.exit_code}`);
  if (last.finished_at) parts.push(`at ${localTime(last.finished_at)}`);
  return parts.join(", ");
}

function renderService(service) {
  const s = service.status || {};
  const spec = service.spec || {};
  const counts = s.replicas || {};
  document.getElementById("state").replaceChildren(stateBadge(s.state ?? ""));
  document.getElementById("reason").textContent = s.reason ?? "";
  const dl = document.getElementById("facts");
  dl.replaceChildren();
  fact(dl, "Endpoint", s.endpoint);
  const desired = desiredReplicas(service);
  fact(dl, "Ready", `${counts.ready ?? 0} of ${desired} desired`);
  fact(dl, "Updated", `${counts.updated ?? 0} of ${desired} run generation ${service.generation}`);
  fact(dl, "Waiting for quota", String(counts.waiting_for_quota ?? 0));
  fact(dl, "Asked for", spec.autoscaling
    ? `autoscaled: ${spec.autoscaling.min_replicas} to ${spec.autoscaling.max_replicas} replicas at ${spec.autoscaling.target_cpu_percent}% cpu`
    : count(spec.replicas ?? 0, "replica"));
  fact(dl, "Pool", service.compute_pool);
  fact(dl, "Per replica", `${count(spec.accelerators ?? 0, "GPU")}, ${spec.cpu} cpu, ${spec.memory} memory`);
  fact(dl, "Image", spec.image);
  fact(dl, "Nodes", (s.nodes || []).join(", "));
  fact(dl, "Generation", s.observed_generation === service.generation
    ? String(service.generation)
    : `${service.generation} (the status describes ${s.observed_generation})`);
  fact(dl, "Deployment", s.deployment?.name);
  fact(dl, "Created", localTime(service.created_at));
  fact(dl, "Created by", service.created_by);
  document.getElementById("spec").textContent = JSON.stringify(spec, null, 2);

  const pods = s.pods || [];
  document.querySelector("#pods tbody").replaceChildren(...pods.map((pod) => el("tr", {},
    el("th", { scope: "row", text: pod.name }),
    el("td", { text: pod.node ?? "" }),
    el("td", { text: pod.phase ?? "" }),
    el("td", { text: pod.ready ? "yes" : "no" }),
    el("td", { class: "num", text: String(pod.restarts ?? 0) }),
    el("td", { text: pod.waiting_for_quota ? "yes" : "no" }),
    el("td", { text: termination(pod.last_termination) }))));
  document.getElementById("no-pods").hidden = pods.length > 0;
}

async function serviceView() {
  const project = body.dataset.project;
  const name = body.dataset.service;
  const path = `projects/${enc(project)}/services/${enc(name)}`;
  const status = document.getElementById("live-status");
  const actions = document.getElementById("actions"); // absent for viewers
  let current = null;
  let shown = "";
  let live = null;

  // Once per change of the service (never on a timer); overlapping calls coalesce.
  const refreshEvents = coalesced(async () => {
    try {
      renderEvents(await api(`${path}/events?limit=100`));
    } catch (error) {
      if (error.status !== 404) status.textContent = error.message;
    }
  });

  function gone(message) {
    if (live) live.stop();
    const notice = document.getElementById("gone");
    notice.hidden = false;
    notice.textContent = message;
    if (actions) actions.hidden = true;
    status.textContent = "";
    refreshEvents();
  }

  // The logs: all replicas, or the one picked. A follow reads the replicas running when it
  // starts, so it starts again when they change.
  const podSelect = document.getElementById("log-pod");
  const pane = logPane({ path, select: podSelect, param: "pod", waiting: null });
  let podNames = "";
  let runningNames = "";

  function followLogs(service) {
    const pods = service.status?.pods || [];
    const names = pods.map((pod) => pod.name);
    if (names.join(" ") !== podNames) {
      const picked = podSelect.value;
      podSelect.replaceChildren(el("option", { value: "", text: "all" }),
        ...names.map((pod) => el("option", { value: pod, text: pod })));
      podSelect.value = names.includes(picked) ? picked : "";
      podNames = names.join(" ");
    }
    const running = pods.filter((pod) => pod.phase === "Running").map((pod) => pod.name).join(" ");
    if (running === runningNames) return;
    runningNames = running;
    if (pane.following) pane.restart(); else if (running) pane.start();
  }

  function show(service) {
    const text = JSON.stringify(service);
    if (text === shown) return;
    shown = text;
    const first = current === null;
    current = service;
    renderService(service);
    if (scale) scale.sync(service, first);
    followLogs(service);
    refreshEvents();
  }

  async function read() {
    try {
      show(await api(path));
      return true;
    } catch (error) {
      if (error.status !== 404) throw error;
      gone(current ? "This service is gone (deleted)." : error.message);
      return false;
    }
  }

  const report = document.getElementById("action-status"); // what a scale or delete did
  const controls = { path, current: () => current, show, read, report };
  const scale = actions ? scaleControl(controls) : null;
  if (actions) deleteControl(controls);
  live = keepLive(`${API}/${path}/watch`, {
    onEvent: (type, service) => {
      if (type === "DELETED") gone("This service is gone (deleted).");
      else show(service);
    },
    poll: read,
    say: (text) => { status.textContent = text; },
    liveText: "Live: the page changes as the service does.",
  });
}

// Scale: PATCH {"replicas"} of the generation shown (If-Match); the server's sentence on a refusal.
function scaleControl({ path, current, show, read, report }) {
  const form = document.getElementById("scale");
  const input = form.elements.replicas;
  const error = document.getElementById("scale-error");
  const help = document.getElementById("scale-help");
  let edited = false;
  input.addEventListener("input", () => { edited = true; });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const before = current();
    if (!before) return;
    error.textContent = "";
    input.removeAttribute("aria-invalid");
    report.textContent = "";
    const text = input.value.trim();
    const replicas = Number(text);
    if (text === "" || !Number.isInteger(replicas)) {
      error.textContent = "replicas: a whole number from 0 to 64.";
      input.setAttribute("aria-invalid", "true");
      input.focus();
      return;
    }
    try {
      const scaled = await api(path, { method: "PATCH", json: { replicas },
        headers: { "If-Match": `"${before.generation}"` } });
      edited = false;
      report.textContent = scaled.generation === before.generation
        ? `${count(replicas, "replica")} asked for already; nothing changed.`
        : `Scaled to ${count(replicas, "replica")} (generation ${scaled.generation}).`;
      show(scaled);
    } catch (failure) {
      const fields = (failure.problem?.errors || []).map((e) => `${e.field}: ${e.message}`);
      error.textContent = [failure.message, ...fields].join(" ");
      input.setAttribute("aria-invalid", "true");
      input.focus();
      if (failure.status === 412) read().catch(() => {}); // changed meanwhile: show it as it is
    }
  });
  return {
    // The count asked for, unless the person is typing another one.
    sync(service, first) {
      if (first || (!edited && document.activeElement !== input)) input.value = String(service.spec?.replicas ?? 0);
      help.textContent = service.spec?.autoscaling
        ? "The autoscaler sets the count while autoscaling is on: scaling changes only the stored spec."
        : "0 to 64: 0 keeps the service with no replica running; replicas beyond the pool's quota wait for it.";
    },
  };
}

// Delete: two steps (Delete, then Confirm delete or Cancel), no dialog.
function deleteControl({ path, show, report }) {
  const del = document.getElementById("delete");
  const confirmDel = document.getElementById("delete-confirm");
  const cancel = document.getElementById("delete-cancel");
  function asking(yes) {
    confirmDel.hidden = !yes;
    cancel.hidden = !yes;
    del.hidden = yes;
  }
  del.addEventListener("click", () => { asking(true); confirmDel.focus(); });
  cancel.addEventListener("click", () => { asking(false); del.focus(); });
  confirmDel.addEventListener("click", async () => {
    asking(false);
    del.focus();
    try {
      show(await api(path, { method: "DELETE" }));
      report.textContent = "Deletion requested: the replicas stop, then the service is gone.";
    } catch (error) {
      report.textContent = error.message;
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Submit: the common fields plus a JSON object for the rest, or a whole spec as YAML or JSON;
// the server validates.

function clearErrors(form) {
  for (const node of form.querySelectorAll(".field-error")) node.textContent = "";
  for (const node of form.querySelectorAll("[aria-invalid]")) node.removeAttribute("aria-invalid");
}

function showErrors(form, error, prefix = "e-") {
  const general = [];
  for (const item of error.problem?.errors || []) {
    const top = String(item.field).split(/[.[]/)[0];
    const slot = document.getElementById(`${prefix}${top}`);
    if (slot) {
      slot.textContent = slot.textContent ? `${slot.textContent} ${item.message}` : `${item.field}: ${item.message}`;
      form.querySelector(`[data-field="${CSS.escape(top)}"] input, [data-field="${CSS.escape(top)}"] select, [data-field="${CSS.escape(top)}"] textarea`)
        ?.setAttribute("aria-invalid", "true");
    } else {
      general.push(`${item.field}: ${item.message}`);
    }
  }
  return general;
}

async function submitView() {
  const project = body.dataset.project;
  const form = document.getElementById("submit");
  const formErrors = document.getElementById("form-errors");
  const pool = form.elements.compute_pool;
  try {
    const pools = await api(`projects/${enc(project)}/compute-pools?limit=100`);
    pool.replaceChildren(...pools.items.map((p) => el("option", { value: p.name, text: p.name })));
  } catch (error) {
    formErrors.textContent = error.message;
  }
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    formErrors.textContent = "";
    const f = form.elements;
    let extra = {};
    try {
      extra = JSON.parse(f.extra.value || "{}");
      if (typeof extra !== "object" || Array.isArray(extra) || extra === null) throw new Error("must be a JSON object");
    } catch (error) {
      document.getElementById("e-extra").textContent = `extra: ${error.message}`;
      f.extra.setAttribute("aria-invalid", "true");
      return;
    }
    const number = (value) => (value.trim() === "" ? undefined : Number(value));
    const spec = {
      name: f.name.value.trim(),
      compute_pool: f.compute_pool.value,
      image: f.image.value.trim(),
      accelerators: number(f.accelerators.value),
      replicas: number(f.replicas.value),
      cpu: f.cpu.value.trim() || undefined,
      memory: f.memory.value.trim() || undefined,
      ...extra,
    };
    const words = f.command.value.trim().split(/\s+/).filter(Boolean);
    if (words.length && !("command" in extra)) spec.command = words;
    try {
      const created = await api(`projects/${enc(project)}/workloads`, {
        method: "POST", json: spec, headers: { "Idempotency-Key": crypto.randomUUID() } });
      window.location.assign(`/projects/${enc(project)}/workloads/${enc(created.name)}`);
    } catch (error) {
      const general = showErrors(form, error);
      formErrors.textContent = [error.message, ...general].join(" ");
      const first = form.querySelector("[aria-invalid]");
      if (first) first.focus();
    }
  });
  specEditor(project);
}

// A whole spec pasted as YAML or JSON: the server reads it (POST /projects/{p}/spec-text), then
// it is submitted to the API like the form's fields, so the API's validation is the only one.
// A spec of `kind: Service` is submitted as an inference service.
function specEditor(project) {
  const form = document.getElementById("submit-spec");
  const area = form.elements.spec;
  const errors = document.getElementById("e-spec");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    errors.replaceChildren();
    area.removeAttribute("aria-invalid");
    let spec;
    try {
      ({ spec } = await api(`/projects/${enc(project)}/spec-text`, { method: "POST", text: area.value }));
    } catch (error) {
      // Not YAML or JSON (or not a mapping): the server's one sentence says where and why.
      errors.replaceChildren(el("p", { text: error.message }));
      area.setAttribute("aria-invalid", "true");
      area.focus();
      return;
    }
    // `kind: Service` (as `aicp apply` reads it) makes an inference service, `kind: Workload` or
    // none a workload; any other kind is left in the body, for the API to name.
    const { kind, ...fields } = spec;
    const named = String(kind ?? "workload").toLowerCase();
    const collection = named === "service" ? "services" : "workloads";
    try {
      const created = await api(`projects/${enc(project)}/${collection}`, {
        method: "POST", json: ["service", "workload"].includes(named) ? fields : spec,
        headers: { "Idempotency-Key": crypto.randomUUID() } });
      window.location.assign(`/projects/${enc(project)}/${collection}/${enc(created.name)}`);
    } catch (error) {
      // The API's problem: its sentence, then each invalid field with what is wrong with it.
      const items = (error.problem?.errors || []).map((e) => el("li", { text: `${e.field}: ${e.message}` }));
      errors.replaceChildren(el("p", { text: error.message }), items.length ? el("ul", {}, ...items) : "");
      area.setAttribute("aria-invalid", "true");
      area.focus();
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Admin: projects, bindings with the quota granted per class, tokens (create, revoke).

async function adminView() {
  const projects = await api("projects?limit=500");
  const ptbody = document.querySelector("#projects tbody");
  ptbody.replaceChildren(...projects.items.map((p) => el("tr", {},
    el("th", { scope: "row" }, el("a", { href: `/projects/${enc(p.name)}`, text: p.name })),
    el("td", {}, stateBadge(p.status?.state ?? "")),
    el("td", { text: p.status?.reason ?? "" }),
    el("td", { text: p.limits ? JSON.stringify(p.limits) : "none" }))));

  const granted = new Map();
  await Promise.all(projects.items.map(async (p) => {
    try {
      const pools = await api(`projects/${enc(p.name)}/compute-pools?limit=500`);
      for (const pool of pools.items) {
        const entry = granted.get(pool.accelerator_class) || { quota: 0, used: 0 };
        entry.quota += pool.quota?.accelerators || 0;
        entry.used += pool.status?.usage?.accelerators_admitted || 0;
        granted.set(pool.accelerator_class, entry);
      }
    } catch { /* a project being deleted: skipped */ }
  }));
  const bindings = await api("accelerator-bindings?limit=500");
  document.querySelector("#bindings tbody").replaceChildren(...bindings.items.map((b) => {
    const g = granted.get(b.accelerator_class) || { quota: 0, used: 0 };
    return el("tr", {},
      el("th", { scope: "row", text: b.accelerator_class }),
      el("td", { text: b.resource_name }),
      el("td", { text: b.flavor }),
      el("td", { text: Object.entries(b.node_labels || {}).map(([k, v]) => `${k}=${v}`).join(", ") }),
      el("td", { text: `${g.quota} GPUs granted, ${g.used} in use` }));
  }));

  const select = document.getElementById("token-project");
  select.replaceChildren(...projects.items.map((p) => el("option", { value: p.name, text: p.name })));
  const tbody = document.querySelector("#tokens tbody");
  const secret = document.getElementById("secret");

  async function loadTokens() {
    if (!select.value) return;
    const tokens = await api(`projects/${enc(select.value)}/tokens?limit=500`);
    tbody.replaceChildren(...tokens.items.map((t) => {
      const revoke = el("button", { type: "button", class: "danger", text: "Revoke", "aria-label": `Revoke token ${t.name}` });
      revoke.hidden = Boolean(t.revoked_at);
      revoke.addEventListener("click", async () => {
        try {
          await api(`projects/${enc(select.value)}/tokens/${enc(t.id)}`, { method: "DELETE" });
          await loadTokens();
        } catch (error) { secret.hidden = false; secret.textContent = error.message; }
      });
      return el("tr", {},
        el("th", { scope: "row", text: t.name }),
        el("td", { text: t.role }),
        el("td", { text: new Date(t.created_at).toLocaleString() }),
        el("td", { text: t.expires_at ? new Date(t.expires_at).toLocaleString() : "never" }),
        el("td", { text: t.revoked_at ? "revoked" : "live" }),
        el("td", {}, revoke));
    }));
  }
  select.addEventListener("change", () => { secret.hidden = true; loadTokens(); });
  const form = document.getElementById("new-token");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    const days = form.elements.expires_in_days.value.trim();
    const json = { name: form.elements.name.value.trim(), role: form.elements.role.value };
    if (days) json.expires_in_days = Number(days);
    try {
      const created = await api(`projects/${enc(select.value)}/tokens`, { method: "POST", json,
        headers: { "Idempotency-Key": crypto.randomUUID() } });
      secret.hidden = false;
      secret.replaceChildren(el("p", { text: `Token ${created.name} created. Its secret is shown this once:` }),
        el("code", { class: "secret", text: created.token }));
      form.reset();
      await loadTokens();
    } catch (error) {
      const general = showErrors(form, error, "te-");
      secret.hidden = false;
      secret.textContent = [error.message, ...general].join(" ");
    }
  });
  await loadTokens();
}

const views = {
  project: projectView, workload: workloadView, service: serviceView, submit: submitView, admin: adminView,
};
const view = views[body.dataset.view];
if (view) view().catch((error) => { console.error(error); });
