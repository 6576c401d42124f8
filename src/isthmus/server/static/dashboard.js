// The isthmus dashboard: plain JavaScript over the REST API, with the user's own token (kept in
// sessionStorage, sent as a Bearer header). What a user may see is what the API answers them.
"use strict";

const $ = (sel) => document.querySelector(sel);
let series = null; // GET /timeseries: the pool over the last hour, from the event log
let seriesAt = 0;
let timer = null;
let shownJob = null;

function token() { return sessionStorage.getItem("isthmus-token"); }

async function api(method, path) {
  const r = await fetch(path, { method, headers: { Authorization: "Bearer " + token(), Accept: "application/json" } });
  if (!r.ok) {
    let detail = r.statusText;
    try { detail = (await r.json()).detail || detail; } catch (e) { /* not JSON */ }
    const err = new Error(typeof detail === "string" ? detail : JSON.stringify(detail));
    err.status = r.status;
    throw err;
  }
  return r.status === 204 ? null : r.json();
}

function cell(text, cls) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "" : String(text);
  if (cls) td.className = cls;
  return td;
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows.map((cells) => {
    const tr = document.createElement("tr");
    tr.append(...cells);
    return tr;
  }));
}

function money(x) { return x === null || x === undefined ? "" : "$" + Number(x).toFixed(4); }

async function refresh() {
  try {
    const [sites, budgets, queues, vms, peers] = await Promise.all([api("GET", "/sites"), api("GET", "/budgets"),
      api("GET", "/queues"), api("GET", "/vms"), api("GET", "/peers")]);
    fill($("#sites tbody"), sites.map((s) => {
      const vms = s.kind === "cloud" ? `${s.booting} / ${s.leased} / ${s.max_vms}` : "";
      const cost = s.kind === "cloud" ? money(s.charged_cost) : "";
      let status = s.unavailable ? "unavailable: " + s.unavailable : "up";
      if (s.provider) status += `; ${s.provider.error_vms} error VMs; leasing ${s.provider.leasing}`;
      if (s.pilots) status += "; pilots " + Object.entries(s.pilots).map(([k, n]) => `${n} ${k}`).join(", ");
      return [cell(s.name), cell(s.kind), cell(s.online, "num"), cell(s.free, "num"), cell(s.running, "num"),
        cell(vms), cell(cost, "num"), cell(status)];
    }));
    fill($("#queues tbody"), queues.map((q) => [cell(q.name), cell(q.sites.join(", ")),
      cell(q.runtime_limit === null ? "none" : duration(q.runtime_limit)), cell(q.jobs, "num"),
      cell(q.processors, "num"), cell(q.oldest_wait === null ? "" : duration(q.oldest_wait), "num")]));
    const now = Date.now() / 1000;
    fill($("#vms tbody"), vms.map((v) => [cell(v.site_name), cell(v.vm, "num"), cell(v.activity || v.state, "vm-" + (v.activity || v.state)),
      cell(v.type_name || ""), cell((v.user || "") + (v.retiring ? " (retiring)" : "")),
      cell(new Date(v.leased_at * 1000).toLocaleTimeString()), cell(duration(v.lease_seconds), "num"),
      cell(money(v.charged_cost), "num")]));
    $("#no-peers").hidden = peers.length > 0;
    $("#peers").hidden = peers.length === 0;
    fill($("#peers tbody"), peers.map((p) => {
      const sitesOf = (p.resources && p.resources.sites) || [];
      const idle = sitesOf.reduce((n, s) => n + s.idle, 0);
      const procs = sitesOf.reduce((n, s) => n + s.processors, 0);
      const state = p.up ? "up" : "down" + (p.error ? ": " + p.error : "");
      return [cell(p.name), cell(p.address), cell(p.role), cell(state, p.up ? "peer-up" : "peer-down"),
        cell(p.last_heard ? new Date(p.last_heard * 1000).toLocaleTimeString() : "never"),
        cell(p.forwarded_open, "num"), cell(p.received_active, "num"),
        cell(p.resources ? `${idle} / ${procs}` : "", "num"), cell(p.resources ? p.resources.queued_jobs : "", "num")];
    }));
    for (const tr of $("#peers tbody").children) tr.dataset.peer = tr.firstChild.textContent;
    for (const tr of $("#vms tbody").children) tr.dataset.state = tr.children[2].textContent;
    const filter = $("#state-filter").value;
    const bags = await api("GET", "/bags" + (filter === "" ? "" : "?all=true"));
    $("#no-bags").hidden = bags.length > 0;
    $("#bags").hidden = bags.length === 0;
    fill($("#bags tbody"), bags.map((b) => {
      const p = b.progress;
      const bar = document.createElement("progress");
      bar.max = Math.max(1, p.tasks);
      bar.value = p.done + p.failed;
      bar.textContent = `${p.done + p.failed} / ${p.tasks}`;
      const progress = cell("");
      progress.append(bar);
      const held = Object.entries(p.held).map(([site, n]) => `${site}: ${n}`).join(", ");
      return [cell(b.id, "num"), cell(b.user), cell(b.name), cell(b.state, "state-" + b.state), progress,
        cell(`${p.done} / ${p.tasks}`, "num"), cell(p.running, "num"), cell(p.queued, "num"), cell(p.failed, "num"),
        cell(p.throughput === null ? "" : p.throughput.toFixed(2) + " /s", "num"), cell(held)];
    }));
    for (const tr of $("#bags tbody").children) tr.dataset.bag = tr.firstChild.textContent;
    fill($("#budgets tbody"), budgets.map((b) => [cell(b.name), cell(b.sites.join(", ")),
      cell(b.current || "total"), cell(money(b.limit), "num"), cell(money(b.spent), "num"), cell(money(b.left), "num")]));
    const query = filter === "" ? "" : filter === "all" ? "?all=true" : "?state=" + encodeURIComponent(filter);
    const jobs = await api("GET", "/jobs" + query);
    fill($("#jobs tbody"), jobs.map((j) => {
      const open = document.createElement("button");
      open.textContent = "history";
      open.onclick = () => { shownJob = j.id; showJob(); };
      const actions = cell("");
      actions.append(open);
      if (j.state === "queued" || j.state === "running" || j.state === "starting") {
        const cancel = document.createElement("button");
        cancel.textContent = "cancel";
        cancel.dataset.job = j.id;
        cancel.onclick = async () => { await api("POST", `/jobs/${j.id}/cancel`); refresh(); };
        actions.append(" ", cancel);
      }
      const why = j.state === "queued" ? (j.reason || "") : j.exit_code === null ? "" : "exit " + j.exit_code;
      return [cell(j.id, "num"), cell(j.user), cell(j.name), cell(j.state, "state-" + j.state), cell(j.size, "num"),
        cell(j.site || ""), cell(why), actions];
    }));
    for (const tr of $("#jobs tbody").children) tr.dataset.job = tr.firstChild.textContent;
    if (series === null || now - seriesAt >= 10) { // the series is read from the whole log: not every 2 s
      series = await api("GET", "/timeseries?window=3600&points=240");
      seriesAt = now;
      draw($("#chart"), [["queued_processors", "#c77700"], ["running_processors", "#1f6feb"]], String);
      draw($("#spend-chart"), [["spend", "#2da44e"]], money);
      const last = (k) => (series.times.length ? series[k][series.times.length - 1] : 0);
      $("#spend-now").textContent = money(last("spend")) + " so far";
      $("#vms-now").textContent = String(last("leased_vms"));
    }
    if (shownJob !== null) await showJob();
    $("#error").textContent = "";
  } catch (e) {
    if (e.status === 401) { logout("your token was refused: " + e.message); return; }
    $("#error").textContent = e.message;
  }
}

