// Analytics: cost, tokens, latency (p50/p95) and errors for a chosen period (dates, or a quick
// range: the last 24 hours, 7 or 30 days), over time (by day or hour, whichever fits the
// period unless chosen) or by prompt, model, status, version or a metadata key, with the
// totals beside. Four calls of GET /v1/requests/analytics, one per metric.

import { api } from "./api.js";
import { barChart, columnChart } from "./chart.js";
import { field, h, replace } from "./dom.js";
import * as fmt from "./format.js";
import { environmentField } from "./environments.js";
import { filterForm } from "./paging.js";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** Quick ranges: [route value, link text, length]. */
const RANGES = [
  ["24h", "Last 24 h", DAY],
  ["7d", "Last 7 days", 7 * DAY],
  ["30d", "Last 30 days", 30 * DAY],
];
// The API's period when none is given; columns by hour fit a period of up to two days (48
// columns), by day anything longer: 720 hourly columns over 30 days were hairlines.
const DEFAULT_PERIOD = 30 * DAY;
const MOST_HOURS = 2 * DAY;

const GROUPINGS = [
  ["", "time"],
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
    total: costTotal,
    text: (group) => fmt.cost(group.value),
    scale: (value) => fmt.cost(value),
  },
  {
    metric: "usage",
    title: "Tokens",
    total: (result) => `${fmt.count(result.total)} tokens`,
    text: (group) => fmt.count(group.value),
    scale: (value) => fmt.count(value),
    whole: true,
  },
  {
    metric: "latency",
    title: "Latency (p50 / p95)",
    total: (result) => `mean ${fmt.duration(Math.round(result.total))}`,
    text: (group) => `${fmt.duration(group.p50)} / ${fmt.duration(group.p95)}`,
    // Seconds from 1 s up: "25 s" fits the scale's margin where "25,000 ms" does not.
    scale: (value) => (value >= 1000 ? `${fmt.count(value / 1000)} s` : fmt.duration(value)),
    plot: (group) => ({ value: group.p95 ?? 0, inner: group.p50 ?? 0 }),
    // Colour keys: over time a p95 column holds its p50; grouped, the bars are the p95.
    legend: (overTime) =>
      overTime
        ? [
            ["p95", ""],
            ["p50", "inner"],
          ]
        : [["p95", ""]],
  },
  {
    metric: "errors",
    title: "Errors",
    total: (result) => `${fmt.count(result.total)} ${result.total === 1 ? "error" : "errors"}`,
    text: (group) => fmt.count(group.value),
    scale: (value) => fmt.count(value),
    whole: true,
  },
];

/**
 * The cost total, and how many records of the period it leaves out for want of a price: "—"
 * when no record had one (a "$0" there would read as free).
 */
function costTotal(result) {
  const unknown = result.cost_unknown_records ?? 0;
  if (unknown === 0) return fmt.cost(result.total);
  const records = result.groups.reduce((sum, group) => sum + group.count, 0);
  const noun = unknown === 1 ? "record" : "records";
  return [
    records > unknown
      ? fmt.cost(result.total)
      : h("span", { title: `Cost unknown: ${fmt.NO_PRICE}` }, "—"),
    h(
      "span",
      { class: "unpriced", title: `${fmt.NO_PRICE}: not counted in the total` },
      `${fmt.count(unknown)} ${noun} with no price`,
    ),
  ];
}

/** The period the route asks for: its dates, else its quick range, else the API's default. */
function period(chosen, now = Date.now()) {
  const range = RANGES.find(([value]) => value === chosen.get("range"));
  const [startDate, endDate] = [chosen.get("start_date"), chosen.get("end_date")];
  if (!startDate && !endDate && range) {
    // To the hour: the same range asked twice within an hour reads the same buckets.
    const start = new Date(Math.floor((now - range[2]) / HOUR) * HOUR);
    return { start_date: start.toISOString(), end_date: undefined, length: range[2] };
  }
  const end = endDate ? Date.parse(endDate) + DAY : now;
  const start = startDate ? Date.parse(startDate) : end - DEFAULT_PERIOD;
  return { start_date: startDate, end_date: endDate, length: end - start };
}

/** #/analytics?start_date=&end_date=&group_by=&meta_key=&prompt_name=&model=&score_name= */
export async function showAnalytics(view, chosen) {
  const asked = period(chosen);
  const grouping = chosen.get("group_by") || (asked.length <= MOST_HOURS ? "hour" : "day");
  const key = chosen.get("meta_key") || "";
  const groupBy = grouping === "metadata" ? `metadata.${key}` : grouping;
  const filters = {};
  for (const name of ["prompt_name", "model"])
    if (chosen.get(name)) filters[name] = chosen.get(name);
  const query = {
    group_by: groupBy,
    start_date: asked.start_date,
    end_date: asked.end_date,
    filters: Object.keys(filters).length ? JSON.stringify(filters) : undefined,
    environment: chosen.get("environment") || undefined,
  };
  const cards = h("div", { class: "metrics" });
  const summary = h("p", { class: "summary", role: "status" }, "Loading…");
  replace(
    view,
    h("div", { class: "page-head" }, h("h1", {}, "Analytics"), quickRanges(chosen)),
    controls(chosen, chosen.get("group_by") || ""),
    summary,
    cards,
  );
  // A score name adds the mean of that score (metric=score) after the four metrics.
  const scoreName = chosen.get("score_name") || "";
  const specs = scoreName ? [...METRICS, scoreSpec(scoreName)] : METRICS;
  const results = await Promise.all(
    specs.map(({ metric }) =>
      api("/requests/analytics", {
        query: { ...query, metric, score_name: metric === "score" ? scoreName : undefined },
      }),
    ),
  );
  const { start, end } = results[0].data.period;
  replace(
    summary,
    `${fmt.time(start)} → ${fmt.time(end)} (UTC), grouped by ${groupName(grouping, key)}.`,
  );
  replace(
    cards,
    specs.map((spec, index) => metricCard(spec, results[index].data, grouping)),
  );
}

