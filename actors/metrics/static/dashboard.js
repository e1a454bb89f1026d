// The dashboard: /api/status (the metrics actor's last collection) every second, drawn into the page.
"use strict";

const REFRESH_MS = 1000;
const $ = (id) => document.getElementById(id);

function row(cells, data) {
  const tr = document.createElement("tr");
  for (const [key, value] of Object.entries(data || {})) tr.dataset[key] = value;
  for (const cell of cells) {
    const td = document.createElement("td");
    if (Array.isArray(cell)) { td.textContent = cell[0]; td.className = cell[1]; } else td.textContent = cell;
    tr.appendChild(td);
  }
  return tr;
}

function fill(tableId, rows) {
  const body = $(tableId).tBodies[0];
  body.replaceChildren(...rows);
}

function drawActors(status) {
  const rows = Object.entries(status.actors || {}).map(([name, a]) => {
    const state = String(a.state || "");
    return row([name, a.pid ?? "", [state, "state-" + state.split(" ")[0]], a.restarts_total ?? 0,
                (a.cpu_s ?? 0).toFixed(1), ((a.rss_bytes ?? 0) / 1048576).toFixed(1), a.lag_bytes ?? ""],
               {actor: name});
  });
  fill("actors", rows);
}

function drawTopics(topics) {
  const rows = [];
  for (const [topic, t] of Object.entries(topics)) {
    const queues = Object.entries(t.queues);
    if (!queues.length) rows.push(row([topic, "", "", "", t.messages_in, t.messages_out], {topic: topic}));
    queues.forEach(([queue, [lo, hi]], i) => {  // the topic's counts once, on its first queue's row
      rows.push(row([i ? "" : topic, queue, lo, hi, i ? "" : t.messages_in, i ? "" : t.messages_out],
                    {topic: topic, queue: queue}));
    });
  }
  fill("topics", rows);
}

function drawGroups(groups, ack) {
  const rows = [];
  for (const [group, queues] of Object.entries(groups)) {
    for (const q of queues) {
      rows.push(row([group, q.topic, q.queue, q.committed_offset, q.max_offset, q.lag],
                    {group: group, topic: q.topic, queue: q.queue}));
    }
  }
  fill("groups", rows);
  fill("ack", ack.map((q) => row([q.group, q.topic, q.queue, q.ready, q.unacked, q.redelivered],
                                 {group: q.group, topic: q.topic, queue: q.queue})));
}

function drawDisk(disk) {
  const bar = $("disk");
  $("disk-used").style.width = Math.max(0, disk.used_ratio) * 100 + "%";
  bar.querySelectorAll(".mark").forEach((m) => m.remove());
  for (const key of ["max_used_ratio", "clean_forcibly_ratio", "warning_ratio"]) {
    const mark = document.createElement("div");
    mark.className = "mark";
    mark.title = key;
    mark.style.left = disk[key] * 100 + "%";
    bar.appendChild(mark);
  }
  const pct = (r) => Math.round(r * 100) + " %";
  $("disk-text").textContent = `used ${pct(disk.used_ratio)}; retention deletes past ${pct(disk.max_used_ratio)}, ` +
    `at once past ${pct(disk.clean_forcibly_ratio)}; sends refused past ${pct(disk.warning_ratio)}`;
  bar.dataset.usedRatio = disk.used_ratio;
}

function drawChart(history) {
  // history: [time ms, messages in, messages out, written]; rates from one sample to the next
  const rates = [];
  for (let i = 1; i < history.length; i++) {
    const dt = (history[i][0] - history[i - 1][0]) / 1000 || 1;
    rates.push([history[i][0], Math.max(0, (history[i][1] - history[i - 1][1]) / dt),
                Math.max(0, (history[i][2] - history[i - 1][2]) / dt)]);
  }
  const chart = $("chart");
  const peak = Math.max(1, ...rates.map((r) => Math.max(r[1], r[2])));
  const first = rates.length ? rates[0][0] : 0, span = Math.max(1, (rates.length ? rates[rates.length - 1][0] : 0) - first);
  const line = (k) => rates.map((r) => `${((r[0] - first) / span * 600).toFixed(1)},${(158 - r[k] / peak * 150).toFixed(1)}`).join(" ");
  $("chart-in").setAttribute("points", line(1));
  $("chart-out").setAttribute("points", line(2));
  const last = history.length ? history[history.length - 1] : [0, 0, 0];
  chart.dataset.samples = history.length;
  chart.dataset.inTotal = last[1];
  chart.dataset.outTotal = last[2];
  $("chart-span").textContent = Math.round(span / 1000);
  $("chart-peak").textContent = Math.round(peak);
}

function drawReplication(rep) {
  // rep: mqstore.actors.ha.summary's view (null from a broker without roles)
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

async function refresh() {
  try {
    const response = await fetch("/api/status", {cache: "no-store"});
    const s = await response.json();
    if (s.status) {
      $("store").textContent = s.store;
      $("ready").textContent = s.status.ready ? "ready" : "not ready: " + (s.status.waiting_for || []).join("; ");
      $("updated").textContent = new Date(s.time_ms).toLocaleTimeString();
      $("errors").textContent = (s.errors || []).join("; ");
      $("written").textContent = s.offsets.written;
      $("flushed").textContent = s.offsets.flushed;
      $("dispatched").textContent = s.offsets.dispatched;
      drawActors(s.status);
      drawTopics(s.topics);
      drawGroups(s.groups, s.ack);
      drawDisk(s.disk);
      drawReplication(s.replication);
      drawChart(s.history);
      document.body.dataset.timeMs = s.time_ms;
    }
  } catch (err) {
    $("ready").textContent = "cannot reach the broker: " + err;
  }
  setTimeout(refresh, REFRESH_MS);
}

refresh();