async function showJob() {
  const j = await api("GET", `/jobs/${shownJob}`);
  $("#detail").hidden = false;
  $("#detail-id").textContent = `${j.id} (${j.name}, ${j.state})`;
  fill($("#history tbody"), (j.history || []).map((h) => [cell(new Date(h.time * 1000).toLocaleTimeString()),
    cell(h.state), cell(h.run, "num"), cell(h.detail)]));
}

function duration(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 120) return s + " s";
  if (s < 7200) return Math.round(s / 60) + " min";
  return (s / 3600).toFixed(1) + " h";
}

// Draws the named series of `series` as lines on canvas `c`, the largest value labelled by `label`.
function draw(c, lines, label) {
  const g = c.getContext("2d");
  g.clearRect(0, 0, c.width, c.height);
  const t = series.times;
  if (t.length < 2) return;
  const top = Math.max(1e-9, ...lines.flatMap(([k]) => series[k]));
  const x = (v) => ((v - t[0]) / (t[t.length - 1] - t[0])) * (c.width - 10) + 5;
  const y = (v) => c.height - 5 - (v / top) * (c.height - 20);
  for (const [k, color] of lines) {
    g.strokeStyle = color;
    g.beginPath();
    series[k].forEach((v, i) => (i ? g.lineTo(x(t[i]), y(v)) : g.moveTo(x(t[i]), y(v))));
    g.stroke();
  }
  g.fillStyle = "#555";
  g.fillText(label(top), 2, 12);
  g.fillText(new Date(t[0] * 1000).toLocaleTimeString(), 5, c.height - 8);
  const end = new Date(t[t.length - 1] * 1000).toLocaleTimeString();
  g.fillText(end, c.width - 5 - g.measureText(end).width, c.height - 8);
  c.dataset.points = String(t.length);
}

async function login(t) {
  sessionStorage.setItem("isthmus-token", t);
  try {
    const me = await api("GET", "/whoami");
    $("#who").textContent = me.user + (me.admin ? " (admin)" : "");
  } catch (e) {
    sessionStorage.removeItem("isthmus-token");
    $("#login-error").textContent = e.status === 401 ? "token refused" : e.message;
    return;
  }
  $("#login").hidden = true;
  $("#app").hidden = false;
  $("#logout").hidden = false;
  await refresh();
  timer = setInterval(refresh, 2000);
}

function logout(why) {
  sessionStorage.removeItem("isthmus-token");
  if (timer) clearInterval(timer);
  $("#app").hidden = true;
  $("#logout").hidden = true;
  $("#login").hidden = false;
  $("#who").textContent = "";
  $("#login-error").textContent = why || "";
}

$("#login-form").onsubmit = (ev) => { ev.preventDefault(); login($("#token").value.trim()); };
$("#logout").onclick = () => logout();
$("#state-filter").onchange = refresh;
if (token()) login(token());
