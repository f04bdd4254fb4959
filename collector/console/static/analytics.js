// Analytics: cost, tokens, latency (p50/p95) and errors for a chosen period, over time (by day
// or hour) or by prompt, model, status, version or a metadata key, with the totals beside.
// Four calls of GET /v1/requests/analytics, one per metric.

import { api } from "./api.js";
import { barChart, columnChart } from "./chart.js";
import { h, replace } from "./dom.js";
import * as fmt from "./format.js";
import { filterForm } from "./paging.js";

const GROUPINGS = [
  ["day", "day"],
  ["hour", "hour"],
  ["prompt_name", "prompt"],
  ["model", "model"],
  ["status", "status"],
  ["version", "version"],
  ["metadata", "metadata key"],
];
const MAX_BUCKETS = 24 * 62;

const METRICS = [
  {
    metric: "cost",
    title: "Cost",
    total: (result) => fmt.cost(result.total),
    text: (group) => fmt.cost(group.value),
  },
  {
    metric: "usage",
    title: "Tokens",
    total: (result) => `${fmt.count(result.total)} tokens`,
    text: (group) => fmt.count(group.value),
  },
  {
    metric: "latency",
    title: "Latency (p50 / p95)",
    total: (result) => `mean ${fmt.duration(Math.round(result.total))}`,
    text: (group) => `${fmt.duration(group.p50)} / ${fmt.duration(group.p95)}`,
    plot: (group) => ({ value: group.p95 ?? 0, inner: group.p50 ?? 0 }),
    // Colour keys: over time a p95 column holds its p50; grouped, the bars are the p95.
    legend: (overTime) => (overTime ? [["p95", ""], ["p50", "inner"]] : [["p95", ""]]),
  },
  {
    metric: "errors",
    title: "Errors",
    total: (result) => `${fmt.count(result.total)} ${result.total === 1 ? "error" : "errors"}`,
    text: (group) => fmt.count(group.value),
  },
];

/** #/analytics?start_date=&end_date=&group_by=&meta_key=&prompt_name=&model= */
export async function showAnalytics(view, chosen) {
  const grouping = chosen.get("group_by") || "day";
  const key = chosen.get("meta_key") || "";
  const groupBy = grouping === "metadata" ? `metadata.${key}` : grouping;
  const filters = {};
  for (const name of ["prompt_name", "model"]) if (chosen.get(name)) filters[name] = chosen.get(name);
  const query = {
    group_by: groupBy,
    start_date: chosen.get("start_date"),
    end_date: chosen.get("end_date"),
    filters: Object.keys(filters).length ? JSON.stringify(filters) : undefined,
  };
  const cards = h("div", { class: "metrics" });
  const period = h("p", { class: "summary", role: "status" }, "Loading…");
  replace(view, h("h1", {}, "Analytics"), controls(chosen, grouping), period, cards);
  const results = await Promise.all(
    METRICS.map(({ metric }) => api("/requests/analytics", { query: { ...query, metric } })),
  );
  const { start, end } = results[0].data.period;
  replace(period, `${fmt.time(start)} → ${fmt.time(end)} (UTC), grouped by ${groupName(grouping, key)}.`);
  replace(cards, METRICS.map((spec, index) => metricCard(spec, results[index].data, grouping)));
}

function groupName(grouping, key) {
  if (grouping === "metadata") return `metadata “${key}”`;
  return GROUPINGS.find(([value]) => value === grouping)[1];
}

function controls(chosen, grouping) {
  const input = (name, type = "text", placeholder = "") =>
    h("input", { id: `analytics-${name}`, name, type, value: chosen.get(name) || "", placeholder });
  const field = (label, control) =>
    h("div", { class: "field" }, h("label", { for: control.id }, label), control);
  const group = h(
    "select",
    { id: "analytics-group_by", name: "group_by" },
    GROUPINGS.map(([value, label]) => h("option", { value, selected: value === grouping }, label)),
  );
  return filterForm("#/analytics", "Choose the period and grouping", [
    field("From", input("start_date", "date")),
    field("To", input("end_date", "date")),
    field("Group by", group),
    field("Metadata key", input("meta_key", "text", "with group by metadata key")),
    field("Prompt", input("prompt_name", "text", "any prompt")),
    field("Model", input("model", "text", "any model")),
  ]);
}

function metricCard(spec, result, grouping) {
  const overTime = grouping === "day" || grouping === "hour";
  const chart = overTime ? timeChart(spec, result, grouping) : groupChart(spec, result);
  return h(
    "section",
    { class: `card metric metric-${spec.metric}` },
    h("h2", {}, spec.title),
    h(
      "div",
      { class: "metric-body" },
      h("div", {}, h("p", { class: "total" }, spec.total(result)), legend(spec, overTime)),
      chart,
    ),
  );
}

function legend(spec, overTime) {
  if (!spec.legend) return null;
  return h(
    "p",
    { class: "legend" },
    spec.legend(overTime).map(([name, kind]) => h("span", { class: `key ${kind}` }, name)),
  );
}

function plotted(spec, group) {
  return spec.plot ? spec.plot(group) : { value: group.value };
}

function groupChart(spec, result) {
  if (result.groups.length === 0) return h("p", { class: "muted" }, "No requests in this period.");
  const rows = result.groups.map((group) => ({
    name: group.name,
    text: spec.text(group),
    ...plotted(spec, group),
  }));
  return barChart(rows, { label: `${spec.title} by group` });
}

function timeChart(spec, result, grouping) {
  const byName = new Map(result.groups.map((group) => [group.name, group]));
  const points = buckets(result.period, grouping).map((bucket) => {
    const group = byName.get(bucket) ?? { name: bucket, value: 0, count: 0, p50: 0, p95: 0 };
    return {
      label: grouping === "day" ? bucket.slice(5) : bucket.slice(11, 16),
      title: `${bucket}: ${spec.text(group)} (${fmt.count(group.count)} requests)`,
      ...plotted(spec, group),
    };
  });
  return columnChart(points, {
    label: `${spec.title} by ${grouping}`,
    labelEvery: Math.ceil(points.length / 10),
  });
}

/** Every day (YYYY-MM-DD) or hour (YYYY-MM-DDTHH:00:00Z) of the period, as the API names them. */
function buckets(period, grouping) {
  const step = grouping === "day" ? 86_400_000 : 3_600_000;
  const first = new Date(period.start);
  if (grouping === "day") first.setUTCHours(0, 0, 0, 0);
  else first.setUTCMinutes(0, 0, 0);
  const names = [];
  for (let t = first.getTime(); t <= new Date(period.end).getTime(); t += step) {
    if (names.length === MAX_BUCKETS) break;
    const iso = new Date(t).toISOString();
    names.push(grouping === "day" ? iso.slice(0, 10) : `${iso.slice(0, 13)}:00:00Z`);
  }
  return names;
}
