// polpo's live web view: plain JavaScript, no build step. Reads the JSON API, follows /api/events/stream
// (EventSource reconnects by itself and resumes with Last-Event-ID) and re-reads what an event changed.
// Every value from the daemon is put in the page as text (never as HTML).
"use strict";

const $view = document.getElementById("view");
const $events = document.getElementById("events");
const $crumbs = document.getElementById("crumbs");
const $conn = document.getElementById("connection");
const $attention = document.getElementById("attention");
const $count = document.getElementById("attention-count");
const MAX_EVENTS = 300;
const STREAM_RETRY_MS = 5000;  // the stream's Retry-After when the daemon refuses it
const GRAPH_MAX_TASKS = 400;
const TABLE_MAX_ROWS = 2000;

let route = { page: "missions", params: new URLSearchParams() };
let refreshTimer = null;
let waiting = [];  // what waits for a person (GET /api/attention), shown on every page

// ---------------------------------------------------------------------------------------------- helpers
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}
const svgNS = "http://www.w3.org/2000/svg";
function svg(tag, attrs, ...children) {
  const node = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}
// a state as people read it ("on hold: budget") or a status; the class keeps the colour of its kind
const badge = (status, state) => el("span", { class: `badge s-${status} s-${(state || status).replace(/[^a-z]+/g, "-")}`,
  "data-status": status, "data-state": state || status }, state || status);
// what people read for a running mission or a waiting task: the state of its first waiting item
const missionState = (m) => (m.status === "running" ? (waiting.find((i) => i.missionId === m.id) || {}).state : undefined);
const taskState = (t) => t.state || (waiting.find((i) => i.taskId === t.id) || {}).state;
const fmtScore = (x) => (typeof x === "number" ? x.toFixed(2) : "–");
const link = (href, text) => el("a", { href }, text);
const enc = encodeURIComponent;

