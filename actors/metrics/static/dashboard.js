// The dashboard: /api/status (the metrics actor's last collection and its overview) every second, drawn
// into the page. Totals come from the overview as the API serves them; the page sums nothing itself.
"use strict";

const REFRESH_MS = 1000;
const $ = (id) => document.getElementById(id);
const expanded = new Set();  // what the operator unfolded: "system", "topic:NAME", "group:NAME"
let last = null;             // the last answer, redrawn when a filter or a fold changes

function row(cells, data, className) {
  const tr = document.createElement("tr");
  if (className) tr.className = className;
  for (const [key, value] of Object.entries(data || {})) tr.dataset[key] = value;
  for (const cell of cells) {
    const td = document.createElement("td");
    if (cell instanceof Node) td.appendChild(cell);
    else if (Array.isArray(cell)) { td.textContent = cell[0]; td.className = cell[1]; } else td.textContent = cell;
    tr.appendChild(td);
  }
  return tr;
}

function fill(tableId, rows, empty) {
  const columns = $(tableId).tHead.rows[0].cells.length;
  const placeholder = () => {
    const tr = row([empty], {}, "placeholder");
    tr.cells[0].colSpan = columns;
    return tr;
  };
  $(tableId).tBodies[0].replaceChildren(...(rows.length || !empty ? rows : [placeholder()]));
}

function dash(value) {
  return value === null || value === undefined ? "—" : value;
}

function toggle(key, label) {
  const button = document.createElement("button");
  button.className = "toggle";
  button.dataset.key = key;
  button.setAttribute("aria-expanded", expanded.has(key));
  button.textContent = (expanded.has(key) ? "▾ " : "▸ ") + label;
  button.addEventListener("click", () => {
    if (!expanded.delete(key)) expanded.add(key);
    if (last) drawTables(last);
  });
  return button;
}

function smallTable(headers, rows) {
  const table = document.createElement("table");
  const head = table.createTHead().insertRow();
  for (const text of headers) head.appendChild(document.createElement("th")).textContent = text;
  table.createTBody().replaceChildren(...rows);
  return table;
}

function detail(key, columns, tables) {
  const tr = row([""], {detail: key}, "detail");
  tr.cells[0].colSpan = columns;
  tr.cells[0].replaceChildren(...tables);
  return tr;
}

function matches(filterId, name) {
  const wanted = $(filterId).value.trim().toLowerCase();
  return !wanted || name.toLowerCase().includes(wanted);
}

function topicRows(s, name, t, className) {
  const key = "topic:" + name;
  const rows = [row([toggle(key, name), t.queues, t.messages, t.messages_in, t.groups.join(", ")],
                    {topic: name, system: t.system}, className)];
  if (expanded.has(key)) {
    const queues = Object.entries((s.topics[name] || {}).queues || {}).map(([queue, [lo, hi]]) =>
      row([queue, lo, hi, hi - lo], {topic: name, queue: queue}));
    rows.push(detail(key, 5, [smallTable(["queue", "min offset", "max offset", "messages"], queues)]));
  }
  return rows;
}

function drawTopics(s) {
  const o = s.overview, rows = [];
  const shown = Object.entries(o.topics).filter(([name]) => matches("topic-filter", name));
  for (const [name, t] of shown) if (!t.system) rows.push(...topicRows(s, name, t, "topic"));
  const sys = o.system_topics;
  if (sys.topics) {
    rows.push(row([toggle("system", `system topics (${sys.topics})`), sys.queues, sys.messages, sys.messages_in,
                   ""], {fold: "system", topics: sys.topics}, "system-fold"));
    if (expanded.has("system")) {
      for (const [name, t] of shown) if (t.system) rows.push(...topicRows(s, name, t, "topic system"));
    }
  }
  fill("topics", rows, Object.keys(o.topics).length ? "no topic matches the filter" : "no topics yet");
}

function drawGroups(s) {
  const rows = [];
  for (const [group, g] of Object.entries(s.overview.groups)) {
    if (!matches("group-filter", group)) continue;
    const key = "group:" + group;
    rows.push(row([toggle(key, group), g.mode, g.topics.join(", "), g.queues, dash(g.lag), g.delivered,
                   dash(g.ready), dash(g.unacked), dash(g.redelivered), dash(g.dead)], {group: group, mode: g.mode},
                  "group"));
    if (!expanded.has(key)) continue;
    const tables = [];
    const offsets = (s.groups[group] || []).map((q) => row([q.topic, q.queue,
      q.committed_offset < 0 ? "never" : q.committed_offset, q.max_offset, q.lag,
      q.last_consume_ms > 0 ? new Date(q.last_consume_ms).toLocaleString() : "never"],
      {group: group, topic: q.topic, queue: q.queue}));
    if (offsets.length) {
      tables.push(smallTable(["topic", "queue", "committed", "max offset", "lag", "last consumed"], offsets));
    }
    const acks = s.ack.filter((q) => q.group === group).map((q) => row([q.topic, q.queue, q.ready, q.unacked,
      q.redelivered, q.dead], {group: group, topic: q.topic, queue: q.queue, mode: "ack"}));
    if (acks.length) tables.push(smallTable(["topic", "queue", "ready", "unacked", "redelivered", "dead"], acks));
    const delivered = Object.entries((s.delivered || {})[group] || {}).map(([topic, n]) =>
      row([topic, n], {group: group, topic: topic, delivered: n}));
    if (delivered.length) tables.push(smallTable(["topic", "delivered"], delivered));
    rows.push(detail(key, 10, tables));
  }
  fill("groups", rows, Object.keys(s.overview.groups).length ? "no group matches the filter" : "no groups yet");
}

