// Thematiq dashboard: one ES module, no build step, no dependencies. Served inlined into /api/ui (blueprints/ui.py).
// Views: #/ (jobs), #/new (submit), #/jobs/{id} (a job, its progress and its themes). See docs/dashboard.md.

const API = location.pathname.replace(/\/ui\/?$/, "");   // "/api" under the default routePrefix
const KEY = "thematiq.key";
const KIND = "thematiq.key-kind";   // "function" (x-functions-key, the app itself) or "apim" (a subscription key)
const INPUT = "thematiq.input.";                           // sessionStorage: inputs submitted from this tab
const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);
const STATUSES = ["queued", "running", "retrying", "succeeded", "failed", "cancelled"];
const THEMATIC_STAGES = ["clean", "embed", "cluster", "describe", "assign", "insight", "done"];
//: Polling intervals (ms). Hidden tabs back off from HIDDEN_MS, doubling up to MAX_HIDDEN_MS.
export const POLL = { jobMs: 1500, listMs: 3000, hiddenMs: 15000, maxHiddenMs: 120000, maxErrorMs: 30000, maxHintMs: 10000 };

const main = document.getElementById("main");
const announcer = document.getElementById("announcer");

// ---------------------------------------------------------------- DOM helpers (never innerHTML with data)
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) el.append(c instanceof Node ? c : String(c));
  return el;
}
// replaceChildren/append turn null into the text "null": drop empty slots first.
const fill = (el, ...children) => el.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
const announce = (text) => { announcer.textContent = ""; setTimeout(() => { announcer.textContent = text; }, 50); };
const pct = (x) => `${(x * 100).toFixed(1)}%`;
// A share from its count and denominator: the result's shares are rounded to 4 decimals, and rounding those
// again to 1 decimal gave 5 of 401 (1.247 %, stored 0.0125) as 1.3 % where the report and the CLI say 1.2 %.
const shareFrom = (count, n, stored) => (n ? count / n : stored);
const shortId = (id) => id.slice(-10);
function fmtTime(iso) { return iso ? new Date(iso).toLocaleString() : "—"; }
function fmtDuration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms) || ms < 0) return "—";
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}
function jobDuration(job) {
  if (!job.started_at) return null;
  const end = job.finished_at ? Date.parse(job.finished_at) : Date.now();
  return end - Date.parse(job.started_at);
}
function fraction(job) {
  if (job.status === "succeeded") return 1;
  const p = job.progress || {};
  return p.total ? Math.min(1, p.processed / p.total) : null;
}
function meter(job, big = false) {
  const f = fraction(job);
  const bar = h("span");
  if (f !== null) bar.style.width = pct(f);
  const label = f === null ? `${job.status}, progress unknown` : `${Math.round(f * 100)}% done`;
  return h("span", { class: `meter${big ? " big" : ""}${f === null && !TERMINAL.has(job.status) ? " indeterminate" : ""}`,
    role: "progressbar", "aria-label": label, "aria-valuemin": 0, "aria-valuemax": 100,
    "aria-valuenow": f === null ? null : Math.round(f * 100) }, bar);
}
const statusBadge = (s) => h("span", { class: `status status-${s}` }, s);

// ---------------------------------------------------------------- the key: ?code= on first load, then sessionStorage
function takeKeyFromUrl() {
  // ?code= is a function key (the app itself, e.g. devhost); ?subscription-key= is an API Management
  // subscription key (through the gateway). Either moves to sessionStorage and leaves the address bar.
  const url = new URL(location.href);
  for (const [param, kind] of [["code", "function"], ["subscription-key", "apim"]]) {
    const value = url.searchParams.get(param);
    if (value) {
      sessionStorage.setItem(KEY, value);
      sessionStorage.setItem(KIND, kind);
      url.searchParams.delete(param);
    }
  }
  history.replaceState(history.state, "", url.pathname + url.search + url.hash);
}
// Without a hint, the page's own path tells: the app serves it under /api, a gateway under its API path.
const keyKind = () => sessionStorage.getItem(KIND) || (API === "/api" ? "function" : "apim");
const keyHeader = () => (keyKind() === "apim" ? "Ocp-Apim-Subscription-Key" : "x-functions-key");
const keyName = () => (keyKind() === "apim" ? "API Management subscription key" : "function key");
// A 401 the app wrote (problem+json of its own type) is not about the key: a new key would not help.
const fromApp = (problem) => typeof problem?.type === "string" && problem.type.startsWith("https://thematiq.dev/problems/");
let keyPrompt = null;
function askKey(reason) {
  // One dialog for every request that needs it; they all wait for the same answer.
  if (keyPrompt) return keyPrompt;
  const dialog = document.getElementById("key-dialog");
  const form = document.getElementById("key-form");
  const input = document.getElementById("key-input");
  document.getElementById("key-reason").textContent = reason;
  document.getElementById("key-title").textContent = keyKind() === "apim" ? "Subscription key" : "Function key";
  input.value = "";
  keyPrompt = new Promise((resolve) => {
    const done = (ev) => {
      ev.preventDefault();
      if (!input.value) return;
      sessionStorage.setItem(KEY, input.value);
      sessionStorage.setItem(KIND, keyKind());
      form.removeEventListener("submit", done);
      dialog.close();
      keyPrompt = null;
      resolve(input.value);
    };
    form.addEventListener("submit", done);
  });
  dialog.showModal();
  input.focus();
  return keyPrompt;
}