function elapsed(start, end) {
  if (!start) return "–";
  const s = Math.max(0, Math.round(((end ? Date.parse(end) : Date.now()) - Date.parse(start)) / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  return `${Math.floor(m / 60)}h ${m % 60}m`;
}

// Every request names the page's origin: opened as http://user:TOKEN@host/, the page's own URL carries the
// credentials and fetch refuses a URL built from it; the browser still sends the password it was given.
const at = (path) => location.origin + path;

async function api(path) {
  const r = await fetch(at(path), { headers: { accept: "application/json" }, credentials: "same-origin" });
  if (r.status === 404) return null;
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status} ${(await r.json().catch(() => ({}))).detail || ""}`);
  return r.json();
}

// Commands (cancel, retry, approve): a same-origin POST with a JSON body, as the API asks of every POST (a page
// of another origin cannot send one). The daemon's answer stays shown across the re-renders events cause.
let lastAnswer = null;  // { key, state: "done" | "refused", text, label and id of the button that sent it }
const drafts = new Map();  // a note or reason being typed, by page and field

async function command(path, key, payload = {}, label = "", button = null) {
  let state = "refused", text;
  try {
    const r = await fetch(at(path), { method: "POST", credentials: "same-origin", body: JSON.stringify(payload),
      headers: { "content-type": "application/json", accept: "application/json" } });
    const body = await r.json().catch(() => ({}));
    state = r.ok ? "done" : "refused";
    text = body.detail || body.message || `HTTP ${r.status}`;
  } catch (e) {
    text = e.message;
  }
  lastAnswer = { key, state, text, label, button };
  await render();
}

// An answer stays beside the button that got it; once that button is gone (the task or mission moved on), it is
// shown apart, as what happened then, never beside buttons it was not an answer to.
function actions(key, buttons) {
  const past = lastAnswer && lastAnswer.key === key && !buttons.some((b) => b.id === lastAnswer.button);
  const answer = lastAnswer && lastAnswer.key === key
    ? el("span", { class: `answer${past ? " past" : ""}`, id: "answer", "data-state": lastAnswer.state },
      `${past && lastAnswer.label ? `${lastAnswer.label} → ` : ""}${lastAnswer.state}: ${lastAnswer.text}`)
    : null;
  if (!buttons.length && !answer) return null;
  // a button may take what a person says (a note, a reason) from a text field of its own: sent as b.field
  const bar = el("div", { class: "actions" }, buttons.map((b) => {
    const fieldId = `${key}/${b.id}-${b.field}`;  // what was typed survives the re-renders events cause
    const input = b.field ? el("input", { type: b.field === "usd" ? "number" : "text", step: b.field === "usd" ? "any" : null,
      min: b.field === "usd" ? "0" : null, id: `${b.id}-${b.field}`, placeholder: b.placeholder || b.field,
      value: drafts.get(fieldId) || null, oninput: (ev) => drafts.set(fieldId, ev.target.value) }) : null;
    const button = el("button", { type: "button", id: b.id, onclick: (ev) => {
      if (b.confirm && !window.confirm(b.confirm)) return;
      if (b.required && input && !input.value.trim()) { input.focus(); input.setCustomValidity("required"); input.reportValidity(); return; }
      ev.target.disabled = true;
      drafts.delete(fieldId);
      const value = input && input.value ? (b.field === "usd" ? Number(input.value) : input.value) : null;
      command(b.path, key, { ...(b.body || {}), ...(value !== null ? { [b.field]: value } : {}) }, b.label, b.id);
    } }, b.label);
    return input ? el("span", { class: "said" }, input, button) : button;
  }), past ? null : answer);
  return past ? el("div", {}, el("p", {}, answer), buttons.length ? bar : null) : bar;
}

// --------------------------------------------------------------------------------------------- routing
function parseRoute() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, query] = [raw.split("?")[0], raw.split("?").slice(1).join("?")];
  const h = decodeURIComponent(path);
  if (h.startsWith("mission/")) return { page: "mission", id: h.slice(8) };
  if (h.startsWith("task/")) return { page: "task", id: h.slice(5) };
  return { page: "missions", params: new URLSearchParams(query || "") };
}

async function render() {
  route = parseRoute();
  try {
    await loadAttention();
    if (route.page === "mission") await renderMission(route.id);
    else if (route.page === "task") await renderTask(route.id);
    else await renderMissions();
    document.body.dataset.page = route.page;
  } catch (e) {
    $view.replaceChildren(el("div", { class: "card" }, `Could not load: ${e.message}`));
  }
  $view.removeAttribute("aria-busy");
}

// ------------------------------------------------------------------------------------ waiting for you
// What waits for a person, at the top of every page, with its count in the header: each item says what to do,
// the command that does it and, where the API has one, the button.
async function loadAttention() {
  const { items } = await api("/api/attention");
  waiting = items;
  $count.hidden = !items.length;
  $count.dataset.count = String(items.length);
  $count.textContent = `${items.length} waiting for you`;
  const keys = items.map(itemKey);
  // the answer to a button of an item that is gone since (approved, resumed): what happened, once
  const gone = lastAnswer && lastAnswer.key.startsWith("waiting/") && !keys.includes(lastAnswer.key)
    ? el("p", { class: "answer past", id: "answer", "data-state": lastAnswer.state },
      `${lastAnswer.label} → ${lastAnswer.state}: ${lastAnswer.text}`) : null;
  $attention.hidden = !items.length && !gone;
  $attention.replaceChildren(...(items.length ? [el("h2", {}, `Waiting for you (${items.length})`)] : []),
    ...items.map(waitingItem), ...(gone ? [gone] : []));
}

const itemKey = (i) => `waiting/${i.kind}/${i.target}`;

function waitingItem(i) {
  const href = i.taskId ? `#/task/${enc(i.taskId)}` : i.missionId ? `#/mission/${enc(i.missionId)}` : null;
  const what = i.taskId ? `${i.taskId} · ${i.title}` : i.missionId ? `${i.missionId} · checkpoint ${i.title}` : i.title;
  const key = itemKey(i);
  return el("div", { class: "waiting-item", "data-kind": i.kind, "data-target": i.target },
    el("div", {}, badge(i.kind, i.state), " ", href ? link(href, what) : el("b", {}, what),
      i.since ? el("span", { class: "muted" }, ` since ${i.since}`) : null),
    i.detail ? el("div", { class: "muted" }, i.detail) : null,
    el("div", { class: "todo" }, `${i.todo}: `, ...i.commands.flatMap((c, n) => [n ? " or " : "", el("code", {}, c)])),
    i.actions.length ? actions(key, i.actions.map((a, n) => ({ ...a, id: `${key}/${n}`.replace(/[^A-Za-z0-9_-]/g, "_") }))) : null);
}

function crumbs(...parts) {
  $crumbs.replaceChildren(...parts.flatMap((p, i) => (i ? [" / ", p] : [p])));
}

// ---------------------------------------------------------------------------------------------- pages
const PAGE = 200;
const FILTERS = [["", "all"], ["waiting", "waiting for you"], ["running", "running"], ["completed", "completed"],
  ["failed", "failed"], ["cancelled", "cancelled"]];

function goMissions(changes) {  // the list's filter, search and page live in the address (back and reload keep them)
  const p = new URLSearchParams(route.params);
  for (const [k, v] of Object.entries(changes)) { if (v) p.set(k, v); else p.delete(k); }
  location.hash = `#/${p.toString() ? `?${p}` : ""}`;
}

async function renderMissions() {
  const p = route.params, offset = Number(p.get("offset")) || 0, size = Number(p.get("limit")) || PAGE;
  const query = new URLSearchParams({ limit: String(size), offset: String(offset) });
  if (p.get("status")) query.set("status", p.get("status"));
  if (p.get("q")) query.set("q", p.get("q"));
  const [{ missions, total }, { schedules }] = await Promise.all([api(`/api/missions?${query}`), api("/api/schedules")]);
  crumbs("missions");
  const typed = document.activeElement && document.activeElement.id === "search" ? document.activeElement.value : null;
  const search = el("input", { type: "search", id: "search", placeholder: "search by name or id",
    value: typed ?? (p.get("q") || null) });
  let typing = null;
  search.addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(() => goMissions({ q: search.value.trim(), offset: "" }), 300); });
  const filter = el("select", { id: "filter-status", onchange: (ev) => goMissions({ status: ev.target.value, offset: "" }) },
    FILTERS.map(([v, label]) => el("option", { value: v, selected: (p.get("status") || "") === v }, label)));
  const controls = el("div", { class: "filters" }, el("label", {}, "show ", filter), search);
  const first = total ? offset + 1 : 0, last = Math.min(offset + missions.length, total);
  const pager = el("div", { class: "pager", id: "pager", "data-total": total, "data-offset": offset },
    el("button", { type: "button", id: "newer", disabled: offset <= 0,
      onclick: () => goMissions({ offset: offset - size > 0 ? String(offset - size) : "" }) }, "← newer"),
    el("span", { class: "muted" }, `${first}–${last} of ${total}, newest first`),
    el("button", { type: "button", id: "older", disabled: offset + size >= total,
      onclick: () => goMissions({ offset: String(offset + size) }) }, "older →"));
  const rows = missions.slice().reverse().map((m) =>
    el("tr", { "data-mission-id": m.id, "data-status": m.status },
      el("td", {}, link(`#/mission/${enc(m.id)}`, m.id)), el("td", {}, m.name), el("td", {}, badge(m.status, m.state)),
      el("td", {}, `${m.done}/${m.total} done` + (m.failed ? `, ${m.failed} failed` : "")),
      el("td", {}, m.createdAt), el("td", {}, elapsed(m.createdAt, m.finishedAt))));
  const filtered = p.get("status") || p.get("q");
  $view.replaceChildren(el("h1", {}, "Missions"), controls,
    missions.length ? el("table", { id: "missions" },
      el("thead", {}, el("tr", {}, ["id", "name", "state", "progress", "started", "elapsed"].map((h) => el("th", {}, h)))),
      el("tbody", {}, rows))
      : el("p", { class: "muted", id: "no-missions" }, filtered ? "No mission matches."
        : "No mission yet: drop a mission file into the missions folder or POST /api/missions."),
    ...(total > size || offset ? [pager] : []),
    ...(schedules.length ? [el("h2", {}, "Schedules"), scheduleTable(schedules)] : []));
  if (typed !== null) search.focus();  // an event's re-render does not take the search box from the person typing
}