function drawActors(status) {
  const rows = Object.entries(status.actors || {}).map(([name, a]) => {
    const state = String(a.state || "");
    return row([name, a.pid ?? "", [state, "state-" + state.split(" ")[0]], a.restarts_total ?? 0,
                (a.cpu_s ?? 0).toFixed(1), ((a.rss_bytes ?? 0) / 1048576).toFixed(1), a.lag_bytes ?? ""],
               {actor: name});
  });
  fill("actors", rows, "no actors reported");
}

function duration(seconds) {
  const d = Math.floor(seconds / 86400), h = Math.floor(seconds / 3600) % 24;
  const m = Math.floor(seconds / 60) % 60, sec = seconds % 60;
  if (d) return `${d} d ${h} h`;
  if (h) return `${h} h ${m} min`;
  return m ? `${m} min ${sec} s` : `${sec} s`;
}

function drawBroker(s) {
  const b = s.overview.broker;
  $("version").textContent = b.version;
  $("version").title = "Python " + b.python;
  $("broker").dataset.startedMs = b.started_ms ?? "";
  $("uptime").dataset.uptimeS = b.uptime_s ?? "";
  $("uptime").textContent = b.uptime_s === undefined ? "unknown" : duration(b.uptime_s);
}

function drawDisk(disk) {
  const bar = $("disk"), known = disk.used_ratio >= 0;
  $("disk-used").style.width = (known ? disk.used_ratio * 100 : 0) + "%";
  bar.querySelectorAll(".mark").forEach((m) => m.remove());
  for (const key of ["max_used_ratio", "clean_forcibly_ratio", "warning_ratio"]) {
    const mark = document.createElement("div");
    mark.className = "mark";
    mark.title = key;
    mark.style.left = disk[key] * 100 + "%";
    bar.appendChild(mark);
  }
  const pct = (r) => Math.round(r * 100) + " %";
  $("disk-text").textContent = (known ? `used ${pct(disk.used_ratio)}` : "the disk's use cannot be read") +
    `; retention deletes past ${pct(disk.max_used_ratio)}, at once past ${pct(disk.clean_forcibly_ratio)}; ` +
    `sends refused past ${pct(disk.warning_ratio)}`;
  bar.dataset.usedRatio = disk.used_ratio;
}

function drawReplication(rep) {
  // rep: mqstore.actors.ha_status' summary (null from a broker without roles)
  const section = $("replication"), secs = (ms) => (ms / 1000).toFixed(1);
  let text = "no role reported", why = "", slaves = [];
  if (rep && rep.ha_actor === "none") {
    text = `${rep.role}, serving no slaves (no HA port)`;
  } else if (rep && rep.role === "SLAVE") {
    text = `SLAVE of ${rep.master}, epoch ${rep.epoch}, ${rep.state}; written ${rep.written}, the master's end ` +
      `${rep.master_end} (${rep.behind_bytes} bytes behind)`;
    if (rep.since_master_ms >= 0) text += `, heard from it ${secs(rep.since_master_ms)} s ago`;
    why = rep.reason || "";
    const md = rep.metadata;
    if (md) why += (why ? "; " : "") + "metadata " + (md.age_ms < 0 ? "never synced" : `synced ${secs(md.age_ms)} s ago`);
  } else if (rep) {
    text = `${rep.role}, epoch ${rep.epoch}, HA port ${rep.listen}, ${rep.connected} connected ` +
      `(${rep.in_sync} in sync), replicated to ${rep.replicated} of ${rep.written}`;
    slaves = rep.slaves.map((s) => row([s.broker_id, s.address, s.acked, s.lag_bytes, secs(s.lag_ms),
                                        secs(s.since_report_ms)], {brokerId: s.broker_id}));
  }
  if (rep && rep.ha_actor !== "none" && rep.ha_actor !== "running") text += ` (the ha actor is ${rep.ha_actor})`;
  section.dataset.role = rep ? rep.role : "";
  section.dataset.epoch = rep && rep.epoch !== undefined ? rep.epoch : "";
  section.dataset.state = rep && rep.state !== undefined ? rep.state : "";
  $("replication-text").textContent = text;
  $("replication-why").textContent = why;
  fill("slaves", slaves);
}

function drawTables(s) {
  drawTopics(s);
  drawGroups(s);
}

function draw(s) {
  $("store").textContent = s.store;
  $("ready").textContent = s.status.ready ? "ready" : "not ready: " + (s.status.waiting_for || []).join("; ");
  $("updated").textContent = new Date(s.time_ms).toLocaleTimeString();
  $("errors").textContent = (s.errors || []).join("; ");
  $("written").textContent = s.offsets.written;
  $("flushed").textContent = s.offsets.flushed;
  $("dispatched").textContent = s.offsets.dispatched;
  drawBroker(s);
  drawActors(s.status);
  drawTables(s);
  drawDisk(s.disk);
  drawReplication(s.replication);
  drawChart(s.history);
  document.body.classList.remove("loading");
  document.body.dataset.timeMs = s.time_ms;
}

async function refresh() {
  try {
    const response = await fetch("/api/status", {cache: "no-store"});
    const s = await response.json();
    if (s.status && s.overview) {
      last = s;
      draw(s);
    } else {
      $("loading").textContent = "Loading: the broker has not finished its first collection yet…";
    }
  } catch (err) {
    const why = "cannot reach the broker: " + err;
    if (last) $("ready").textContent = why; else $("loading").textContent = "Loading: " + why;
  }
  setTimeout(refresh, REFRESH_MS);
}

for (const id of ["topic-filter", "group-filter"]) $(id).addEventListener("input", () => { if (last) drawTables(last); });
refresh();
