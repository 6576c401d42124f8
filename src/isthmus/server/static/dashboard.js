// The isthmus dashboard: plain JavaScript over the REST API, with the user's own token (kept in
// sessionStorage, sent as a Bearer header). What a user may see is what the API answers them.
"use strict";

const $ = (sel) => document.querySelector(sel);
const samples = []; // [time, queued processors, running processors]
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
    const [sites, budgets] = await Promise.all([api("GET", "/sites"), api("GET", "/budgets")]);
    fill($("#sites tbody"), sites.map((s) => {
      const vms = s.kind === "cloud" ? `${s.booting} / ${s.leased} / ${s.max_vms}` : "";
      let status = s.unavailable ? "unavailable: " + s.unavailable : "up";
      if (s.provider) status += `; ${s.provider.error_vms} error VMs; leasing ${s.provider.leasing}`;
      if (s.pilots) status += "; pilots " + Object.entries(s.pilots).map(([k, n]) => `${n} ${k}`).join(", ");
      return [cell(s.name), cell(s.kind), cell(s.online, "num"), cell(s.free, "num"), cell(s.running, "num"),
        cell(vms), cell(status)];
    }));
    fill($("#budgets tbody"), budgets.map((b) => [cell(b.name), cell(b.sites.join(", ")),
      cell(b.current || "total"), cell(money(b.limit), "num"), cell(money(b.spent), "num"), cell(money(b.left), "num")]));
    const filter = $("#state-filter").value;
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
    const queued = sites.length ? sites[0].queued_total : 0;
    const active = await api("GET", "/jobs?state=queued&state=running&state=starting&limit=100000");
    const qp = active.filter((j) => j.state === "queued").reduce((a, j) => a + j.size, 0);
    const rp = active.filter((j) => j.state !== "queued").reduce((a, j) => a + j.size, 0);
    samples.push([Date.now(), qp, rp, queued]);
    if (samples.length > 300) samples.shift();
    draw();
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

function draw() {
  const c = $("#chart");
  const g = c.getContext("2d");
  g.clearRect(0, 0, c.width, c.height);
  if (samples.length < 2) return;
  const top = Math.max(1, ...samples.map((s) => Math.max(s[1], s[2])));
  const x = (i) => (i / (samples.length - 1)) * (c.width - 10) + 5;
  const y = (v) => c.height - 5 - (v / top) * (c.height - 20);
  for (const [k, color] of [[1, "#c77700"], [2, "#1f6feb"]]) {
    g.strokeStyle = color;
    g.beginPath();
    samples.forEach((s, i) => (i ? g.lineTo(x(i), y(s[k])) : g.moveTo(x(i), y(s[k]))));
    g.stroke();
  }
  g.fillStyle = "#555";
  g.fillText(String(top), 2, 12);
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