// A scheduled mission file: its next run, and Pause / Resume / Remove (POST /api/schedules/{id}/{action}).
function scheduleTable(schedules) {
  const path = (s, action) => `/api/schedules/${enc(s.id)}/${action}`;
  return el("table", { id: "schedules" },
    el("thead", {}, el("tr", {}, ["schedule", "status", "when", "next run", "last run", ""].map((h) => el("th", {}, h)))),
    el("tbody", {}, schedules.map((s) => el("tr", { "data-schedule-id": s.id, "data-status": s.status },
      el("td", {}, s.id), el("td", {}, badge(s.status)), el("td", {}, `${s.expression} (${s.timezone})`),
      el("td", {}, s.nextRunAt || "—"),
      el("td", {}, s.lastRun ? link(`#/mission/${enc(s.lastRun)}`, s.lastRun) : "—"),
      el("td", {}, actions(`schedule/${s.id}`, [
        s.status === "paused"
          ? { id: `resume-${s.id}`, label: "Resume", path: path(s, "resume") }
          : { id: `pause-${s.id}`, label: "Pause", path: path(s, "pause") },
        { id: `remove-${s.id}`, label: "Remove", path: path(s, "remove"),
          confirm: `Remove the schedule ${s.id}? Its runs so far stay; no new run starts.` }]))))));
}

async function renderMission(id) {
  const m = await api(`/api/missions/${enc(id)}`);
  if (!m) { $view.replaceChildren(el("p", {}, `No mission ${id}`)); return; }
  crumbs(link("#/", "missions"), m.id);
  const q = m.quality || {};
  const paused = m.status === "running" ? (m.pausedAt || []) : [];
  const reviewing = m.tasks.filter((t) => t.status === "awaiting_review");
  const summary = el("div", { class: "card", id: "mission-summary", "data-status": m.status },
    el("h1", {}, `${m.name} `, badge(m.status, missionState(m))),
    el("div", { class: "kv" },
      el("span", {}, el("b", {}, "id "), m.id),
      el("span", {}, el("b", {}, "elapsed "), elapsed(m.createdAt, m.finishedAt)),
      el("span", { id: "quality" }, el("b", {}, "quality average "), fmtScore(q.average),
        q.scored ? ` (${q.scored} scored task${q.scored > 1 ? "s" : ""})` : "",
        q.threshold != null ? ` · threshold ${q.threshold}` : ""),
      m.report ? el("span", {}, el("b", {}, "report "), m.report.summary) : null,
      m.spend ? el("span", { id: "spend" }, el("b", {}, "spend "), fmtSpend(m.spend.total)) : null),
    m.reason ? el("p", { class: "muted" }, m.reason) : null,
    paused.length ? el("p", { id: "paused", "data-checkpoints": paused.join(",") },
      el("b", {}, "paused "), `at checkpoint ${paused.join(", ")}: its blocked tasks wait for a person`) : null,
    reviewing.length ? el("p", { id: "awaiting-review", "data-tasks": reviewing.map((t) => t.id).join(",") },
      el("b", {}, "waiting for a person's review "), "(the judge could not tell): ",
      reviewing.flatMap((t, i) => [i ? ", " : "", link(`#/task/${enc(t.id)}`, t.id)])) : null,
    actions(`mission/${m.id}`, m.status === "running" ? [
      ...paused.map((name, i) => ({ id: i ? `resume-${i}` : "resume", label: `Resume ${name}`, field: "note",
        placeholder: "note (optional)", path: `/api/missions/${enc(m.id)}/resume`, body: { checkpoint: name } })),
      { id: "cancel", label: "Cancel mission",
        path: `/api/missions/${enc(m.id)}/cancel`, confirm: `Cancel mission ${m.id}? Its running agents are stopped.` }] : []));
  const parts = [summary];
  if ((m.waiting || []).length) parts.push(el("h2", {}, "Waiting for a person"), el("ul", { id: "waiting" },
    m.waiting.map((q) => el("li", { "data-task-id": q.taskId, "data-kind": q.kind },
      link(`#/task/${enc(q.taskId)}`, q.taskId), " ",
      q.kind === "question" ? `asks: ${q.text}` : `waits for approval of ${q.text}`))));
  if (m.tasks.length <= GRAPH_MAX_TASKS) parts.push(graph(m));
  else parts.push(el("p", { class: "muted" }, `${m.tasks.length} tasks: the graph is drawn up to ${GRAPH_MAX_TASKS}.`));
  parts.push(el("h2", {}, "Tasks"), taskTable(m));
  if ((m.timeline || []).length) parts.push(el("h2", {}, "Timeline"), timeline(m));
  if ((m.spec.qualityGates || []).length) parts.push(el("h2", {}, "Quality gates"), gateTable(m));
  if (m.spend && (m.spend.total.tokensIn || m.spend.total.tokensOut))
    parts.push(el("h2", {}, "Spend"), spendChart(m.spend.overTime || [], m.createdAt, m.finishedAt), spendTable(m.spend));
  $view.replaceChildren(...parts.filter(Boolean));
}

function fmtSpend(s) {
  const usd = `$${(s.usd || 0).toFixed(4)}`;
  const unknown = (s.costUnknown || []).length ? ` + cost unknown (${s.costUnknown.join(", ")})` : "";
  return `${usd}${unknown} · ${s.tokensIn} in / ${s.tokensOut} out tokens`;
}

