// The throughput chart: plain SVG, drawn from the collection's history, with a time axis and a rate axis.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const CHART = {width: 640, height: 220, left: 58, right: 12, top: 12, bottom: 40};
// time ticks: the first step that gives at most MAX_TIME_TICKS labels; minute steps are labelled to the minute
const TIME_STEPS_S = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600];
const MAX_TIME_TICKS = 7;

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

// A rate axis up to a round number at or above the peak: steps of 1, 2 or 5 times a power of ten.
function rateScale(peak) {
  const rough = Math.max(peak, 1) / 4;
  const power = Math.pow(10, Math.floor(Math.log10(rough)));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= rough);
  const top = Math.max(step, Math.ceil(peak / step) * step);
  const ticks = [];
  for (let v = 0; v <= top + step / 2; v += step) ticks.push(v);
  return {top: top, ticks: ticks};
}

function rateLabel(v) {
  if (v >= 1e6) return +(v / 1e6).toFixed(1) + "M";
  if (v >= 1e3) return +(v / 1e3).toFixed(1) + "k";
  return String(+v.toFixed(2));
}

function timeTicks(first, last) {
  const span = Math.max(last - first, 1000) / 1000;
  const step = TIME_STEPS_S.find((s) => span / s <= MAX_TIME_TICKS) || TIME_STEPS_S[TIME_STEPS_S.length - 1];
  const ticks = [];
  for (let t = Math.ceil(first / 1000 / step) * step * 1000; t <= last; t += step * 1000) ticks.push(t);
  const pad = (n) => String(n).padStart(2, "0");
  const label = (ms) => {
    const d = new Date(ms);
    return `${pad(d.getHours())}:${pad(d.getMinutes())}` + (step < 60 ? `:${pad(d.getSeconds())}` : "");
  };
  return ticks.map((t) => [t, label(t)]);
}

// history: [time ms, messages in, messages delivered, written], cumulative; rates from one sample to the next
function rates(history) {
  const out = [];
  for (let i = 1; i < history.length; i++) {
    const dt = (history[i][0] - history[i - 1][0]) / 1000 || 1;
    out.push([history[i][0], Math.max(0, (history[i][1] - history[i - 1][1]) / dt),
              Math.max(0, (history[i][2] - history[i - 1][2]) / dt)]);
  }
  return out;
}

function drawChart(history) {
  const chart = document.getElementById("chart");
  const r = rates(history);
  const {width, height, left, right, top, bottom} = CHART;
  const plotW = width - left - right, plotH = height - top - bottom;
  const peak = Math.max(0, ...r.map((p) => Math.max(p[1], p[2])));
  const scale = rateScale(peak);
  const first = r.length ? r[0][0] : 0, last = r.length ? r[r.length - 1][0] : 0;
  const x = (t) => left + (last > first ? (t - first) / (last - first) : 1) * plotW;
  const y = (v) => top + plotH - v / scale.top * plotH;

  const yAxis = document.getElementById("y-axis"), xAxis = document.getElementById("x-axis");
  yAxis.replaceChildren(svg("line", {x1: left, y1: top, x2: left, y2: top + plotH, class: "axis"}));
  for (const v of scale.ticks) {
    yAxis.appendChild(svg("line", {x1: left, y1: y(v), x2: width - right, y2: y(v), class: "grid"}));
    yAxis.appendChild(svg("text", {x: left - 6, y: y(v) + 4, class: "tick", "text-anchor": "end"}, rateLabel(v)));
  }
  xAxis.replaceChildren(svg("line", {x1: left, y1: top + plotH, x2: width - right, y2: top + plotH, class: "axis"}));
  for (const [t, label] of r.length > 1 ? timeTicks(first, last) : []) {
    xAxis.appendChild(svg("line", {x1: x(t), y1: top + plotH, x2: x(t), y2: top + plotH + 4, class: "axis"}));
    xAxis.appendChild(svg("text", {x: x(t), y: top + plotH + 16, class: "tick", "text-anchor": "middle"}, label));
  }
  const line = (k) => r.map((p) => `${x(p[0]).toFixed(1)},${y(p[k]).toFixed(1)}`).join(" ");
  document.getElementById("chart-in").setAttribute("points", line(1));
  document.getElementById("chart-out").setAttribute("points", line(2));
  document.getElementById("chart-empty").textContent = r.length ? "" : "no samples yet";

  const end = history.length ? history[history.length - 1] : [0, 0, 0];
  chart.dataset.samples = history.length;
  chart.dataset.inTotal = end[1];
  chart.dataset.outTotal = end[2];
  chart.dataset.scaleTop = scale.top;
  chart.dataset.peak = peak;
  document.getElementById("chart-span").textContent = Math.round((last - first) / 1000);
  document.getElementById("chart-peak").textContent = rateLabel(peak);
}