/** A score's mean to three decimals at most ("0.75"). */
const mean = (value) => String(Math.round((value ?? 0) * 1000) / 1000);

/** The card of the mean of score `name`: each bucket or group its mean, `count` its scores. */
function scoreSpec(name) {
  return {
    metric: "score",
    title: `Score “${name}” (mean)`,
    total: (result) => {
      const scores = result.score_count ?? result.groups.reduce((sum, g) => sum + g.count, 0);
      if (!scores) return "no scores";
      const noun = scores === 1 ? "score" : "scores";
      return [
        `mean ${mean(result.total)}`,
        h("span", { class: "score-count" }, `${fmt.count(scores)} ${noun}`),
      ];
    },
    text: (group) => (group.count ? mean(group.value) : "no scores"),
    scale: mean,
    noun: "scores",
    empty: "No scores in this period.",
  };
}

/** Links to the last 24 hours, 7 and 30 days, keeping the prompt and model filters. */
function quickRanges(chosen) {
  const kept = new URLSearchParams();
  for (const name of ["prompt_name", "model", "meta_key", "score_name"]) {
    if (chosen.get(name)) kept.set(name, chosen.get(name));
  }
  const group = chosen.get("group_by");
  if (group && group !== "day" && group !== "hour") kept.set("group_by", group);
  const dated = chosen.get("start_date") || chosen.get("end_date");
  return h(
    "nav",
    { class: "ranges", "aria-label": "Quick ranges" },
    RANGES.map(([value, label]) => {
      const query = new URLSearchParams(kept);
      query.set("range", value);
      const current = !dated && chosen.get("range") === value;
      const attrs = { class: "button quiet", href: `#/analytics?${query}` };
      return h("a", { ...attrs, "aria-current": current ? "page" : null }, label);
    }),
  );
}

function groupName(grouping, key) {
  if (grouping === "metadata") return `metadata “${key}”`;
  return GROUPINGS.find(([value]) => value === grouping)[1];
}

function controls(chosen, grouping) {
  const input = (name, type = "text", placeholder = "") =>
    h("input", {
      id: `analytics-${name}`,
      name,
      type,
      value: chosen.get(name) || "",
      placeholder,
    });
  // The quick range travels with the form (dates typed in win over it).
  const range = h("input", { type: "hidden", name: "range", value: chosen.get("range") || "" });
  const group = h(
    "select",
    { id: "analytics-group_by", name: "group_by" },
    GROUPINGS.map(([value, label]) => h("option", { value, selected: value === grouping }, label)),
  );
  return filterForm("#/analytics", "Choose the period and grouping", [
    field("From", input("start_date", "date")),
    field("To", input("end_date", "date")),
    field("Group by", group),
    field("Metadata key", input("meta_key", "text", "e.g. env")),
    field("Prompt", input("prompt_name", "text", "any prompt")),
    field("Model", input("model", "text", "any model")),
    field("Score name", input("score_name", "text", "e.g. thumbs")),
    environmentField(chosen, "analytics-environment"),
    range,
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
      h("div", {}, chart, unpricedNote(result)),
    ),
  );
}

/** Under a cost chart with unpriced records: their columns and bars hold them as $0. */
function unpricedNote(result) {
  const unknown = result.cost_unknown_records ?? 0;
  if (unknown === 0) return null;
  const which =
    unknown === 1
      ? "1 record has no price for its model"
      : `${fmt.count(unknown)} records have no price for their model`;
  return h("p", { class: "muted unpriced-note" }, `${which}: counted as $0 in the chart.`);
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
  if (result.groups.length === 0) {
    return h("p", { class: "muted" }, spec.empty ?? "No requests in this period.");
  }
  const rows = result.groups.map((group) => ({
    name: group.name,
    text: spec.text(group),
    ...plotted(spec, group),
  }));
  return barChart(rows, { label: `${spec.title} by group` });
}

function timeChart(spec, result, grouping) {
  const byName = new Map(result.groups.map((group) => [group.name, group]));
  const names = buckets(result.period, grouping);
  const labelEvery = Math.ceil(names.length / 8);
  let labelledDay = null;
  const points = names.map((bucket, index) => {
    const group = byName.get(bucket) ?? { name: bucket, value: 0, count: 0, p50: 0, p95: 0 };
    let label = null;
    if (index % labelEvery === 0) {
      // An hour's label carries its date under the first column and where the day changes,
      // so a period over days reads; a day's label is its date.
      const day = bucket.slice(5, 10);
      label = grouping === "day" ? [day] : [bucket.slice(11, 16), day === labelledDay ? "" : day];
      labelledDay = day;
    }
    return {
      label,
      title: `${bucket}: ${spec.text(group)} (${fmt.count(group.count)} ${
        spec.noun ?? "requests"
      })`,
      ...plotted(spec, group),
    };
  });
  return columnChart(points, {
    label: `${spec.title} by ${grouping}`,
    scale: spec.scale,
    whole: spec.whole,
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