// The mission's spend over time: the cumulative USD (tokens when no call was priced) after each attempt or review
// that ended, as a step line from 0 at the mission's start to its end (or now), a dot at each point; the axis says
// the start, the end and the total. One point is a step, not a vertical line.
function spendChart(points, startedAt, finishedAt) {
  if (!points.length) return null;
  const last = points[points.length - 1];
  const priced = last.usd > 0;
  const value = (p) => (priced ? p.usd : p.tokens);
  const t0 = Math.min(Date.parse(startedAt || points[0].at), Date.parse(points[0].at));
  const t1 = Math.max(Date.parse(finishedAt || last.at), Date.parse(last.at), t0 + 1000);
  const top = Math.max(value(last), 1e-9);
  const W = 600, H = 140, L = 10, R = 10, T = 12, B = 22;
  const x = (at) => L + ((Date.parse(at) - t0) / (t1 - t0)) * (W - L - R);
  const y = (v) => H - B - (v / top) * (H - T - B);
  let d = `M ${L} ${y(0)}`;
  for (const p of points) d += ` H ${x(p.at)} V ${y(value(p))}`;
  d += ` H ${W - R}`;
  const total = priced ? `$${top.toFixed(4)}` : `${top} tokens`;
  const chart = svg("svg", { class: "spend", id: "spend-chart", viewBox: `0 0 ${W} ${H}`, "data-points": points.length,
    role: "img" }, svg("title", {}, `cumulative spend: ${total}`),
  svg("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, stroke: "#d9d9d4" }),
  svg("path", { d, fill: "none", stroke: "#2f6fd6", "stroke-width": 2 }),
  ...points.map((p) => svg("circle", { cx: x(p.at), cy: y(value(p)), r: 3, fill: "#2f6fd6" },
    svg("title", {}, `${p.at}: ${priced ? `$${p.usd.toFixed(4)}` : `${p.tokens} tokens`}`))),
  svg("text", { x: L, y: H - 6 }, new Date(t0).toISOString().slice(11, 19)),
  svg("text", { x: W - R, y: H - 6, "text-anchor": "end" }, new Date(t1).toISOString().slice(11, 19)),
  svg("text", { x: L + 2, y: T + 2 }, total));
  return el("figure", { class: "spend-over-time" }, chart,
    el("figcaption", { class: "muted" }, `cumulative spend over time: ${total} by ${last.at}`));
}

// The mission's attempts on a time axis: a row per task, a bar per attempt from its start to its end (or now),
// coloured by its outcome and labelled with the node that ran it.
function timeline(m) {
  const rows = [...new Set(m.timeline.map((a) => a.taskId))];
  const title = Object.fromEntries(m.tasks.map((t) => [t.id, t.title]));
  const now = Date.now();
  const t0 = Math.min(...m.timeline.map((a) => Date.parse(a.startedAt)));
  const t1 = Math.max(t0 + 1000, ...m.timeline.map((a) => (a.finishedAt ? Date.parse(a.finishedAt) : now)));
  const W = 900, LABEL = 200, ROW = 22, TOP = 8, AXIS = 22, H = TOP + rows.length * ROW + AXIS;
  const x = (t) => LABEL + ((t - t0) / (t1 - t0)) * (W - LABEL - 12);
  const colour = (a) => (a.verdict === "passed" ? "#2e8540" : a.verdict === "failed" ? "#c8322b"
    : a.status === "interrupted" ? "#777" : a.status === "finished" ? "#7a4cc2" : "#2f6fd6");
  const outcome = (a) => a.verdict || a.status;
  const root = svg("svg", { class: "timeline", id: "timeline", viewBox: `0 0 ${W} ${H}`, role: "img",
    "data-attempts": m.timeline.length }, svg("title", {}, `attempts of ${m.id} over time`));
  rows.forEach((tid, r) => {
    const label = `${tid} ${title[tid] || ""}`;
    root.append(svg("text", { x: 4, y: TOP + r * ROW + 15 }, label.length > 30 ? label.slice(0, 29) + "…" : label));
  });
  for (const a of m.timeline) {
    const r = rows.indexOf(a.taskId), s0 = Date.parse(a.startedAt), s1 = a.finishedAt ? Date.parse(a.finishedAt) : now;
    const bx = x(s0), bw = Math.max(3, x(s1) - bx);
    const g = svg("g", { class: "attempt", "data-task-id": a.taskId, "data-attempt": a.number, "data-node": a.node || "",
      "data-outcome": outcome(a) },
    svg("rect", { class: "bar", x: bx, y: TOP + r * ROW + 3, width: bw, height: ROW - 6, fill: colour(a) }),
    svg("title", {}, `${a.taskId} attempt ${a.number} (${a.kind}) by ${a.agent}${a.node ? ` on ${a.node}` : ""}: `
      + `${outcome(a)}, ${a.startedAt} → ${a.finishedAt || "running"}`));
    if (bw > 60) g.append(svg("text", { x: bx + 4, y: TOP + r * ROW + 15, fill: "#fff", style: "fill:#fff" },
      `#${a.number}${a.node ? ` ${a.node}` : ""}`));
    root.append(g);
  }
  const axisY = TOP + rows.length * ROW + 4;
  root.append(svg("g", { class: "axis" }, svg("line", { x1: LABEL, x2: W - 12, y1: axisY, y2: axisY }),
    svg("text", { x: LABEL, y: axisY + 14 }, new Date(t0).toISOString().slice(11, 19)),
    svg("text", { x: W - 12, y: axisY + 14, "text-anchor": "end" }, new Date(t1).toISOString().slice(11, 19)),
    svg("text", { x: (LABEL + W) / 2, y: axisY + 14, "text-anchor": "middle" }, elapsed(new Date(t0).toISOString(), new Date(t1).toISOString()))));
  return root;
}

function spendTable(spend) {
  const row = (group, name, s) => el("tr", { "data-group": group, "data-name": name },
    el("td", {}, group), el("td", {}, name), el("td", {}, String(s.tokensIn)), el("td", {}, String(s.tokensOut)),
    el("td", { class: "score" }, `$${(s.usd || 0).toFixed(4)}`),
    el("td", { class: "muted" }, (s.costUnknown || []).length ? `cost unknown: ${s.costUnknown.join(", ")}` : ""));
  const rows = [];
  for (const [group, label] of [["byPhase", "phase"], ["byAgent", "agent"], ["byModel", "model"]])
    for (const [name, s] of Object.entries(spend[group] || {}))
      if (s.tokensIn || s.tokensOut) rows.push(row(label, name, s));
  return el("table", { id: "spend-table" },
    el("thead", {}, el("tr", {}, ["by", "", "tokens in", "tokens out", "USD", ""].map((h) => el("th", {}, h)))),
    el("tbody", {}, rows));
}

function taskTable(m) {
  const rows = m.tasks.slice(0, TABLE_MAX_ROWS).map((t) =>
    el("tr", { "data-task-id": t.id, "data-status": t.status },
      el("td", {}, link(`#/task/${enc(t.id)}`, t.id)), el("td", {}, t.title), el("td", {}, badge(t.status, taskState(t))),
      el("td", {}, t.attempts ? `${t.attempts} (${t.attemptKind || t.nextKind})` : "–"),
      el("td", {}, elapsed(t.startedAt, t.finishedAt)), el("td", { class: "score" }, fmtScore(t.score)),
      el("td", { class: "muted" }, t.status !== "done" && t.reason ? t.reason : "")));
  return el("table", { id: "tasks" },
    el("thead", {}, el("tr", {}, ["task", "title", "state", "attempt", "elapsed", "score", ""].map((h) => el("th", {}, h)))),
    el("tbody", {}, rows),
    m.tasks.length > TABLE_MAX_ROWS ? el("caption", {}, `first ${TABLE_MAX_ROWS} of ${m.tasks.length}`) : null);
}

function gateTable(m) {
  const stored = Object.fromEntries(m.gates.map((g) => [g.name, g]));
  return el("table", { id: "gates" },
    el("thead", {}, el("tr", {}, ["gate", "status", "after", "blocks", "rule", "average", "reason"].map((h) => el("th", {}, h)))),
    el("tbody", {}, m.spec.qualityGates.map((g) => {
      const s = stored[g.name] || { status: "waiting" };
      return el("tr", { "data-gate": g.name, "data-status": s.status },
        el("td", {}, g.name), el("td", {}, badge(s.status)), el("td", {}, g.afterTasks.join(", ")),
        el("td", {}, g.blocksTasks.join(", ")),
        el("td", {}, [g.minScore != null ? `minScore ${g.minScore}` : "", g.requireAllPassed ? "all passed" : ""].filter(Boolean).join(", ")),
        el("td", {}, fmtScore(s.avgScore)), el("td", { class: "muted" }, s.reason || ""));
    })));
}

// The task graph: tasks (and gates) in columns by dependency depth, edges from what each waits on.
function graph(m) {
  const byTitle = Object.fromEntries(m.tasks.map((t) => [t.title, t]));
  const specOf = Object.fromEntries(m.spec.tasks.map((s) => [s.title, s]));
  const stored = Object.fromEntries(m.gates.map((g) => [g.name, g]));
  const nodes = new Map();
  m.tasks.forEach((t) => nodes.set(`t:${t.title}`, { key: `t:${t.title}`, kind: "task", task: t, deps: [] }));
  (m.spec.qualityGates || []).forEach((g) => nodes.set(`g:${g.name}`, {
    key: `g:${g.name}`, kind: "gate", gate: g, status: (stored[g.name] || {}).status || "waiting", deps: [] }));
  const edges = [];
  m.tasks.forEach((t) => (specOf[t.title]?.dependsOn || []).forEach((d) => {
    if (nodes.has(`t:${d}`)) { nodes.get(`t:${t.title}`).deps.push(`t:${d}`); edges.push([`t:${d}`, `t:${t.title}`, false]); }
  }));
  (m.spec.qualityGates || []).forEach((g) => {
    g.afterTasks.forEach((a) => { if (nodes.has(`t:${a}`)) { nodes.get(`g:${g.name}`).deps.push(`t:${a}`); edges.push([`t:${a}`, `g:${g.name}`, true]); } });
    g.blocksTasks.forEach((b) => { if (nodes.has(`t:${b}`)) { nodes.get(`t:${b}`).deps.push(`g:${g.name}`); edges.push([`g:${g.name}`, `t:${b}`, true]); } });
  });
  const depth = new Map();
  const depthOf = (key, seen = new Set()) => {
    if (depth.has(key)) return depth.get(key);
    if (seen.has(key)) return 0;
    seen.add(key);
    const d = Math.max(-1, ...nodes.get(key).deps.map((k) => depthOf(k, seen))) + 1;
    depth.set(key, d);
    return d;
  };
  nodes.forEach((_, k) => depthOf(k));
  const columns = [];
  nodes.forEach((n, k) => { const d = depth.get(k); (columns[d] = columns[d] || []).push(n); });
  const W = 190, H = 46, GX = 60, GY = 18, PAD = 14;
  columns.forEach((col, ci) => col.forEach((n, ri) => { n.x = PAD + ci * (W + GX); n.y = PAD + ri * (H + GY); }));
  const width = PAD * 2 + columns.length * (W + GX) - GX;
  const height = PAD * 2 + Math.max(...columns.map((c) => c.length)) * (H + GY) - GY;
  const root = svg("svg", { class: "graph", id: "graph", viewBox: `0 0 ${width} ${height}`, height, role: "img" });
  root.append(svg("title", {}, `task graph of ${m.id}`));
  for (const [from, to, isGate] of edges) {
    const a = nodes.get(from), b = nodes.get(to);
    const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
    root.append(svg("path", { class: `edge${isGate ? " gate-edge" : ""}`, d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`,
      "data-from": from, "data-to": to }));
  }
  const colour = (s) => getComputedStyle(document.documentElement).getPropertyValue(
    `--${{ assigned: "running", in_progress: "running", awaiting_approval: "waiting", awaiting_review: "waiting", awaiting_answer: "waiting",
      passed: "done" }[s] || s}`).trim() || "#999";
  nodes.forEach((n) => {
    const status = n.kind === "task" ? n.task.status : n.status;
    const g = svg("g", { class: `node ${n.kind}`, transform: `translate(${n.x},${n.y})`, "data-status": status,
      ...(n.kind === "task" ? { "data-task-id": n.task.id } : { "data-gate": n.gate.name }) });
    g.append(svg("rect", { width: W, height: H, rx: n.kind === "gate" ? 14 : 5, stroke: colour(status) }));
    const title = n.kind === "task" ? n.task.title : `gate ${n.gate.name}`;
    g.append(svg("text", { x: 10, y: 18 }, title.length > 26 ? title.slice(0, 25) + "…" : title));
    const sub = n.kind === "task"
      ? `${status}${n.task.attempts ? ` · attempt ${n.task.attempts}` : ""}${n.task.score != null ? ` · ${fmtScore(n.task.score)}` : ""}`
      : `${status}${n.gate.minScore != null ? ` · min ${n.gate.minScore}` : ""}`;
    g.append(svg("text", { x: 10, y: 36, class: "sub" }, sub));
    if (n.kind === "task") g.addEventListener("click", () => { location.hash = `#/task/${enc(n.task.id)}`; });
    root.append(g);
  });
  return root;
}

async function renderTask(id) {
  const t = await api(`/api/tasks/${enc(id)}`);
  if (!t) { $view.replaceChildren(el("p", {}, `No task ${id}`)); return; }
  crumbs(link("#/", "missions"), link(`#/mission/${enc(t.missionId)}`, t.missionId), t.id);
  const head = el("div", { class: "card", id: "task-summary", "data-status": t.status },
    el("h1", {}, `${t.title} `, badge(t.status, t.state)),
    el("div", { class: "kv" },
      el("span", {}, el("b", {}, "id "), t.id), el("span", {}, el("b", {}, "agent "), t.agent),
      el("span", {}, el("b", {}, "attempts "), t.attemptCount), el("span", {}, el("b", {}, "retries "), t.retries),
      el("span", {}, el("b", {}, "fixes "), t.totalFixes), el("span", {}, el("b", {}, "score "), fmtScore(t.score)),
      el("span", {}, el("b", {}, "elapsed "), elapsed(t.startedAt, t.finishedAt))),
    t.reason && t.status !== "done" ? el("p", { class: "muted" }, t.reason) : null,
    whatItDoes(t),
    waitingFor(t),
    actions(`task/${t.id}`, [
      ...(t.status === "failed" || t.status === "on_hold"
        ? [{ id: "retry", label: "Retry", path: `/api/tasks/${enc(t.id)}/retry` }] : []),
      ...(t.status === "awaiting_answer"
        ? [{ id: "reply", label: "Answer", field: "answer", placeholder: "your answer (required)",
             path: `/api/tasks/${enc(t.id)}/answer` }] : []),
      ...(t.status === "awaiting_approval"
        ? [{ id: "approve", label: "Approve", path: `/api/tasks/${enc(t.id)}/approve` },
           ...(t.waitingFor === "side_effects" ? [] : [{ id: "reject", label: "Reject", field: "reason",
             placeholder: "reason (required)", required: true, path: `/api/tasks/${enc(t.id)}/reject` }])] : []),
      // the judge could not tell: a person passes the work (done) or fails it (a fix told the reason follows)
      ...(t.status === "awaiting_review"
        ? [{ id: "approve", label: "Approve", field: "note", placeholder: "note (optional)",
             path: `/api/tasks/${enc(t.id)}/approve` },
           { id: "fail", label: "Fail", field: "reason", placeholder: "reason (required: the next attempt is told)", required: true,
             path: `/api/tasks/${enc(t.id)}/reject` }] : []),
      ...(t.status === "done" || t.status === "failed"
        ? [{ id: "override", label: t.status === "done" ? "Override: fail it" : "Override: pass it", field: "reason",
             placeholder: "reason (required)", required: true, path: `/api/tasks/${enc(t.id)}/override`,
             body: { passed: t.status !== "done" } }] : [])]),
    t.override ? el("p", { id: "override-note" }, el("b", {}, t.override.judgePassed == null
      ? "reviewed by a person (the judge could not tell) " : "verdict overridden "),
      `to ${t.override.passed ? "pass" : "fail"} by ${t.override.byPerson}: ${t.override.reason}`) : null);
  const waiting = t.status === "awaiting_review" ? reviewWait(t) : null;
  $view.replaceChildren(head, ...(waiting ? [waiting] : []), ...questionList(t.questions || []),
    ...t.attempts.slice().reverse().map(attemptCard));
}

// A task awaiting review: what a person needs to decide — why the judge could not tell, the panel's score, the
// evidence polpo ran, and each dimension's reasoning. The Approve and Fail buttons are in the summary above.
function reviewWait(t) {
  const last = t.attempts[t.attempts.length - 1];
  const asm = last && last.assessments.length ? last.assessments[last.assessments.length - 1] : null;
  const checks = asm ? asm.checks.filter((c) => c.scores && c.scores.undecided) : [];
  return el("div", { class: "card", id: "review-wait" },
    el("h2", {}, "Waiting for a person's review"),
    checks.length ? null : el("p", { class: "muted" }, t.reason || ""),
    checks.map((c) => {
      const x = c.scores, r = x.review || {}, items = (r.evidence || {}).items || [];
      return el("div", { class: "undecided", "data-check": c.idx },
        el("p", {}, el("b", {}, `${c.type} `), c.label),
        el("p", { id: "review-why" }, el("b", {}, "why a person decides "), x.undecided),
        el("p", { id: "review-score" }, el("b", {}, "panel score "), fmtScore(x.globalScore),
          r.threshold != null ? ` (threshold ${r.threshold})` : ""),
        disputeOf(r),
        el("h3", {}, "Evidence polpo ran"),
        items.length ? el("ul", { class: "evidence" }, items.map((i) => el("li", { "data-evidence": i.id,
          "data-passed": String(i.passed) }, `${i.id} [${i.passed === true ? "passed" : i.passed === false ? "FAILED" : "note"}] `,
          i.label, i.origin ? ` (stated in ${i.origin})` : "", i.detail ? el("pre", {}, i.detail) : null)))
          : el("p", { class: "muted" }, "polpo found nothing it could run"),
        el("h3", {}, "The reviewers' reasoning"),
        el("ul", { class: "reasoning" }, (x.scores || []).map((d) => el("li", { "data-dimension": d.dimension },
          el("b", {}, `${d.dimension} ${fmtScore(d.score)}: `), d.reasoning || "–"))));
    }));
}

// A dispute: only the judge's own code is against the work, and that code may be the one in error. The person
// gets the score the panel gave before it and the code itself, beside the inputs and both answers (the evidence).
function disputeOf(r) {
  const cap = r.evidenceCap;
  if (!cap || !cap.disputed) return null;
  const probe = r.probe || {};
  return el("div", { id: "review-dispute" },
    el("p", {}, el("b", {}, "a dispute "), "only the judge's own code is against the work, and it can be the one " +
      `in error; the panel's score without it: ${fmtScore(r.disputedScore)}`),
    probe.code ? [el("h3", {}, `The judge's own ${probe.function || "code"}`), el("pre", { id: "judge-code" }, probe.code)]
      : null);
}

// What the task is and who does it: what a person approves (its description, its agent's command or model).
function whatItDoes(t) {
  const a = t.agentConfig;
  const how = !a ? ["agent", `${t.agent} (a team agent of the mission, or one the config no longer has)`]
    : a.type === "command" ? ["command", (a.command || []).join(" ")]
    : ["model", `${t.model || a.model || "the config's [defaults] model"}${a.apiBase ? ` at ${a.apiBase}` : ""}`];
  return el("dl", { class: "what", id: "what" },
    el("dt", {}, "description"), el("dd", {}, el("pre", { id: "description" }, t.description || "–")),
    el("dt", {}, `agent ${t.agent}${a ? ` (${a.type})` : ""}: ${how[0]}`), el("dd", {}, el("code", { id: "agent-how" }, how[1])));
}

// What the task's agent waits for from a person: its question, or the tool call (with its arguments) to approve.
function waitingFor(t) {
  const open = (t.questions || []).filter((q) => q.status === "asked");
  const q = open[open.length - 1];
  if (!q || !["awaiting_answer", "awaiting_approval"].includes(t.status)) return null;
  if (q.kind === "question")
    return el("div", { class: "waiting", id: "question", "data-question": q.id },
      el("b", {}, "The agent asks: "), q.text, el("div", { class: "muted" }, `until ${q.expiresAt || "–"}`));
  return el("div", { class: "waiting", id: "tool-call", "data-question": q.id },
    el("b", {}, "The agent waits for approval to call "), el("code", {}, q.text),
    el("pre", {}, JSON.stringify(q.arguments || {}, null, 2)), el("div", { class: "muted" }, `until ${q.expiresAt || "–"}`));
}

function questionList(questions) {
  const done = questions.filter((q) => q.status !== "asked");
  if (!done.length) return [];
  return [el("h2", {}, "Questions and approvals"), el("ul", { id: "questions" }, done.map((q) =>
    el("li", { "data-question": q.id, "data-kind": q.kind },
      q.kind === "question" ? [el("b", {}, "Q: "), q.text, el("br"), el("b", {}, "A: "), q.answer || "",
        el("span", { class: "muted" }, ` — ${q.answeredBy}`)]
        : [el("code", {}, q.text), ` ${q.approved ? "approved" : "refused"} by ${q.answeredBy}`,
           q.answer ? `: ${q.answer}` : ""])))];
}

function attemptCard(a) {
  const card = el("div", { class: "card attempt", "data-attempt": a.number },
    el("h2", {}, `Attempt ${a.number} (${a.kind}) `, a.verdict ? badge(a.verdict) : badge(a.status)),
    el("div", { class: "kv" },
      el("span", {}, el("b", {}, "agent "), a.agent + (a.model ? ` / ${a.model}` : "")),
      el("span", {}, el("b", {}, "exit "), a.exitCode ?? "–"),
      el("span", {}, el("b", {}, "duration "), a.duration != null ? `${a.duration} s` : "–"),
      a.tokens ? el("span", {}, el("b", {}, "tokens "), a.tokens) : null,
      a.timedOut ? el("span", {}, "timed out") : null, a.error ? el("span", {}, a.error) : null));
  for (const asm of a.assessments) {
    card.append(el("h3", {}, asm.trigger === "judge" ? "Checks (after the expectation judge's correction)" : "Checks"));
    for (const c of asm.checks) {
      const failedTry = c.scores && c.scores.error ? (asm.failedReviews || []).filter((r) => r.check === c.idx) : [];
      card.append(checkBlock(c, asm.reviews.filter((r) => r.check === c.idx), failedTry));
    }
  }
  if (a.transcript && a.transcript.length) card.append(transcript(a.transcript));
  if (a.stdoutTail) card.append(el("details", {}, el("summary", {}, "stdout (end)"), el("pre", {}, a.stdoutTail)));
  if (a.stderrTail) card.append(el("details", {}, el("summary", {}, "stderr (end)"), el("pre", {}, a.stderrTail)));
  return card;
}

function checkBlock(c, reviews, failedTry) {
  const undecided = !!(c.scores && c.scores.undecided);
  const errored = !!(c.scores && c.scores.error);  // the check could not be done (a judge outage): not a verdict
  const state = undecided ? "person" : c.passed ? "pass" : "fail";
  const box = el("div", { class: `check ${state}`, "data-check": c.idx, "data-type": c.type },
    el("div", {}, el("b", {}, `${undecided ? "A PERSON DECIDES" : c.passed ? "pass" : errored ? "ERROR" : "FAIL"} · ${c.type} `), c.label),
    el("div", { class: "muted" }, c.message),
    c.scores ? el("div", {}, el("b", {}, "score "), fmtScore(c.scores.globalScore)) : null);
  const dims = c.scores?.scores || [];
  if (dims.length) {
    const reviewers = [...new Set(dims.flatMap((d) => (d.reviewerScores || []).map((v) => v.reviewer)))].sort();
    box.append(el("table", { class: "votes" },
      el("thead", {}, el("tr", {}, el("th", {}, "dimension"), el("th", {}, "weight"),
        reviewers.map((r) => el("th", {}, `reviewer ${r}`)), el("th", {}, "score"))),
      el("tbody", {}, dims.map((d) => el("tr", { "data-dimension": d.dimension },
        el("td", {}, d.dimension), el("td", {}, d.weight),
        reviewers.map((r) => {
          const v = (d.reviewerScores || []).find((x) => x.reviewer === r);
          if (!v) return el("td", { class: "vote" }, "–");
          return el("td", { class: `vote${v.kept ? "" : " dropped"}`, "data-reviewer": r, "data-kept": String(v.kept),
            title: v.kept ? "kept" : "dropped as an outlier" }, fmtScore(v.score), v.kept ? "" : " (dropped)");
        }),
        el("td", {}, fmtScore(d.score)))))));
  }
  for (const r of reviews) box.append(reviewerBlock(r));
  if (failedTry.length) {  // a review that ended in an error keeps its reviewers' traces apart from a verdict's
    box.append(el("div", { class: "muted failed-try" }, "the reviewers of this try:"), ...failedTry.map(reviewerBlock));
  }
  return box;
}

function reviewerBlock(r) {
  return el("details", { class: "reviewer", "data-reviewer": r.index },
    el("summary", {}, `reviewer ${r.index} · ${r.model} · ${r.ok ? `score ${fmtScore(r.globalScore)}` : `failed: ${r.error}`}`
      + (r.tokens ? ` · ${r.tokens} tokens` : "") + (r.cost ? ` · $${r.cost.toFixed(4)}` : "")),
    r.summary ? el("p", {}, r.summary) : null,
    (r.scores || []).length ? el("ul", {}, r.scores.map((s) => el("li", {}, `${s.dimension}: ${s.score} — ${s.reasoning}`))) : null,
    (r.filesRead || []).length ? el("p", { class: "muted" }, `read: ${r.filesRead.join(", ")}`) : null,
    r.analysis ? el("pre", {}, r.analysis) : null,
    el("details", {}, el("summary", {}, `trace (${(r.messages || []).length} messages)`),
      el("pre", {}, JSON.stringify(r.messages || [], null, 2))));
}

function transcript(turns) {
  return el("details", { class: "transcript", open: true }, el("summary", {}, `What the agent did (${turns.length} turns)`),
    turns.map((t) => el("div", { class: "turn" },
      el("b", {}, `#${t.turn} ${t.type}${t.name ? ` ${t.name}` : ""} `),
      t.type === "assistant"
        ? [t.text || "", ...(t.toolCalls || []).map((c) => el("pre", {}, `${c.name}(${c.arguments})`))]
        : t.type === "tool" ? el("pre", {}, `${t.ok ? "ok" : `error ${t.error}`}: ${t.result ?? ""}`)
        : el("pre", {}, `${t.kind || ""} ${t.error || ""}`))));
}

// ------------------------------------------------------------------------------------------ live events
function describe(ev) {
  const d = ev.data || {};
  switch (ev.event) {
    case "task:transition": return `${d.from} → ${d.to}${d.reason ? ` (${d.reason})` : ""}`;
    case "mission:completed": return `${d.outcome}: ${(d.report || {}).summary || ""}`;
    case "assessment:check:complete": return `${d.undecided ? "a person decides:" : d.passed ? "pass" : "FAIL"} ${d.type} ${d.label}${d.globalScore != null ? ` (score ${fmtScore(d.globalScore)})` : ""}`;
    case "assessment:needs-person": return `waits for a person's review: ${d.reason}`;
    case "assessment:person-verdict": return `${d.passed ? "passed" : "failed"} by ${d.by}: ${d.reason}`;
    case "assessment:complete": return `${d.passed ? "passed" : "failed"}${d.globalScore != null ? ` (score ${fmtScore(d.globalScore)})` : ""}`;
    case "agent:spawned": return `attempt ${d.attempt} (${d.kind}) by ${d.agentName}`;
    case "task:fix": case "task:retry": return `attempt ${d.attempt}${d.check ? ` after ${d.check} failed` : ""}`;
    case "question:asked": return `asks: ${d.question}`;
    case "question:answered": return `answered by ${d.by}: ${d.answer}`;
    case "approval:requested": return d.tool ? `waits for approval of ${d.tool}` : `${d.title} waits for approval`;
    default: return "";
  }
}

function showEvent(ev) {
  const who = ev.taskId || ev.missionId || "";
  $events.prepend(el("li", { "data-seq": ev.seq, "data-event": ev.event },
    el("span", { class: "muted" }, `${(ev.ts || "").slice(11, 19)} `), el("span", { class: "ev" }, ev.event), " ",
    who, " ", el("span", { class: "muted" }, describe(ev))));
  while ($events.children.length > MAX_EVENTS) $events.lastChild.remove();
}

function affects(ev) {
  if (route.page === "missions") {
    return ev.event.startsWith("mission:") || ev.event.startsWith("schedule:") || ev.event === "task:transition";
  }
  if (route.page === "mission") return ev.missionId === route.id;
  if (route.page === "task") return ev.taskId === route.id;
  return false;
}

function follow() {
  const source = new EventSource(at("/api/events/stream"));
  source.onopen = () => { $conn.dataset.state = "live"; $conn.textContent = "live"; };
  source.onerror = () => {
    $conn.dataset.state = "lost"; $conn.textContent = "reconnecting…";
    if (source.readyState === EventSource.CLOSED) {  // refused (503: the daemon's stream cap), not retried by itself
      setTimeout(() => { follow(); render(); }, STREAM_RETRY_MS);
    }
  };
  source.onmessage = (msg) => {
    const ev = JSON.parse(msg.data);
    showEvent(ev);
    if (affects(ev) && !refreshTimer) {  // one re-read for a burst of events
      refreshTimer = setTimeout(() => { refreshTimer = null; render(); }, 150);
    }
  };
}

window.addEventListener("hashchange", render);
render();
follow();