export class ApiError extends Error {
  constructor(status, problem) {
    super(problem?.detail || problem?.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
}

async function api(path, { method = "GET", body, headers = {}, signal, raw = false } = {}) {
  for (let attempt = 0; ; attempt++) {
    let key = sessionStorage.getItem(KEY);
    if (!key) key = await askKey(`Enter the ${keyName()} to use the API. It is kept in this tab only.`);
    const init = { method, signal, headers: { [keyHeader()]: key, ...headers }, cache: "no-store" };
    if (body !== undefined) { init.body = JSON.stringify(body); init.headers["content-type"] = "application/json"; }
    const resp = await fetch(API + path, init);
    const type = resp.headers.get("content-type") || "";
    if (resp.status === 401) {
      const data = type.includes("json") ? await resp.json().catch(() => null) : null;
      if (fromApp(data)) {
        // The key was fine; the app refused the caller: no tenant, or not called through API Management.
        throw new ApiError(401, { ...data, title: "The API does not know your tenant",
          detail: `The API does not know your tenant (${data.detail || "no tenant"}); your key was accepted. ` +
            "Open the dashboard through API Management " +
            "(https://<gateway>/<api>/ui?subscription-key=KEY); locally set DEFAULT_TENANT or use devhost.gateway." });
      }
      if (attempt < 3) {
        sessionStorage.removeItem(KEY);
        await askKey(`The API refused the key (401). Enter the ${keyName()} again.`);
        continue;
      }
      throw new ApiError(401, data || { detail: "the key was refused" });
    }
    if (raw && resp.ok) return resp;
    if (resp.status === 304) return { status: 304, data: null, headers: resp.headers };   // If-None-Match: unchanged
    const data = type.includes("json") ? await resp.json() : await resp.text();
    if (!resp.ok) throw new ApiError(resp.status, typeof data === "object" ? data : { detail: data || resp.statusText });
    return { status: resp.status, data, headers: resp.headers };
  }
}

function errorBox(err, title = "Something went wrong") {
  const p = err instanceof ApiError ? err.problem : { detail: String(err?.message || err) };
  const items = (p.errors || []).map((e) => h("li", {}, h("code", {}, e.field), ": ", e.message));
  return h("div", { class: "alert", role: "alert" }, h("h2", {}, title),
    h("p", {}, p.detail || p.title || "Unknown error", err?.status ? ` (HTTP ${err.status})` : ""),
    items.length ? h("ul", {}, items) : null);
}

// ---------------------------------------------------------------- polling: one timer per view
const pollers = new Set();
document.addEventListener("visibilitychange", () => { for (const p of pollers) p.visibilityChanged(); });

export class Poller {
  // task(signal) -> true to poll again, false to stop for good.
  constructor(task, visibleMs) { this.task = task; this.visibleMs = visibleMs; this.timer = null; this.ctrl = null;
    this.stopped = false; this.hiddenDelay = 0; this.errors = 0; this.inFlight = false; this.hintMs = 0; }
  start() { pollers.add(this); this.schedule(0); return this; }
  stop() {
    this.stopped = true; pollers.delete(this);
    clearTimeout(this.timer); this.timer = null;
    if (this.ctrl) this.ctrl.abort();
  }
  schedule(ms) { clearTimeout(this.timer); this.timer = setTimeout(() => this.tick(), ms); }
  nextDelay() {
    if (document.visibilityState === "hidden") {
      this.hiddenDelay = this.hiddenDelay ? Math.min(this.hiddenDelay * 2, POLL.maxHiddenMs) : POLL.hiddenMs;
      return this.hiddenDelay;
    }
    this.hiddenDelay = 0;
    // The service's Retry-After for this job (hintMs) paces a visible poller, never faster than visibleMs.
    const base = Math.max(this.visibleMs, this.hintMs || 0);
    return this.errors ? Math.min(base * 2 ** this.errors, POLL.maxErrorMs) : base;
  }
  visibilityChanged() {
    // Back in view: poll now rather than wait out a long hidden delay.
    if (!this.stopped && !this.inFlight && document.visibilityState === "visible" && this.hiddenDelay) {
      this.hiddenDelay = 0; this.schedule(0);
    }
  }
  async tick() {
    this.timer = null;
    if (this.stopped) return;
    this.ctrl = new AbortController();
    this.inFlight = true;
    let again = true;
    try {
      again = await this.task(this.ctrl.signal);
      this.errors = 0;
    } catch (err) {
      if (err?.name === "AbortError" || this.stopped) return;
      this.errors = Math.min(this.errors + 1, 5);
      console.warn("poll failed", err);
    } finally { this.inFlight = false; }
    if (this.stopped) return;
    if (again === false) { this.stop(); return; }
    this.schedule(this.nextDelay());
  }
}

// ---------------------------------------------------------------- router
let view = null;          // the current view: { dispose() }
const routes = [
  [/^#\/?$|^#\/jobs\/?$|^$/, () => jobsView()],
  [/^#\/new$/, () => newView()],
  [/^#\/jobs\/([0-9a-f]{28})$/, (m) => jobView(m[1])],
];
function route(focus = true) {
  if (view) view.dispose();
  view = null;
  main.replaceChildren();
  const [hash, query] = (location.hash || "#/").split("?");
  const params = new URLSearchParams(query || "");
  for (const a of document.querySelectorAll("[data-nav]")) a.removeAttribute("aria-current");
  for (const [rx, make] of routes) {
    const m = hash.match(rx);
    if (m) { view = make(m, params); break; }
  }
  if (!view) { main.append(h("h1", {}, "Not found"), h("p", {}, h("a", { href: "#/" }, "Back to the jobs"))); view = { dispose() {} }; }
  if (focus) main.focus();
}

// ---------------------------------------------------------------- #/ the jobs list
function jobsView() {
  document.title = "Jobs · Thematiq";
  document.querySelector('[data-nav="jobs"]').setAttribute("aria-current", "page");
  const params = new URLSearchParams((location.hash.split("?")[1]) || "");
  let status = params.get("status") || "";
  let items = [];
  let cursor = null;
  const select = h("select", { id: "status-filter" }, h("option", { value: "" }, "All"),
    STATUSES.map((s) => h("option", { value: s, selected: s === status }, s)));
  const tbody = h("tbody");
  const updated = h("span", { class: "muted", id: "list-updated" });
  const errSlot = h("div");
  const more = h("button", { type: "button", hidden: true }, "Load more");
  const refresh = h("button", { type: "button" }, "Refresh");
  main.append(
    h("h1", {}, "Jobs"),
    h("div", { class: "toolbar" },
      h("div", {}, h("label", { for: "status-filter" }, "Status"), select),
      h("div", { class: "grow" }, updated),
      refresh, h("a", { class: "button", href: "#/new" }, "New analysis")),
    errSlot,
    h("table", { "aria-describedby": "list-updated" },
      h("caption", { class: "visually-hidden" }, "Jobs of your tenant, newest first"),
      h("thead", {}, h("tr", {},
        h("th", { scope: "col" }, "Job"), h("th", { scope: "col" }, "Status"), h("th", { scope: "col" }, "Pipeline"),
        h("th", { scope: "col" }, "Created"), h("th", { scope: "col" }, "Progress"),
        h("th", { scope: "col", class: "num" }, "Duration"), h("th", { scope: "col", class: "num" }, "Attempts"))),
      tbody),
    more);

  function render() {
    tbody.replaceChildren(...items.map((j) => h("tr", { dataset: { jobId: j.id } },
      h("td", {}, h("a", { href: `#/jobs/${j.id}`, class: "mono", title: j.id, "aria-label": `Job ${j.id}` }, shortId(j.id))),
      h("td", {}, statusBadge(j.status)),
      h("td", {}, j.pipeline),
      h("td", {}, h("time", { datetime: j.created_at }, fmtTime(j.created_at))),
      h("td", {}, meter(j)),
      h("td", { class: "num" }, fmtDuration(jobDuration(j))),
      h("td", { class: "num" }, `${j.attempts} / ${j.max_attempts}`))));
    if (!items.length) tbody.append(h("tr", {}, h("td", { colspan: 7, class: "muted" }, status ? `No ${status} jobs.` : "No jobs yet.")));
    more.hidden = !cursor;
  }
  async function load(signal) {
    const q = new URLSearchParams({ limit: "50" });
    if (status) q.set("status", status);
    const { data } = await api(`/jobs?${q}`, { signal });
    // Keep the pages already loaded with "Load more" beyond the first.
    const extra = items.slice(50).filter((j) => !data.items.some((d) => d.id === j.id));
    items = [...data.items, ...extra];
    if (!extra.length) cursor = data.next_cursor;
    errSlot.replaceChildren();
    const active = items.some((j) => !TERMINAL.has(j.status));
    updated.textContent = `Updated ${new Date().toLocaleTimeString()}${active ? " · refreshing while jobs run" : " · all jobs finished: not refreshing"}`;
    render();
    return active;   // every job on screen finished: stop polling (Refresh or a filter change starts it again)
  }
  let poller = null;
  const task = async (signal) => {
    try { return await load(signal); } catch (err) {
      if (err?.name !== "AbortError") errSlot.replaceChildren(errorBox(err, "Could not load the jobs"));
      throw err;
    }
  };
  const restart = () => { if (poller) poller.stop(); poller = new Poller(task, POLL.listMs).start(); };
  select.addEventListener("change", () => {
    status = select.value; items = []; cursor = null;
    history.replaceState(null, "", status ? `#/?status=${status}` : "#/");
    restart();
  });
  refresh.addEventListener("click", restart);
  more.addEventListener("click", async () => {
    const q = new URLSearchParams({ limit: "50", cursor });
    if (status) q.set("status", status);
    try {
      const { data } = await api(`/jobs?${q}`);
      items = [...items, ...data.items]; cursor = data.next_cursor; render();
    } catch (err) { errSlot.replaceChildren(errorBox(err, "Could not load more jobs")); }
  });
  restart();
  return { dispose() { if (poller) poller.stop(); } };
}

// ---------------------------------------------------------------- #/jobs/{id}
function storedInput(jobId) {
  try { return JSON.parse(sessionStorage.getItem(INPUT + jobId) || "null"); } catch { return null; }
}
function storeInput(jobId, input) {
  try { sessionStorage.setItem(INPUT + jobId, JSON.stringify(input)); } catch { /* quota: texts just won't show */ }
}

function jobView(jobId) {
  document.title = `Job ${shortId(jobId)} · Thematiq`;
  const heading = h("h1", {}, "Job ", h("span", { class: "mono" }, jobId));
  const errSlot = h("div");
  const body = h("div");
  const live = h("p", { class: "progress-text", "aria-live": "polite", id: "job-live" });
  const resultSlot = h("div");
  main.append(h("p", {}, h("a", { href: "#/" }, "← Jobs")), heading, errSlot, body, resultSlot);
  const stagesSeen = [];
  let job = null;
  let lastAnnounced = "";
  let resultShown = false;
  let disposed = false;
  const ctrl = new AbortController();

  const cancelBtn = h("button", { type: "button", class: "danger", id: "cancel-job" }, "Cancel job");
  const retryBtn = h("button", { type: "button", id: "retry-job" }, "Retry as a new job");
  cancelBtn.addEventListener("click", async () => {
    cancelBtn.disabled = true;
    try {
      const { data } = await api(`/jobs/${jobId}/cancel`, { method: "POST" });
      update(data);
      announce(data.status === "cancelled" ? "Job cancelled." : "Cancel requested; the job stops at its next check.");
      if (poller.stopped && !TERMINAL.has(data.status)) poller = new Poller(task, POLL.jobMs).start();
      else if (!TERMINAL.has(data.status)) { poller.hintMs = 0; if (!poller.inFlight) poller.schedule(POLL.jobMs); }
    } catch (err) { errSlot.replaceChildren(errorBox(err, "Could not cancel")); cancelBtn.disabled = false; }
  });
  retryBtn.addEventListener("click", async () => {
    retryBtn.disabled = true;
    try {
      const { data } = await api(`/jobs/${jobId}/retry`, { method: "POST" });
      const input = storedInput(jobId);
      if (input) storeInput(data.id, input);
      location.hash = `#/jobs/${data.id}`;
    } catch (err) { errSlot.replaceChildren(errorBox(err, "Could not retry")); retryBtn.disabled = false; }
  });

  function update(j) {
    job = j;
    const p = j.progress || {};
    if (p.stage && stagesSeen[stagesSeen.length - 1] !== p.stage) stagesSeen.push(p.stage);
    const stages = j.pipeline === "thematic" ? THEMATIC_STAGES : stagesSeen;
    const current = j.status === "succeeded" ? "done" : p.stage;
    const reached = stages.indexOf(current);
    const counts = p.total ? `${p.processed} of ${p.total}` : p.processed ? `${p.processed}` : "";
    const line = TERMINAL.has(j.status) ? `Job ${j.status}.`
      : `Job ${j.status}${p.stage ? `, stage ${p.stage}` : ""}${j.cancel_requested ? ", cancel requested" : ""}.`;
    live.textContent = `${line}${counts && !TERMINAL.has(j.status) ? ` ${counts}` : ""}${p.message && !TERMINAL.has(j.status) ? ` — ${p.message}` : ""}`;
    // Screen readers hear status and stage changes, not every counter tick.
    if (line !== lastAnnounced) { lastAnnounced = line; announce(line); }
    cancelBtn.disabled = TERMINAL.has(j.status) || j.cancel_requested;
    retryBtn.hidden = !(j.status === "failed" || j.status === "cancelled");
    fill(body,
      h("section", { class: "progress-box", "aria-labelledby": "progress-h" },
        h("h2", { id: "progress-h" }, "Progress ", statusBadge(j.status)),
        stages.length ? h("ol", { class: "stages", "aria-label": "Stages" }, stages.map((s, i) => {
          const state = s === current && !TERMINAL.has(j.status) ? "current" : (reached >= 0 && i < reached) || (j.status === "succeeded") ? "done" : "";
          return h("li", { class: state, "aria-current": state === "current" ? "step" : null }, s,
            state === "done" ? h("span", { class: "visually-hidden" }, " (done)") : null);
        })) : null,
        meter(j, true), live,
        h("div", { class: "actions" }, cancelBtn, retryBtn)),
      j.error ? h("div", { class: "alert", role: "alert", id: "job-error" }, h("h2", {}, `Failed: ${j.error.type}`),
        h("p", {}, j.error.message)) : null,
      h("h2", {}, "Details"),
      h("dl", { class: "facts" },
        h("dt", {}, "Pipeline"), h("dd", {}, j.pipeline),
        h("dt", {}, "Created"), h("dd", {}, fmtTime(j.created_at)),
        h("dt", {}, "Started"), h("dd", {}, fmtTime(j.started_at)),
        h("dt", {}, "Finished"), h("dd", {}, fmtTime(j.finished_at)),
        h("dt", {}, "Duration"), h("dd", {}, fmtDuration(jobDuration(j))),
        h("dt", {}, "Attempts"), h("dd", {}, `${j.attempts} of at most ${j.max_attempts}`),
        h("dt", {}, "Parameters"), h("dd", {}, h("code", {}, JSON.stringify(j.params))),
        Object.keys(j.usage || {}).length ? [h("dt", {}, "Usage"), h("dd", {}, h("code", {}, JSON.stringify(j.usage)))] : null));
    if (j.status === "succeeded" && !resultShown) { resultShown = true; showResult(j); }
  }

  async function showResult(j) {
    resultSlot.replaceChildren(h("p", { class: "muted" }, "Loading the result…"));
    try {
      const { data, headers } = await api(`/jobs/${j.id}/result`, { signal: ctrl.signal });
      if (disposed) return;
      // The result's ETag is the version a codebook edit is made on (If-Match); an edit reloads the result.
      const edit = { etag: headers.get("etag"), reload: () => showResult(j) };
      resultSlot.replaceChildren(j.pipeline === "thematic" && data?.themes ? themesView(j, data, edit) : rawResult(j, data));
    } catch (err) {
      if (err?.name !== "AbortError") resultSlot.replaceChildren(errorBox(err, "Could not load the result"));
    }
  }

  let etag = null;   // the job as last seen: an unchanged job answers 304 with no body
  const task = async (signal) => {
    try {
      const resp = await api(`/jobs/${jobId}`, { signal, headers: etag ? { "if-none-match": etag } : {} });
      errSlot.replaceChildren();
      const retryAfter = Number(resp.headers.get("retry-after"));
      poller.hintMs = retryAfter > 0 ? Math.min(retryAfter * 1000, POLL.maxHintMs) : 0;
      if (resp.status === 304 && job) return !TERMINAL.has(job.status);
      etag = resp.headers.get("etag");
      update(resp.data);
      return !TERMINAL.has(resp.data.status);   // finished: no more polls for this job
    } catch (err) {
      if (err?.name === "AbortError") throw err;
      if (err instanceof ApiError && err.status === 404) {
        errSlot.replaceChildren(errorBox(err, "No such job in your tenant"));
        return false;
      }
      errSlot.replaceChildren(errorBox(err, "Could not load the job (retrying)"));
      throw err;
    }
  };
  let poller = new Poller(task, POLL.jobMs).start();
  if (!storedInput(jobId)) retryBtn.title = "Submits the job's stored pipeline, parameters and input again";
  return { dispose() { disposed = true; poller.stop(); ctrl.abort(); } };
}

async function download(jobId, format) {
  const resp = await api(`/jobs/${jobId}/result${format === "json" ? "" : `?format=${format}`}`, { raw: true });
  const blob = await resp.blob();
  const name = (resp.headers.get("content-disposition") || "").match(/filename="([^"]+)"/)?.[1] || `${jobId}.${format}`;
  const url = URL.createObjectURL(blob);
  const a = h("a", { href: url, download: name, hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

function downloads(job, formats) {
  const status = h("span", { class: "muted", "aria-live": "polite" });
  return h("div", { class: "actions", role: "group", "aria-label": "Downloads" },
    formats.map(([fmt, label]) => h("button", { type: "button", dataset: { format: fmt }, onclick: async () => {
      status.textContent = `Preparing ${label}…`;
      try { await download(job.id, fmt); status.textContent = `${label} downloaded.`; }
      catch (err) { status.textContent = `Download failed: ${err.message}`; }
    } }, `Download ${label}`)), status);
}

function rawResult(job, data) {
  const text = typeof data === "string" ? data : JSON.stringify(data, null, 2);
  return h("section", { "aria-labelledby": "result-h" }, h("h2", { id: "result-h" }, "Result"),
    downloads(job, [["json", "JSON"]]),
    h("pre", { class: "raw", tabindex: 0 }, text.length > 20000 ? `${text.slice(0, 20000)}\n… (download for the rest)` : text));
}

// A breakdown group Thematiq made (schema 1.6 `synthetic`: "missing", "other"), not a submitted value; a document
// before 1.6 has no `synthetic`, and its groups named "(missing)" and "other values" are the synthetic ones.
const SYNTHETIC_GROUPS = { missing: "(missing)", other: "other values" };
function groupSynthetic(g) {
  if ("synthetic" in g) return g.synthetic ?? null;
  return Object.keys(SYNTHETIC_GROUPS).find((k) => SYNTHETIC_GROUPS[k] === g.value) ?? null;
}
// Its heading: a synthetic group by its name; a real value as it is, in double quotes when it reads as a synthetic
// group's name (a survey's own "(missing)" answer), as the report, the xlsx and the CLI write it (insight.heading).
function groupHeading(g) {
  const syn = groupSynthetic(g);
  if (syn) return SYNTHETIC_GROUPS[syn] ?? String(g.value);
  const v = String(g.value);
  return Object.values(SYNTHETIC_GROUPS).includes(v.replace(/^"+|"+$/g, "")) ? `"${v}"` : v;
}

// The /responses filter that lists a breakdown group's responses, as the breakdown counts them: a synthetic group by
// missing=KEY / other_values=KEY (schema 1.6; no metadata value names it), a categorical value by metadata[KEY]=VALUE
// (its label is the value, or a long value's cut, which the filter reads as a prefix). Null for an NPS group or a
// quartile range, which no filter names (their values are numbers).
function groupQuery(b, g) {
  const syn = groupSynthetic(g);
  if (syn === "missing") return { missing: b.field };
  if (syn === "other") return { other_values: b.field };
  return b.kind === "categorical" ? { [`metadata[${b.field}]`]: String(g.value) } : null;
}

// ---------------------------------------------------------------- the themes of a thematic result
function themesView(job, doc, edit = null) {
  const counts = doc.run?.counts || {};
  const usable = counts.usable || 0;
  const total = counts.responses || doc.assignments.length;
  // Every list of responses reads GET /jobs/{id}/responses: texts and metadata as submitted, for every job,
  // wherever it was submitted, a page at a time (issue 23). The counts on the bars come from the result.
  let other = 0;
  let unusable = 0;
  const duplicateOf = new Map();
  for (const a of doc.assignments) {
    if (a.bucket === "other") other++;
    else if (a.bucket === "unusable") unusable++;
    if (a.duplicate_of !== null && a.duplicate_of !== undefined) duplicateOf.set(String(a.response_id), a.duplicate_of);
  }
  // Segment suggestions: the categorical breakdown groups (exact metadata values).
  const segmentHints = [];
  for (const b of doc.breakdowns || []) {
    if (b.kind !== "categorical") continue;
    // A synthetic group is no metadata value (a real "(missing)" answer is, and is offered).
    for (const g of b.groups) if (!groupSynthetic(g)) segmentHints.push(`${b.field}=${g.value}`);
  }
  // Every group a filter can name, synthetic ones too (a key=value cannot: "plan=(missing)" is the answer
  // "(missing)"): the theme view's Group picker, and the heat map's header links.
  const groupChoices = [];
  for (const b of doc.breakdowns || []) {
    for (const g of b.groups) {
      const query = groupQuery(b, g);
      if (query) groupChoices.push({ label: `${b.field}: ${groupHeading(g)}`, query, synthetic: groupSynthetic(g) ?? "" });
    }
  }
  const responseItem = (r) => h("li", { dataset: { responseId: r.id } },
    h("span", { class: "rid" }, `#${r.id}`),
    h("span", { class: "response-text" }, r.text),
    r.reason ? h("span", { class: "muted" }, ` — ${r.reason.replace("_", " ")}${duplicateOf.has(String(r.id)) ? ` of #${duplicateOf.get(String(r.id))}` : ""}`) : null,
    r.themes.length > 1 ? h("span", { class: "muted" }, ` (also in ${r.themes.length - 1} other theme${r.themes.length > 2 ? "s" : ""})`) : null,
    r.sentiment ? h("span", { class: `sent-label ${r.sentiment.label}` }, r.sentiment.label) : null,
    Object.keys(r.metadata || {}).length ? h("span", { class: "response-meta muted" },
      Object.entries(r.metadata).map(([k, v]) => `${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`).join(" · ")) : null);
  let lists = 0;
  // query: the list's own filter (theme=…, bucket=…); filters: offer segment and sentiment filters on top.
  const responseList = (query, label, { filters = false } = {}) => {
    const n = ++lists;
    const heading = h("h3", {}, label);
    const list = h("ul", { class: "responses", tabindex: 0, "aria-label": label });
    const status = h("div", { class: "muted", "aria-live": "polite" }, "Loading responses…");
    const more = h("button", { type: "button", class: "load-more", hidden: true }, "Load more");
    let cursor = null;
    let extra = {};
    let generation = 0;
    async function load(reset) {
      const mine = reset ? ++generation : generation;
      if (reset) { cursor = null; list.replaceChildren(); status.textContent = "Loading responses…"; }
      more.disabled = true;
      const qs = new URLSearchParams({ ...query, ...extra, limit: "100" });
      if (cursor) qs.set("cursor", cursor);
      try {
        const { data } = await api(`/jobs/${job.id}/responses?${qs}`);
        if (mine !== generation) return;   // a newer filter was applied meanwhile
        // The list keeps unusable rows (marked); a breakdown's n and the bars' shares count the usable ones.
        heading.textContent = data.usable != null && data.usable !== data.total
          ? `${label} (${data.total}: ${data.usable} usable, the n a breakdown states)` : `${label} (${data.total})`;
        list.append(...data.items.map(responseItem));
        cursor = data.next_cursor;
        more.hidden = !cursor;
        more.disabled = false;
        more.textContent = `Load more (${data.total - list.childElementCount} left)`;
        status.textContent = data.total ? "" : "None.";
      } catch (err) {
        if (mine === generation) status.replaceChildren(errorBox(err, "Could not load the responses"));
      }
    }
    more.addEventListener("click", () => load(false));
    let controls = null;
    if (filters) {
      const sentiment = h("select", { id: `sentiment-filter-${n}`, name: "sentiment" },
        ["", "positive", "neutral", "negative"].map((v) => h("option", { value: v }, v || "any")));
      const segment = h("input", { id: `segment-filter-${n}`, name: "segment", list: `segment-hints-${n}`,
        placeholder: "key=value", "aria-describedby": `segment-hint-${n}`, autocomplete: "off" });
      const hints = h("datalist", { id: `segment-hints-${n}` }, segmentHints.map((v) => h("option", { value: v })));
      const group = groupChoices.length ? h("select", { id: `group-filter-${n}`, name: "group" },
        h("option", { value: "" }, "any"),
        groupChoices.map((c, i) => h("option", { value: String(i), dataset: { synthetic: c.synthetic } }, c.label))) : null;
      const formError = h("div");
      controls = h("form", { class: "response-filters", role: "search", "aria-label": `Filter: ${label}`,
        onsubmit: (e) => {
          e.preventDefault();
          formError.replaceChildren();
          const next = {};
          const seg = segment.value.trim();
          if (seg) {
            const at = seg.indexOf("=");
            if (at < 1) { formError.replaceChildren(errorBox(new Error("Write the segment as key=value, e.g. plan=pro."), "Not a segment")); return; }
            next[`metadata[${seg.slice(0, at).trim()}]`] = seg.slice(at + 1).trim();
          }
          if (group?.value) Object.assign(next, groupChoices[Number(group.value)].query);
          if (sentiment.value) next.sentiment = sentiment.value;
          extra = next;
          load(true);
        } },
        h("label", { for: `segment-filter-${n}` }, "Segment"), segment, hints,
        h("span", { class: "hint", id: `segment-hint-${n}` }, "metadata key=value"),
        group ? h("label", { for: `group-filter-${n}` }, "Group") : null, group,
        h("label", { for: `sentiment-filter-${n}` }, "Sentiment"), sentiment,
        h("button", { type: "submit" }, "Filter"), formError);
    }
    load(true);
    return h("div", { class: "response-list", dataset: { list: new URLSearchParams(query).toString() } },
      heading, controls, status, list, more);
  };

  let n = 0;
  function row({ id, kind, label, count, share, shareOf, description, keywords, detail, sentiment }) {
    const detailId = `detail-${++n}`;
    const bar = h("span", { class: count ? "bar" : "bar empty" });
    bar.style.width = pct(Math.max(0, Math.min(1, share)));
    const panel = h("div", { class: "theme-detail", id: detailId, hidden: true });
    let built = false;
    const button = h("button", { type: "button", class: "theme-head", "aria-expanded": "false", "aria-controls": detailId },
      h("span", { class: "theme-label" }, label),
      h("span", { class: "bar-track", role: "img", "aria-label": `${count} responses, ${pct(share)} of ${shareOf}` }, bar),
      h("span", { class: "theme-count" }, h("b", {}, String(count)), ` · ${pct(share)}`),
      sentiment ? sentimentBar(sentiment) : null);
    button.addEventListener("click", () => {
      const open = button.getAttribute("aria-expanded") !== "true";
      if (open && !built) { panel.append(...detail()); built = true; }
      button.setAttribute("aria-expanded", String(open));
      panel.hidden = !open;
    });
    return h("li", { class: `theme ${kind}`, dataset: { themeId: id } }, button,
      description || keywords?.length ? h("div", { class: "theme-meta" },
        description ? h("p", { class: "theme-description" }, description) : null,
        keywords?.length ? h("ul", { class: "keywords", "aria-label": "Keywords" }, keywords.map((k) => h("li", {}, k))) : null) : null,
      panel);
  }

  const unusableReasons = Object.entries(counts.unusable || {}).filter(([, v]) => v).map(([k, v]) => `${v} ${k.replace("_", " ")}`).join(", ");
  const rows = [
    ...doc.themes.map((t) => row({ id: t.id, kind: "", label: t.label, count: t.count, share: shareFrom(t.count, usable, t.share), shareOf: "usable responses",
      description: t.description, keywords: t.keywords, sentiment: t.sentiment,
      detail: () => [
        h("h3", {}, "Representative quotes"),
        h("ul", { class: "quotes" }, t.quotes.map((q) => h("li", { dataset: { responseId: q.response_id } },
          h("span", { class: "rid" }, `#${q.response_id}`), h("q", {}, q.text)))),
        ...levelDetail(doc, t, usable),
        responseList({ theme: t.id }, "Every response in this theme", { filters: true })] })),
    row({ id: "other", kind: "other", label: "Other (no theme)", count: other, share: usable ? other / usable : 0,
      shareOf: "usable responses", description: "Usable responses that fit no theme well enough.",
      detail: () => [responseList({ bucket: "other" }, "Responses in no theme", { filters: true })] }),
    row({ id: "unusable", kind: "unusable", label: "Unusable", count: unusable, share: total ? unusable / total : 0,
      shareOf: "all responses", description: `Not analysed: ${unusableReasons || "none"}. Not counted in the shares above.`,
      detail: () => [responseList({ bucket: "unusable" }, "Unusable responses")] }),
  ];
  const llm = doc.run?.llm;
  return h("section", { "aria-labelledby": "themes-h", id: "themes" },
    h("h2", { id: "themes-h" }, `Themes (${doc.themes.length})`),
    h("div", { class: "summary" },
      h("span", {}, h("b", {}, String(total)), " responses"),
      h("span", {}, h("b", {}, String(usable)), " usable"),
      // Copies of an earlier answer are respondents too (params.count_duplicates, schema 1.4): counted, not clustered.
      counts.duplicates ? h("span", { class: "muted copies-note", title: "Each copy is counted with its first copy's themes and its own metadata; never clustered or quoted. count_duplicates=false leaves them out." },
        `(${counts.duplicates} of them cop${counts.duplicates === 1 ? "y" : "ies"} of an earlier answer)`) : null,
      h("span", {}, h("b", {}, String(counts.themed ?? "—")), " in a theme"),
      h("span", {}, h("b", {}, String(other)), " other"),
      h("span", {}, h("b", {}, String(unusable)), " unusable"),
      llm ? h("span", { class: "muted" }, `labels: ${llm.used ? `LLM (${llm.model || "model"})` : "keywords"}`) : null,
      sentimentSource(doc.sentiment)),
    sentimentNote(doc.sentiment),
    downloads(job, [["csv", "CSV"], ["xlsx", "Excel"], ["md", "Markdown"], ["json", "JSON"], ["codebook", "codebook"]]),
    countSummary(doc.run?.theme_count, doc),
    countNote(doc.run?.theme_count, doc.levels),
    broadLevel(doc, usable),
    h("p", { class: "hint" }, "Bars show each theme's share of the usable responses. Select a theme for its quotes and every response in it, filtered by segment or sentiment if you like."),
    h("ul", { class: "themes" }, rows),
    insightView(doc, responseList),
    edit ? codebookEditor(job, doc, edit) : null);
}

// ---------------------------------------------------------------- issue 15: sentiment, breakdowns, change, edits
// Issue 23: which source made the sentiment (a rating field, the LLM, the classifier or the lexicon), so a
// researcher knows what the green and red bars are worth.
function sentimentSource(s) {
  if (!s || !s.source) return null;
  // The scale in words: "score10" was the code's name for it.
  const named = { score10: "0–10, as NPS groups", stars: "1–5 stars", words: "positive / neutral / negative",
    likert7: "1–7", rating10: "1–10", rating0to5: "0–5" }[s.scale] || s.scale;
  // Schema 1.4: whether the scale was declared (params.sentiment_from.scale) or guessed from the values.
  const how = s.scale_from === "declared" ? "declared" : s.scale_from === "inferred" ? "inferred from the values" : "";
  const scale = named && how ? `${named}, ${how}` : named;
  const what = s.source === "metadata" ? `the rating field “${s.field}”${scale ? ` (${scale})` : ""}`
    : s.source === "llm" ? `the LLM${s.model ? ` (${s.model})` : ""}`
    : s.source === "model" ? `the sentiment model${s.model ? ` (${s.model})` : ""}`
    : `the lexicon${s.model ? ` (${s.model})` : ""}`;
  return h("span", { class: "muted", id: "sentiment-source-note", title: s.note || "" }, `sentiment: ${what}`);
}
// What the source did not do as asked, in words on the page (not only a tooltip): the model fell back to the
// lexicon (another encoder embedded the job; in another language every answer scores neutral), or the LLM left
// responses to the lexicon. The Markdown report prints it in its Sentiment section.
function sentimentNote(s) {
  if (!s?.note) return null;
  return h("p", { class: "note", id: "sentiment-note", role: "note" }, `Sentiment: ${s.note}.`);
}
function sentimentBar(s) {
  const total = (s.positive || 0) + (s.neutral || 0) + (s.negative || 0);
  if (!total) return null;
  const part = (kind) => { const el = h("span", { class: `sent ${kind}` }); el.style.width = pct((s[kind] || 0) / total); return el; };
  const label = `Sentiment: ${s.positive} positive, ${s.neutral} neutral, ${s.negative} negative` +
    // A 0-10 rating: the theme's NPS, to one decimal as the report and the impact chart give it (the mean of
    // -1/0/+1 is NPS/100, which the label called "mean -0.95").
    (typeof s.nps === "number" ? `, NPS ${s.nps.toFixed(1)}`
      : s.mean === null || s.mean === undefined ? "" : `, mean ${Number(s.mean).toFixed(2)}`);
  return h("span", { class: "sentiment", role: "img", "aria-label": label, title: label },
    part("positive"), part("neutral"), part("negative"));
}

// Lift → a colour: blue under 1 (less common in the segment), orange above, on a log scale clipped at ×4.
function liftColour(lift) {
  if (lift === null || lift === undefined) return "";
  const x = Math.max(-1, Math.min(1, Math.log(Math.max(lift, 1e-3)) / Math.log(4)));
  return x >= 0 ? `rgba(230, 120, 20, ${(0.12 + 0.6 * x).toFixed(2)})` : `rgba(40, 110, 210, ${(0.12 + 0.6 * -x).toFixed(2)})`;
}

function insightView(doc, responseList = null) {
  const labels = new Map(doc.themes.map((t) => [t.id, t.label]));
  const parts = [];
  for (const b of doc.breakdowns || []) {
    // A group's header links to its responses (every group a filter can name, the synthetic "(missing)" and
    // "other values" too), listed under the table; the same link again closes the list.
    const groupPanel = h("div", { class: "group-responses", dataset: { field: b.field } });
    let openLink = null;
    const groupHead = (g) => {
      const text = `${groupHeading(g)} (n=${g.n}${g.small_n ? ", small n" : ""})`;
      const query = responseList ? groupQuery(b, g) : null;
      if (!query) return text;
      const link = h("button", { type: "button", class: "group-link", "aria-expanded": "false",
        title: `Every response in ${b.field}: ${groupHeading(g)}` }, text);
      link.addEventListener("click", () => {
        const closing = openLink === link;
        if (openLink) openLink.setAttribute("aria-expanded", "false");
        groupPanel.replaceChildren();
        openLink = closing ? null : link;
        if (closing) return;
        link.setAttribute("aria-expanded", "true");
        groupPanel.append(responseList(query, `Responses in ${b.field}: ${groupHeading(g)}`));
      });
      return link;
    };
    const table = h("table", { class: "heatmap", dataset: { field: b.field } },
      // Schema 1.4: a cell whose expected count is below testing.exact_below (5) is tested by Fisher's exact test (†).
      h("caption", {}, `Themes by ${b.field} (${b.kind}): share of each group; colour is the lift against the rest; * significant (Benjamini–Hochberg q < 0.05)${b.testing ? `; † Fisher's exact test, an expected count below ${b.testing.exact_below}` : ""}${b.groups.some((g) => g.small_n) ? `; small n: fewer than ${b.testing?.min_n ?? 10} responses in the group or its rest, not tested` : ""}`),
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Theme"), b.groups.map((g) => h("th", { scope: "col", dataset: { synthetic: groupSynthetic(g) ?? "" } }, groupHead(g))))),
      h("tbody", {}, doc.themes.map((t) => h("tr", { dataset: { themeId: t.id } }, h("th", { scope: "row" }, t.label),
        b.groups.map((g) => {
          const c = g.themes.find((x) => x.theme_id === t.id);
          if (!c) return h("td", {});
          const lift = c.lift === null ? "—" : `×${Number(c.lift).toFixed(1)}`;
          const exact = c.test === "fisher" && !g.small_n; // a small n group is not tested: no † (review46)
          const td = h("td", { class: c.significant ? "sig" : "", dataset: { group: g.value, lift: c.lift ?? "", significant: String(c.significant), test: c.test || "z" },
            title: `${c.count} of ${g.n} · lift ${lift} · ${g.small_n ? `not tested (small n: fewer than ${b.testing?.min_n ?? 10} in the group or its rest)` : `q ${c.q}`}${exact ? " · Fisher's exact test" : ""}` }, `${pct(shareFrom(c.count, g.n, c.share))} ${lift}${exact ? " †" : ""}${c.significant ? " *" : ""}`);
          td.style.backgroundColor = liftColour(c.lift);
          return td;
        })))));
    parts.push(h("div", { class: "table-scroll" }, table), groupPanel);
  }
  const cmp = doc.comparison;
  if (cmp) {
    parts.push(h("table", { class: "comparison" },
      h("caption", {}, `Change since job ${cmp.job_id.slice(-10)}: ${cmp.n_then} usable responses then, ${cmp.n_now} now (the shares' denominators${cmp.copies === false && doc.run?.counts?.duplicates ? "; distinct answers: the earlier wave did not count copies of an answer" : ""}); * significant; (exact): Fisher's exact test, an expected count below 5`),
      h("thead", {}, h("tr", {}, ["Theme", "Then", "Now", "Change", ""].map((x) => h("th", { scope: "col" }, x)))),
      h("tbody", {}, cmp.themes.map((r) => h("tr", { dataset: { themeId: r.theme_id, status: r.status, significant: String(r.significant) } },
        h("th", { scope: "row" }, labels.get(r.theme_id) || r.label),
        // A new theme has no earlier share to test against (schema 1.2: change and q are null).
        // Discover mode's gone theme (schema 1.3) has a share then but is not tested either.
        h("td", {}, r.status === "new" ? "—" : pct(r.share_then)), h("td", {}, pct(r.share_now)),
        h("td", { class: r.significant ? "sig" : "" }, r.change === null || r.change === undefined ? `${r.status}, not tested`
          // Schema 1.3: "fisher" when an expected count is below 5, too few answers for the z-test.
          : `${r.change >= 0 ? "+" : ""}${(r.change * 100).toFixed(1)} pts${r.significant ? " *" : ""}${r.test === "fisher" ? " (exact)" : ""}`),
        h("td", {}, r.status))))));
    // comparison.groups: each family of near earlier themes tested as one share (the only test of a theme a split
    // took out of the rows above). Stored since research23, shown by no view. Same sentence as the report and the CLI.
    const families = (cmp.groups || []).filter((g) => g && Array.isArray(g.theme_ids));
    if (families.length) {
      const name = (t) => labels.get(t) || cmp.then?.[t]?.label || t;
      parts.push(h("table", { class: "comparison families" },
        h("caption", {}, "Families of near earlier themes, each tested as one share (its themes' answers pooled; Benjamini–Hochberg over the families): a change spread over near themes, or a theme a codebook edit split, is tested here; * significant; (exact): Fisher's exact test"),
        h("thead", {}, h("tr", {}, ["Family", "Then", "Now", "Change"].map((x) => h("th", { scope: "col" }, x)))),
        h("tbody", {}, families.map((g) => h("tr", { dataset: { family: g.family, significant: String(g.significant) } },
          h("th", { scope: "row" }, g.theme_ids.map(name).join(" + ")),
          h("td", {}, pct(g.share_then)), h("td", {}, pct(g.share_now)),
          h("td", { class: g.significant ? "sig" : "" },
            `${g.change >= 0 ? "+" : ""}${(g.change * 100).toFixed(1)} pts${g.significant ? " *" : ""}${g.test === "fisher" ? " (exact)" : ""}`))))));
    }
    if (cmp.warning) parts.push(h("p", { class: "note warning", role: "note" }, `Warning: ${cmp.warning}`));
    const far = farNote(cmp);
    if (far) parts.push(h("p", { class: "note far-note" }, far));
    if (cmp.instrument === "prototypes" && !cmp.warning) {
      parts.push(h("p", { class: "note" }, "The earlier job has no stored instrument (it ran before schema 1.2): its shares are its own clustering's, so part of a change can be how the two waves were coded."));
    }
  }
  if (doc.impact) parts.push(driverChart(doc.impact));
  if (!parts.length) return null;
  return h("section", { "aria-labelledby": "insight-h", id: "insight" }, h("h2", { id: "insight-h" }, "Segments and change"), parts);
}

// The inherit comparison's answers far from every earlier theme (comparison.far, stored since schema 1.2 and shown
// nowhere): a topic emerging below the size of a new theme was invisible. Same sentence as the Markdown report
// (pipelines/thematic/render.py far_note) and `thematiq changes`.
function farNote(cmp) {
  if (!Number.isInteger(cmp.far) || !Number.isInteger(cmp.n_now) || cmp.n_now <= 0) return null;
  const isNew = (cmp.themes || []).filter((r) => r.status === "new").length;
  const fate = isNew ? `those that cluster together form the ${isNew} new theme${isNew > 1 ? "s" : ""}`
    : "too few cluster together to form a new theme";
  return `${cmp.far} of the ${cmp.n_now} answers now (${(100 * cmp.far / cmp.n_now).toFixed(1)}%) are far from every earlier theme (an unchanged wave has 2-5 % at about 2,100 answers a wave, 3-13 % at 200-350); ${fate}, the rest are coded to their nearest earlier theme or to no theme.`;
}

// Issue 23: each theme's impact on the score as a diverging bar (negative: the theme costs points), with its
// 95 % interval as a whisker (Welch's, with permutation critical values since stats46: impact.interval); themes in the result's order (most negative first).
const SCORE_RANGES = ["0-5", "1-5", "1-7", "1-10"];
function driverChart(imp) {
  const nps = imp.scale === "nps";
  // Schema 1.7: a declared rating range ("0-5", "1-5", "1-7", "1-10") is the rating's mean.
  const what = nps ? "NPS" : imp.scale === "csat" ? "mean CSAT"
    : SCORE_RANGES.includes(imp.scale) ? `mean rating (${imp.scale.replace("-", "–")})` : "mean score";
  const num = (x, sign = true) => (x === null || x === undefined ? "—" : `${sign && x > 0 ? "+" : ""}${Number(x).toFixed(nps ? 1 : 2)}`);
  const rows = imp.themes.filter((t) => t.impact !== null && t.impact !== undefined);
  const reach = Math.max(1e-9, ...rows.flatMap((t) => [Math.abs(t.impact), Math.abs(t.ci_low ?? 0), Math.abs(t.ci_high ?? 0)]));
  const x = (v) => `${50 + 50 * (v / reach)}%`;
  const labelOf = new Map(imp.themes.map((t) => [t.theme_id, t.label]));
  const items = imp.themes.map((t) => {
    const has = t.impact !== null && t.impact !== undefined;
    // A small_n theme (fewer than imp.min_n responses) is never starred: its interval is too narrow to trust. Nor is
    // one whose interval excludes 0 only against other themes (explained_by, schema 1.5: one theme per response):
    // the service's impact.starred, which the report and the CLI follow.
    const against = (t.explained_by || []).map((id) => labelOf.get(id) ?? id);
    const sure = has && !t.small_n && !against.length && t.ci_low !== null && t.ci_high !== null && (t.ci_low > 0 || t.ci_high < 0);
    const track = h("span", { class: "driver-track", "aria-hidden": "true" });
    if (has) {
      const bar = h("span", { class: `driver-bar ${t.impact < 0 ? "neg" : "pos"}` });
      bar.style.left = t.impact < 0 ? x(t.impact) : "50%";
      bar.style.width = `${50 * Math.abs(t.impact) / reach}%`;
      track.append(bar);
      if (t.ci_low !== null && t.ci_high !== null) {
        const ci = h("span", { class: "driver-ci" });
        ci.style.left = x(t.ci_low);
        ci.style.width = `${50 * (t.ci_high - t.ci_low) / reach}%`;
        track.append(ci);
      }
    }
    const text = has ? `${num(t.impact)} (95% ${num(t.ci_low)} … ${num(t.ci_high)})` : "—";
    return h("li", { class: `driver${sure ? " sure" : ""}`, dataset: { themeId: t.theme_id, impact: has ? String(t.impact) : "" },
      "aria-label": `${t.label}: impact ${text} points of ${what}; ${t.n} responses${t.small_n ? " (small n)" : ""}, their ${what} ${num(t.score, false)}` },
      h("span", { class: "driver-label" }, t.label), track, h("span", { class: "driver-value" }, `${text}${sure ? " *" : ""}${t.small_n ? " (small n)" : ""}${against.length ? ` (against ${against.join(", ")} only)` : ""}`));
  });
  return h("figure", { class: "drivers", dataset: { key: imp.key } },
    h("figcaption", {}, (imp.note ? `${imp.note} ` : "") + `Impact on ${imp.key}: overall ${what} ${num(imp.overall, false)} over ${imp.n} scored responses. ` +
      `Each bar is the overall ${what} minus the ${what} without the theme (left: the theme costs points); the whisker is its 95% interval (${imp.interval === "permutation" ? "Welch's, critical values from 999 permutations of the scores" : "Welch's t"}); * the interval excludes 0 ` +
      // Not corrected for the number of themes (the breakdowns and waves are, by Benjamini-Hochberg): said here.
      `(per theme, not corrected for the ${imp.themes.length} theme${imp.themes.length === 1 ? "" : "s"}: with no effect at all about 1 theme in 20 would still get a *); ` +
      `(small n): fewer than ${imp.min_n ?? 10} scored responses, never a *.`),
    h("ul", { class: "driver-list" }, items));
}

function codebookEditor(job, doc, edit) {
  const status = h("div", { "aria-live": "polite" });
  const send = async (edits) => {
    try {
      await api(`/jobs/${job.id}/themes`, { method: "PATCH", body: { edits }, headers: { "if-match": edit.etag } });
      announce("Codebook saved.");
      edit.reload();
    } catch (err) {
      status.replaceChildren(errorBox(err, err?.status === 412 ? "Someone edited these themes first: reload to see their version" : "The edit was refused"));
    }
  };
  const rows = doc.themes.map((t) => {
    const input = h("input", { type: "text", value: t.label, "aria-label": `New name for ${t.label}`, maxlength: 120 });
    const pick = h("input", { type: "checkbox", "aria-label": `Select ${t.label} to merge` });
    const li = h("li", { dataset: { themeId: t.id } }, pick, input,
      h("button", { type: "button", class: "rename", onclick: () => {
        const label = input.value.trim();
        if (label && label !== t.label) send([{ op: "rename", theme: t.id, label }]);
      } }, "Rename"));
    li.pick = pick;
    return li;
  });
  const merge = h("button", { type: "button", class: "merge", onclick: () => {
    const ids = rows.filter((li) => li.pick.checked).map((li) => li.dataset.themeId);
    if (ids.length < 2) { status.replaceChildren(h("p", { class: "note" }, "Select two or more themes to merge (into the first).")); return; }
    send([{ op: "merge", themes: ids }]);
  } }, "Merge selected");
  const log = (doc.edits || []).map((e) => h("li", {}, `${e.at || ""} ${e.op} ${e.theme || (e.themes || []).join(" + ")}${e.label ? ` → ${e.label}` : ""}`));
  return h("section", { "aria-labelledby": "codebook-h", id: "codebook" }, h("h2", { id: "codebook-h" }, "Codebook"),
    h("p", { class: "hint" }, "Rename or merge themes; assignments, counts and the tables above follow. The next wave can start from this codebook (compare_to or seed_themes)."),
    h("ul", { class: "codebook" }, rows), h("div", { class: "actions" }, merge), status,
    log.length ? h("details", {}, h("summary", {}, `Edit log (${log.length})`), h("ul", { class: "edit-log" }, log)) : null);
}

// Schema 1.1: how sure the theme count is, and the two levels (broad themes / sub-themes). The other readings
// only without a summary (schema 1.2), which names them: the page said them twice.
// A count the data did not choose (num_themes given, too few responses: criterion fixed or single) has no
// confidence (review46: it read "high (1.00)"); its levels are shown all the same.
function countNote(tc, levels) {
  const unchosen = ["fixed", "single"].includes(tc?.criterion);
  if (!tc?.confidence_label && !(unchosen && levels)) return null;
  const alt = tc.summary ? "" : (tc.alternatives || []).map((k) => `${k}`).join(" and ");
  // A compared job's count is the earlier codebook's (criterion fixed, explanation naming compare_to): review46u
  // found it read "requested (num_themes)" though no num_themes was sent.
  const sure = !tc.confidence_label
    ? (tc.criterion === "fixed" && /compare_to/.test(tc.explanation || "")
      ? "Theme count fixed by the compared job's codebook (compare_to), not chosen by the data"
      : tc.criterion === "fixed" || /num_themes=/.test(tc.explanation || "")  // num_themes=1 is "single" too
      ? "Theme count requested (num_themes), not chosen by the data"
      : "One theme: too few responses to choose a count")
    : tc.criterion === "prior" ? "Structure is weak: the count is a judgement"
    : `Count confidence: ${tc.confidence_label} (${Number(tc.confidence).toFixed(2)})`;
  // Both levels the themes is one level: it read "13 broad themes, 13 themes" (review46u; thematiq_cli levels_line).
  const lv = !levels ? ""
    : levels.broad === "themes" && levels.fine === "themes" ? ` · one level: ${levels.fine_count} themes, no broad themes or sub-themes`
    : ` · ${levels.broad_count} broad themes, ${levels.fine_count} ${levels.fine === "subthemes" ? "sub-themes" : "themes"}`;
  return h("p", { class: "note count-confidence" }, `${sure}${alt ? `; the ${alt}-theme readings fit about as well` : ""}${lv}.`);
}

// Schema 1.2: the count in a researcher's words, both levels named ("16 themes in 8 groups; the data also support 11
// themes. Confidence medium: ..."), and why, as the Markdown report and the CLI give them. The page showed only the
// confidence line, and for a compared job (its count is the earlier codebook's: no confidence) nothing at all.
// After edits that merged, split or deleted themes, what they left, in the summary's words (the summary is the
// analysis's count): pipelines/thematic/render.py count_after_edits has the same sentence.
function countAfterEdits(doc) {
  const n = (doc.edits || []).filter((e) => ["merge", "split", "delete"].includes(e?.op)).length;
  if (!n) return null;
  const k = doc.themes.length, lv = doc.levels || {};
  const broad = Number(lv.broad_count || 0), fine = Number(lv.fine_count || 0);
  let head = `${k} theme${k === 1 ? "" : "s"}`;
  if (lv.broad === "parents" && broad) head += ` in ${broad} group${broad === 1 ? "" : "s"}`;
  else if (lv.fine === "subthemes" && fine > k) head += `, with ${fine} sub-themes under them`;
  return `After ${n} codebook edit${n === 1 ? "" : "s"} (merge, split or delete): ${head}.`;
}

function countSummary(tc, doc) {
  if (!tc?.summary && !tc?.explanation) return null;
  const why = tc.summary ? String(tc.explanation || "").replace(`${tc.summary} Why: `, "") : String(tc.explanation);
  const after = countAfterEdits(doc);
  return h("div", { class: "count-summary" },
    tc.summary ? h("p", { id: "count-summary" }, h("b", {}, "Theme count: "), tc.summary, after ? ` ${after}` : null) : null,
    why && why !== tc.summary ? h("details", { id: "count-why" }, h("summary", {}, "Why this many themes"), h("p", {}, why)) : null);
}

// More than 12 themes: the broad level is parents[] (the summary's "groups"). Listed with their counts and themes,
// as the Markdown report's "Broad themes" table; the page named a theme's broad theme only inside its detail.
function broadLevel(doc, usable) {
  const parents = doc.levels?.broad === "parents" ? doc.parents || [] : [];
  if (!parents.length) return null;
  const labels = new Map(doc.themes.map((t) => [t.id, t.label]));
  // multi_label: a response counts in the broad theme of each of its themes (codebook.level_ids), as theme=p1 lists it.
  const multi = doc.assignments.filter((a) => (a.themes || []).length > 1).length;
  return h("div", { class: "table-scroll" }, h("table", { class: "broad-themes" },
    h("caption", {}, `Broad themes (${parents.length}): each groups the themes listed; its count is the responses with any of its themes${multi ? ` (${multi} responses have more than one theme, so a response can count in two broad themes and the shares add up to more than 100%)` : ""}`),
    h("thead", {}, h("tr", {}, ["Broad theme", "Responses", "Share", "Themes"].map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, parents.map((p) => h("tr", { dataset: { parentId: p.id } },
      h("th", { scope: "row" }, p.label), h("td", {}, String(p.count)),
      h("td", {}, typeof p.share === "number" ? pct(shareFrom(p.count, usable, p.share)) : ""),
      h("td", {}, (p.children || []).map((c) => labels.get(c) || c).join(", ")))))));
}

function levelDetail(doc, t, usable) {
  const subs = (doc.subthemes || []).filter((s) => s.parent === t.id);
  if (subs.length) {
    // Rounded once from the count, as the themes' bars (1 of 8 is 12.5 %: "12.5%", where the stored 0.125 gave 12.5
    // and 5 of 401, stored 0.0125, gave "1.3%" against the report's 1.2 %).
    return [h("h3", {}, "Sub-themes"), h("ul", { class: "subthemes" }, subs.map((s) => h("li", { dataset: { subthemeId: s.id } },
      `${s.label} — ${s.count} (${pct(shareFrom(s.count, usable, s.share))})`)))];
  }
  const p = t.parent && (doc.parents || []).find((x) => x.id === t.parent);
  return p ? [h("p", { class: "muted" }, `Broad theme: ${p.label}`)] : [];
}

// ---------------------------------------------------------------- #/new
export function parseCsv(text, delimiter = ",") {
  // RFC 4180: quoted fields, "" escapes, newlines inside quotes, CRLF or LF. Returns [{ line, cells }].
  // A quote opens a quoted cell only at the cell's start (elsewhere it is a character: 5" long), and one still
  // open at the end is refused: it would make the rest of the file one cell. Python's csv reads the same way.
  const rows = [];
  let row = [], field = "", quoted = false, line = 1, start = 1, opened = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"') { if (text[i + 1] === '"') { field += '"'; i++; } else quoted = false; }
      else { if (c === "\n" || (c === "\r" && text[i + 1] !== "\n")) line++; field += c; }
    } else if (c === '"' && field === "") { quoted = true; opened = line; }
    else if (c === delimiter) { row.push(field); field = ""; }
    else if (c === "\n" || c === "\r") {
      if (c === "\r" && text[i + 1] === "\n") i++;
      row.push(field); rows.push({ line: start, cells: row }); row = []; field = ""; line++; start = line;
    } else field += c;
  }
  if (quoted) throw new Error(`line ${opened}: a quoted cell opens here and is never closed; close it with " (a quote inside a quoted cell is written "")`);
  if (field !== "" || row.length) { row.push(field); rows.push({ line: start, cells: row }); }
  return rows;
}

export function decodeText(bytes) {
  // A BOM wins (UTF-8, UTF-16 as Excel's "Unicode text" writes it), then UTF-8, then Windows-1252.
  const b = new Uint8Array(bytes);
  let text;
  if (b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf) text = new TextDecoder("utf-8").decode(b.subarray(3));
  else if (b[0] === 0xff && b[1] === 0xfe) text = new TextDecoder("utf-16le").decode(b.subarray(2));
  else if (b[0] === 0xfe && b[1] === 0xff) text = new TextDecoder("utf-16be").decode(b.subarray(2));
  else {
    try { text = new TextDecoder("utf-8", { fatal: true }).decode(b); }
    catch { text = new TextDecoder("windows-1252").decode(b); }
  }
  if (text.includes("\0")) throw new Error("this is not a text file (UTF-8, UTF-16 or Windows-1252); export it as CSV or .xlsx");
  return text;
}

// ---- .xlsx without a library: ZIP (DecompressionStream) + the sheet XML (DOMParser)
// The most a workbook's parts may inflate to, all together (the CLI's MAX_XLSX_INFLATED_BYTES): a zip bomb is
// refused from its directory before anything is inflated, and one whose directory lies stops at the lie.
const XLSX_MAX_INFLATED = 128 * 1024 * 1024;

async function unzip(buffer) {
  const v = new DataView(buffer), u8 = new Uint8Array(buffer), dec = new TextDecoder();
  let eocd = -1;
  for (let i = buffer.byteLength - 22; i >= Math.max(0, buffer.byteLength - 65557); i--) {
    if (v.getUint32(i, true) === 0x06054b50) { eocd = i; break; }
  }
  if (eocd < 0) throw new Error("this is not an .xlsx workbook (no ZIP directory); save it as Excel Workbook (.xlsx) or CSV");
  const files = new Map();
  let p = v.getUint32(eocd + 16, true), declared = 0;
  for (let n = v.getUint16(eocd + 10, true); n > 0; n--) {
    if (v.getUint32(p, true) !== 0x02014b50) throw new Error("the workbook's ZIP directory is damaged");
    const method = v.getUint16(p + 10, true), size = v.getUint32(p + 20, true), inflated = v.getUint32(p + 24, true);
    const nameLen = v.getUint16(p + 28, true), extraLen = v.getUint16(p + 30, true), commentLen = v.getUint16(p + 32, true);
    const local = v.getUint32(p + 42, true);
    files.set(dec.decode(u8.subarray(p + 46, p + 46 + nameLen)), { method, size, inflated, local });
    declared += inflated;
    p += 46 + nameLen + extraLen + commentLen;
  }
  if (declared > XLSX_MAX_INFLATED) {
    throw new Error(`this workbook inflates to ${Math.round(declared / 2 ** 20)} MiB, more than the ${XLSX_MAX_INFLATED / 2 ** 20} MiB ` +
      "a workbook may; export the responses as CSV or split the file");
  }
  let budget = XLSX_MAX_INFLATED;  // what the parts read so far left: the cap holds whatever a directory entry says
  return async (name) => {
    const f = files.get(name);
    if (!f) return null;
    const start = f.local + 30 + v.getUint16(f.local + 26, true) + v.getUint16(f.local + 28, true);
    const raw = u8.subarray(start, start + f.size);
    if (f.method === 0) return dec.decode(raw);
    if (f.method !== 8) throw new Error(`unsupported ZIP compression in ${name}`);
    const reader = new Blob([raw]).stream().pipeThrough(new DecompressionStream("deflate-raw")).getReader();
    const chunks = [];
    let got = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      got += value.length;
      if (got > f.inflated || got > budget) {
        await reader.cancel();
        throw new Error(`${name} inflates to more than the workbook's ZIP directory says; the file is damaged or not a spreadsheet`);
      }
      chunks.push(value);
    }
    budget -= got;
    return dec.decode(await new Blob(chunks).arrayBuffer());
  };
}

const xml = (text) => new DOMParser().parseFromString(text, "application/xml");
const colIndex = (ref) => [...ref.replace(/[0-9]/g, "")].reduce((n, ch) => n * 26 + ch.charCodeAt(0) - 64, 0) - 1;
export const colLetter = (i) => { let s = ""; for (i += 1; i; i = Math.floor((i - 1) / 26)) s = String.fromCharCode(65 + ((i - 1) % 26)) + s; return s; };

export async function readXlsx(buffer, sheetName) {
  // -> { sheets: [names], sheet, rows: [{ line, cells }] } (line = the spreadsheet's row number)
  const read = await unzip(buffer);
  const wbXml = await read("xl/workbook.xml");
  if (!wbXml) throw new Error("this ZIP file is not an .xlsx workbook");
  const rels = xml((await read("xl/_rels/workbook.xml.rels")) || "<Relationships/>");
  const targets = new Map([...rels.getElementsByTagName("Relationship")].map((r) => [r.getAttribute("Id"), r.getAttribute("Target")]));
  const sheets = [...xml(wbXml).getElementsByTagName("sheet")].map((s) => ({
    name: s.getAttribute("name"),
    target: targets.get(s.getAttribute("r:id") || s.getAttributeNS("http://schemas.openxmlformats.org/officeDocument/2006/relationships", "id")),
  }));
  const sheet = sheetName ? sheets.find((s) => s.name === sheetName) : sheets[0];
  if (!sheet) throw new Error(`no worksheet "${sheetName}"; the sheets are: ${sheets.map((s) => s.name).join(", ")}`);
  const shared = [...xml((await read("xl/sharedStrings.xml")) || "<sst/>").getElementsByTagName("si")]
    .map((si) => [...si.getElementsByTagName("t")].map((t) => t.textContent).join(""));
  const path = sheet.target.startsWith("/") ? sheet.target.slice(1) : `xl/${sheet.target.replace(/^\.\//, "")}`;
  const doc = xml(await read(path) || "");
  const rows = [...doc.getElementsByTagName("row")].map((r) => {
    const cells = [];
    for (const c of r.getElementsByTagName("c")) {
      const t = c.getAttribute("t"), vEl = c.getElementsByTagName("v")[0];
      let value = null;
      if (t === "s") value = shared[Number(vEl?.textContent)] ?? "";
      else if (t === "inlineStr") value = [...c.getElementsByTagName("t")].map((x) => x.textContent).join("");
      else if (t === "b") value = vEl?.textContent === "1" ? "true" : "false";
      else if (vEl) value = vEl.textContent;
      cells[c.getAttribute("r") ? colIndex(c.getAttribute("r")) : cells.length] = value;
    }
    return { line: Number(r.getAttribute("r")), cells: Array.from(cells, (x) => x ?? null) };
  });
  return { sheets: sheets.map((s) => s.name), sheet: sheet.name, rows };
}

// A header cell as the metadata key it becomes (the CLI's header_name): a wrapped survey question's line breaks and
// tabs fold into one space, since the service refuses a key with a line break (a 422 on input[i].metadata).
const HEADER_BREAKS = /\s*[\t\n\v\f\r\x1c-\x1f\x85\u2028\u2029]+\s*/g;
export const headerName = (c) => String(c ?? "").replace(HEADER_BREAKS, " ").trim();
// A cell that is a plain decimal number, sent as a JSON number (the CLI's rule, thematiq_cli/inputs.py _NUMBER):
// a leading zero ("007", "01234": a code, a postcode) or an integer part of more than 15 digits (an account
// number, which a JS number rounds) is text, as are "1e3", "7,5" and "1,000".
const NUMBER = /^\s*-?(0|[1-9][0-9]{0,14})(\.[0-9]+)?\s*$/;
export const isNumberCell = (v) => (typeof v === "number" && Number.isFinite(v)) || (typeof v === "string" && NUMBER.test(v));

const filled = (cells) => cells.filter((c) => c !== null && c !== undefined && String(c).trim() !== "").length;

export function tableRecords(rows, where = "row") {
  // The header row (title rows above it and blank rows skipped); -> { columns, records, lines, headerLine }
  const candidates = rows.slice(0, 50).filter((r) => filled(r.cells)).slice(0, 20);
  if (!candidates.length) throw new Error("the file is empty");
  const header = candidates.find((r) => r.cells.some((c) => /^(text|response|answer|comment|feedback)s?$/i.test(String(c ?? "").trim())))
    || candidates.find((r) => filled(r.cells) === Math.max(...candidates.map((x) => filled(x.cells))));
  const columns = header.cells.map((c, i) => headerName(c) || `column ${colLetter(i)}`);
  // Records are keyed by name: a name twice would let one column replace the other (the CLI refuses it too).
  columns.forEach((c, i) => {
    const j = columns.indexOf(c);
    const col = (k) => (where === "row" ? colLetter(k) : String(k + 1));
    if (j !== i) throw new Error(`${where} ${header.line}: the header has "${c}" twice (columns ${col(j)} and ${col(i)}); rename one`);
  });
  const body = rows.slice(rows.indexOf(header) + 1).filter((r) => r.cells.length && r.cells.some((c) => c !== null && c !== undefined));
  return {
    columns, headerLine: header.line, lines: body.map((r) => r.line),
    records: body.map((r) => Object.fromEntries(columns.map((c, i) => [c, r.cells[i] ?? ""]))),
  };
}

async function parseFile(name, buffer, sheet) {
  // -> { columns: [...], records: [{col: value}], lines, headerLine, sheets?, sheet? }
  if (/\.(xlsx|xlsm)$/i.test(name)) {
    const book = await readXlsx(buffer, sheet);
    return { ...tableRecords(book.rows, "row"), sheets: book.sheets, sheet: book.sheet, where: "row" };
  }
  const text = decodeText(buffer);
  if (/\.(jsonl|ndjson)$/i.test(name)) {
    const records = [];
    text.split(/\r?\n/).forEach((line, i) => {
      if (!line.trim()) return;
      let v;
      try { v = JSON.parse(line); } catch { throw new Error(`line ${i + 1} is not valid JSON`); }
      if (typeof v !== "object" || v === null || Array.isArray(v)) throw new Error(`line ${i + 1} is not a JSON object`);
      records.push(v);
    });
    const columns = [...new Set(records.flatMap((r) => Object.keys(r)))];
    return { columns, records, lines: records.map((_, i) => i + 1), headerLine: 0, where: "line" };
  }
  const first = text.split(/\r?\n/, 1)[0];
  const delimiter = [",", ";", "\t"].reduce((best, d) => (first.split(d).length > first.split(best).length ? d : best), ",");
  const rows = parseCsv(text, delimiter).map((r) => ({ line: r.line, cells: r.cells.every((c) => c.trim() === "") ? [] : r.cells }));
  return { ...tableRecords(rows, "line"), where: "line" };
}

function newView() {
  document.title = "New analysis · Thematiq";
  document.querySelector('[data-nav="new"]').setAttribute("aria-current", "page");
  let file = null;   // { name, columns, records }
  const textarea = h("textarea", { id: "responses-text", name: "responses", "aria-describedby": "responses-hint" });
  const fileInput = h("input", { id: "responses-file", type: "file",
    accept: ".csv,.tsv,.txt,.xlsx,.jsonl,.ndjson,text/csv,application/x-ndjson,application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" });
  const sheetSel = h("select", { id: "sheet" });
  const sheetField = h("div", { class: "field", hidden: true }, h("label", { for: "sheet" }, "Worksheet"), sheetSel);
  const textCol = h("select", { id: "text-column" });
  const idCol = h("select", { id: "id-column" });
  const columns = h("div", { class: "row", hidden: true }, sheetField,
    h("div", { class: "field" }, h("label", { for: "text-column" }, "Text column"), textCol),
    h("div", { class: "field" }, h("label", { for: "id-column" }, "ID column"), idCol));
  const fileInfo = h("p", { class: "hint", id: "file-info", "aria-live": "polite" });
  const clearFile = h("button", { type: "button", hidden: true }, "Remove file");
  const maxThemes = h("input", { id: "max-themes", type: "number", min: 1, max: 200, placeholder: "auto" });
  const minSize = h("input", { id: "min-theme-size", type: "number", min: 1, max: 10000, value: 5, required: true });
  const llm = h("select", { id: "llm" }, h("option", { value: "auto", selected: true }, "auto — use the LLM if one is configured"),
    h("option", { value: "off" }, "off — keyword labels only"));
  // Issue 23: what the insight views need. Metadata columns (a file only), breakdowns, a score, the sentiment
  // source and an earlier wave; every column named by one of them is sent as metadata.
  const metaBox = h("fieldset", { class: "checks", id: "metadata-columns" }, h("legend", {}, "Metadata columns (sent with each response)"));
  const breakdownBox = h("fieldset", { class: "checks", id: "breakdown-by" }, h("legend", {}, "Break themes down by (at most 5)"));
  const scoreCol = h("select", { id: "score-column" });
  // params.score.scale: NPS groups, CSAT, a rating on a declared range (its mean; a value outside it is a 422
  // naming params.score.scale, schema 1.7), or any number.
  const scoreScale = h("select", { id: "score-scale" }, h("option", { value: "nps" }, "NPS (0–10)"),
    h("option", { value: "csat" }, "CSAT (1–5)"),
    h("option", { value: "0-5" }, "rating 0–5 (the mean)"), h("option", { value: "1-5" }, "rating 1–5, e.g. stars (the mean)"),
    h("option", { value: "1-7" }, "rating 1–7 (the mean)"), h("option", { value: "1-10" }, "rating 1–10 (the mean)"),
    h("option", { value: "numeric" }, "numeric (the mean)"));
  const sentimentSrc = h("select", { id: "sentiment-source" });
  // The rating column's scale (params.sentiment_from.scale): guessed by the server from the values unless
  // declared; a 0-10 survey answered only 1-5 is otherwise read as 1-5 stars.
  const sentimentScale = h("select", { id: "sentiment-scale", disabled: true },
    h("option", { value: "" }, "guess from the values"), h("option", { value: "0-5" }, "0–5"), h("option", { value: "1-5" }, "1–5"),
    h("option", { value: "1-7" }, "1–7"), h("option", { value: "1-10" }, "1–10"),
    h("option", { value: "0-10" }, "0–10 (NPS groups)"));
  const compareTo = h("select", { id: "compare-to" }, h("option", { value: "" }, "(none)"));
  const compareMore = h("button", { type: "button", id: "compare-to-more", hidden: true }, "More earlier jobs");
  const compareMode = h("select", { id: "compare-mode" },
    h("option", { value: "inherit", selected: true }, "code this wave with the earlier job's themes"),
    h("option", { value: "discover" }, "discover themes afresh, then map them"));
  const metaFields = h("div", { hidden: true, id: "metadata-fields" }, metaBox, breakdownBox,
    h("div", { class: "row" },
      h("div", { class: "field" }, h("label", { for: "score-column" }, "Score column (impact on the score)"), scoreCol),
      h("div", { class: "field" }, h("label", { for: "score-scale" }, "Score scale"), scoreScale)));
  const submit = h("button", { type: "submit", class: "primary", id: "submit-job" }, "Start analysis");
  const errSlot = h("div", { "aria-live": "assertive" });
  const count = h("p", { class: "hint", id: "count", "aria-live": "polite" });
  const form = h("form", { novalidate: true },
    h("fieldset", {}, h("legend", {}, "Responses"),
      h("div", { class: "field" }, h("label", { for: "responses-text" }, "Paste responses, one per line"), textarea,
        h("p", { class: "hint", id: "responses-hint" }, "Each non-empty line is one response; its line number is its id.")),
      h("div", { class: "field" }, h("label", { for: "responses-file" }, "…or upload a spreadsheet (.xlsx), CSV or JSONL file"),
        h("div", { class: "row" }, fileInput, clearFile), fileInfo),
      columns, count),
    h("fieldset", {}, h("legend", {}, "Parameters"),
      h("div", { class: "row" },
        h("div", { class: "field" }, h("label", { for: "max-themes" }, "Maximum themes"), maxThemes),
        h("div", { class: "field" }, h("label", { for: "min-theme-size" }, "Minimum theme size"), minSize),
        h("div", { class: "field" }, h("label", { for: "llm" }, "LLM"), llm)),
      h("div", { class: "row" },
        h("div", { class: "field" }, h("label", { for: "sentiment-source" }, "Sentiment from"), sentimentSrc),
        h("div", { class: "field" }, h("label", { for: "sentiment-scale" }, "Rating scale"), sentimentScale),
        h("div", { class: "field" }, h("label", { for: "compare-to" }, "Compare with an earlier job"), compareTo, compareMore),
        h("div", { class: "field" }, h("label", { for: "compare-mode" }, "How to compare"), compareMode))),
    h("fieldset", {}, h("legend", {}, "Segments and score"), h("p", { class: "hint", id: "metadata-hint" },
      "With a file: choose the columns to send as metadata, the ones to break the themes down by, and a score to measure each theme's impact on."),
      metaFields),
    errSlot, h("div", { class: "actions" }, submit));
  main.append(h("h1", {}, "New analysis"), h("p", { class: "muted" }, "Thematic analysis of free-text responses."), form);

  function responses(strict = false) {
    if (file) {
      const t = textCol.value, idc = idCol.value;
      const seen = new Map();
      // Decided once per column, not per cell: per cell it read the whole column again for every row (n² regex
      // tests: a 20,000-row file with three metadata columns froze the tab on every change of the form).
      const metas = metaColumns();
      const numeric = new Set(metas.filter(numericColumn));
      const where = (i, c) => `${file.where} ${file.lines[i]}, column ${file.where === "row" ? `${colLetter(file.columns.indexOf(c))} ` : ""}"${c}"`;
      return file.records.map((r, i) => {
        // Without an id column the id is the row number under the header, so it points back into the file.
        let id = idc ? r[idc] : file.lines[i] - file.headerLine;
        if (idc && strict) {
          if (id === undefined || id === null || String(id).trim() === "") throw new Error(`${where(i, idc)}: the id is empty`);
          if (seen.has(String(id))) throw new Error(`${where(i, idc)}: id "${id}" was already used in ${file.where} ${seen.get(String(id))}`);
          seen.set(String(id), file.lines[i]);
        }
        if (typeof id !== "number" && typeof id !== "string") id = String(id);
        const item = { id, text: r[t] === undefined || r[t] === null ? "" : String(r[t]) };
        const meta = {};
        for (const c of metas) {
          const v = r[c];
          if (v === undefined || v === null || String(v).trim() === "") continue;   // missing, not ""
          meta[c] = numeric.has(c) ? Number(v) : v;
        }
        if (Object.keys(meta).length) item.metadata = meta;
        return item;
      });
    }
    const out = [];
    textarea.value.split(/\r?\n/).forEach((line, i) => { if (line.trim()) out.push({ id: i + 1, text: line.trim() }); });
    return out;
  }
  // Columns other than the text and id columns can be metadata; a column whose every filled cell reads as a
  // number is sent as numbers (a CSV's "7"), so breakdowns bucket it and a score can be measured.
  const candidates = () => (file ? file.columns.filter((c) => c !== textCol.value && c !== idCol.value) : []);
  const checked = (box) => [...box.querySelectorAll("input:checked")].map((x) => x.value);
  const numericColumn = (c) => {
    const filledCells = file.records.map((r) => r[c]).filter((v) => v !== undefined && v !== null && String(v).trim() !== "");
    return filledCells.length > 0 && filledCells.every(isNumberCell);
  };
  const sentimentFrom = () => (sentimentSrc.value.startsWith("from:") ? sentimentSrc.value.slice(5) : "");
  function metaColumns() {
    const named = [...checked(metaBox), ...checked(breakdownBox), scoreCol.value, sentimentFrom()].filter(Boolean);
    return [...new Set(named)].filter((c) => candidates().includes(c));
  }
  function guessScale(c) {
    if (!c || !numericColumn(c)) return;
    const xs = file.records.map((r) => r[c]).filter((v) => v !== undefined && v !== null && String(v).trim() !== "").map(Number);
    const ints = xs.every((x) => Number.isInteger(x));
    // Integers 0-5 with a 0 are a 0-5 rating (as NPS every answer would be a detractor); the guess is shown, and
    // the researcher can change it.
    scoreScale.value = ints && Math.min(...xs) >= 0 && Math.max(...xs) <= 10 && Math.max(...xs) > 5 ? "nps"
      : Math.min(...xs) >= 1 && Math.max(...xs) <= 5 ? "csat"
      : ints && Math.min(...xs) === 0 && Math.max(...xs) <= 5 ? "0-5" : "numeric";
  }
  function insightFields() {
    const cols = candidates();
    const keep = (box) => new Set(checked(box));
    const was = { meta: keep(metaBox), by: keep(breakdownBox), score: scoreCol.value, sent: sentimentSrc.value };
    const boxes = (box, name, on) => cols.map((c) => h("label", {}, h("input", { type: "checkbox", name, value: c, checked: on.has(c) }), c));
    metaBox.replaceChildren(metaBox.firstChild, ...boxes(metaBox, "metadata", was.meta));
    breakdownBox.replaceChildren(breakdownBox.firstChild, ...boxes(breakdownBox, "breakdown", was.by));
    scoreCol.replaceChildren(h("option", { value: "" }, "(none)"), ...cols.map((c) => h("option", { value: c, selected: c === was.score }, c)));
    // "" sends no params.sentiment: the server's default, the classifier over the job's MiniLM vectors (the
    // lexicon, with a note, when another encoder embedded the job).
    sentimentSrc.replaceChildren(h("option", { value: "" }, "the text (the sentiment model, default)"),
      h("option", { value: "lexicon" }, "the text (VADER lexicon)"), h("option", { value: "llm" }, "the text (the LLM)"),
      h("option", { value: "off" }, "off"),
      ...cols.map((c) => h("option", { value: `from:${c}`, selected: `from:${c}` === was.sent }, `rating column: ${c}`)));
    if (!was.sent.startsWith("from:")) sentimentSrc.value = was.sent;
    sentimentScale.disabled = !sentimentFrom();
    metaFields.hidden = !cols.length;
    limitBreakdowns();
  }
  function limitBreakdowns() {
    const full = checked(breakdownBox).length >= 5;
    for (const x of breakdownBox.querySelectorAll("input")) x.disabled = full && !x.checked;
  }
  breakdownBox.addEventListener("change", limitBreakdowns);
  scoreCol.addEventListener("change", () => guessScale(scoreCol.value));
  sentimentSrc.addEventListener("change", () => { sentimentScale.disabled = !sentimentFrom(); });
  textCol.addEventListener("change", insightFields);
  idCol.addEventListener("change", insightFields);
  insightFields();
  // The tenant's earlier succeeded thematic jobs, newest first (GET /api/jobs is the caller's tenant only), asked
  // for by pipeline: the 50 newest of every pipeline, then kept if thematic, could hold none. Older ones a page
  // at a time ("More earlier jobs").
  let compareCursor = null;
  const moreCompare = async () => {
    const q = new URLSearchParams({ status: "succeeded", pipeline: "thematic", limit: "50" });
    if (compareCursor) q.set("cursor", compareCursor);
    try {
      const { data } = await api(`/jobs?${q}`);
      for (const j of data.items) {
        compareTo.append(h("option", { value: j.id }, `${fmtTime(j.created_at)} · ${shortId(j.id)}`));
      }
      compareCursor = data.next_cursor;
      compareMore.hidden = !compareCursor;
      compareTo.title = "";
    } catch (err) { if (err?.name !== "AbortError") compareTo.title = "Could not list the earlier jobs"; }
  };
  compareMore.addEventListener("click", moreCompare);
  moreCompare();
  const recount = () => { const n = responses().length; count.textContent = n ? `${n} response${n === 1 ? "" : "s"} ready.` : ""; };
  textarea.addEventListener("input", recount);
  textCol.addEventListener("change", recount);
  idCol.addEventListener("change", recount);
  clearFile.addEventListener("click", () => {
    file = null; fileInput.value = ""; columns.hidden = true; clearFile.hidden = true; textarea.disabled = false;
    fileInfo.textContent = ""; insightFields(); recount(); fileInput.focus();
  });
  async function load(sheet) {
    errSlot.replaceChildren();
    const f = fileInput.files[0];
    if (!f) return;
    try {
      const parsed = await parseFile(f.name, await f.arrayBuffer(), sheet);
      file = { name: f.name, ...parsed };
    } catch (err) {
      file = null; errSlot.replaceChildren(errorBox(err, `Could not read ${f.name}`)); return;
    }
    sheetField.hidden = !(file.sheets && file.sheets.length > 1);
    if (file.sheets) sheetSel.replaceChildren(...file.sheets.map((n) => h("option", { value: n, selected: n === file.sheet }, n)));
    // A column named like text/response/…; else the one with the longest answers (a survey's question as header).
    const avg = (c) => file.records.reduce((n, r) => n + String(r[c] ?? "").length, 0) / Math.max(1, file.records.length);
    const guess = file.columns.find((c) => /^(text|response|answer|comment|feedback)s?$/i.test(c))
      || file.columns.reduce((best, c) => (avg(c) > avg(best) ? c : best), file.columns[0]);
    const idGuess = file.columns.find((c) => /^(id|response_id)$/i.test(c)) || "";
    textCol.replaceChildren(...file.columns.map((c) => h("option", { value: c, selected: c === guess }, c)));
    idCol.replaceChildren(h("option", { value: "" }, "(row number)"),
      ...file.columns.map((c) => h("option", { value: c, selected: c === idGuess }, c)));
    columns.hidden = false; clearFile.hidden = false; textarea.disabled = true;
    insightFields();
    fileInfo.textContent = `${f.name}${file.sheet ? ` (${file.sheet})` : ""}: ${file.records.length} rows, ${file.columns.length} columns. The pasted text is ignored while a file is chosen.`;
    recount();
  }
  fileInput.addEventListener("change", () => load());
  sheetSel.addEventListener("change", () => load(sheetSel.value));

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    errSlot.replaceChildren();
    let input;
    try { input = responses(true); } catch (err) {
      errSlot.replaceChildren(errorBox(err, `Could not read ${file ? file.name : "the responses"}`));
      idCol.focus();
      return;
    }
    if (!input.length) {
      errSlot.replaceChildren(errorBox(new Error("Paste at least one response or choose a file."), "Nothing to analyse"));
      (file ? textCol : textarea).focus();
      return;
    }
    const params = { min_theme_size: Number(minSize.value), llm: llm.value };
    if (maxThemes.value) params.max_themes = Number(maxThemes.value); // empty: the cap adapts to the data
    const by = checked(breakdownBox).filter((c) => candidates().includes(c));
    if (file && by.length) params.breakdown_by = by;
    if (file && scoreCol.value) params.score = { key: scoreCol.value, scale: scoreScale.value };
    if (sentimentFrom()) {
      params.sentiment_from = sentimentScale.value ? { key: sentimentFrom(), scale: sentimentScale.value } : sentimentFrom();
    }
    else if (sentimentSrc.value) params.sentiment = sentimentSrc.value;
    if (compareTo.value) { params.compare_to = compareTo.value; params.compare_mode = compareMode.value; }
    submit.disabled = true;
    submit.textContent = "Starting…";
    try {
      // A fresh Idempotency-Key per click: a retried request never starts the job twice.
      const { data } = await api("/jobs", { method: "POST", body: { pipeline: "thematic", params, input },
        headers: { "Idempotency-Key": crypto.randomUUID() } });
      storeInput(data.id, input);
      announce("Analysis started.");
      location.hash = `#/jobs/${data.id}`;
    } catch (err) {
      errSlot.replaceChildren(errorBox(err, "The analysis could not start"));
      submit.disabled = false;
      submit.textContent = "Start analysis";
      errSlot.querySelector("[role=alert]")?.focus?.();
    }
  });
  return { dispose() {} };
}

// ---------------------------------------------------------------- start
takeKeyFromUrl();
document.getElementById("forget-key").addEventListener("click", () => {
  sessionStorage.removeItem(KEY);
  announce("Key forgotten. The next request asks for it.");
});
window.addEventListener("hashchange", () => route(true));
route(false);
