// Two versions' outcomes over one window, beside their diff: records, error rate, p50 and p95
// latency, cost, and each score's mean, so "is version 4 better than 3?" is one page. Every
// figure is `GET /v1/requests/analytics` for the prompt, grouped by version (one call per
// metric, one per score name), as any client could ask it.

import { api } from "./api.js";
import { h } from "./dom.js";
import * as fmt from "./format.js";

/** The windows offered: [days, link text]; the first is the default. */
export const WINDOWS = [
  [30, "Last 30 days"],
  [7, "Last 7 days"],
  [1, "Last 24 hours"],
];

/**
 * The score names to compare: the project's score configs and the names of its newest 100
 * scores (there is no route listing the names scored on one prompt). A name with no score on
 * either version is left out of the table.
 */
async function scoreNames() {
  const [{ data: configs }, { data: scores }] = await Promise.all([
    api("/score-configs"),
    api("/scores", { query: { limit: 100 } }),
  ]);
  return [...new Set([...configs.map((c) => c.name), ...scores.map((s) => s.name)])].sort();
}

/** Per version (by its number as text) the group of an analytics answer. */
function byVersion(result) {
  return Object.fromEntries(result.data.groups.map((group) => [group.name, group]));
}

/** The figures of versions `a` and `b` of prompt `name` over the last `days` days. */
async function outcomes(name, days) {
  const start = new Date(Date.now() - days * 86_400_000).toISOString();
  const ask = (metric, extra = {}) =>
    api("/requests/analytics", {
      query: { metric, group_by: "version", prompt_name: name, start_date: start, ...extra },
    });
  const names = await scoreNames();
  const [cost, errors, latency, ...scores] = await Promise.all([
    ask("cost"),
    ask("errors"),
    ask("latency"),
    ...names.map((score) => ask("score", { score_name: score })),
  ]);
  return {
    period: cost.data.period,
    unpriced: cost.data.cost_unknown_records ?? 0,
    cost: byVersion(cost),
    errors: byVersion(errors),
    latency: byVersion(latency),
    scores: names.map((score, i) => [score, byVersion(scores[i])]),
  };
}

// How a change reads: lower is better for errors, latency and cost per record; higher for a
// score. A total (cost) follows the traffic, so its change is neither.
const LOWER_BETTER = -1;
const HIGHER_BETTER = 1;
const NEITHER = 0;

function changeCell(before, after, better, format) {
  if (before === null || after === null) return h("td", { class: "num muted" }, "—");
  const delta = after - before;
  const sign = delta > 0 ? "+" : delta < 0 ? "−" : "±";
  const verdict = delta === 0 || better === NEITHER ? "" : delta * better > 0 ? "better" : "worse";
  return h(
    "td",
    { class: `num change ${verdict}`.trim(), title: verdict || "no change" },
    `${sign}${format(Math.abs(delta))}`,
  );
}

function row(label, values, better, format) {
  const [a, b] = values;
  const cell = (value) => h("td", { class: "num" }, value === null ? "—" : format(value));
  return h(
    "tr",
    {},
    h("th", { scope: "row" }, label),
    cell(a),
    cell(b),
    better === null ? h("td", {}) : changeCell(a, b, better, format),
  );
}

const percent = (value) => `${(value * 100).toFixed(1)}%`;
const ms = (value) => fmt.duration(Math.round(value));
const mean = (value) => (Math.round(value * 1000) / 1000).toString();

/**
 * The outcomes table of versions `from` and `to` (numbers) of prompt `name` over the last
 * `days` days, with the window's links (`hrefOf(days)`).
 */
export async function outcomesCard(name, from, to, days, hrefOf) {
  const figures = await outcomes(name, days);
  const pick = (group, read) => [from, to].map((v) => (group[v] ? read(group[v]) : null));
  // A version with no record in the window has 0 records (and no other figure).
  const records = pick(figures.cost, (g) => g.count).map((n) => n ?? 0);
  const withRecords = (read) => (g) => (g.count ? read(g) : null);
  const rows = [
    row("Records", records, null, fmt.count),
    row(
      "Error rate",
      pick(figures.errors, withRecords((g) => g.value / g.count)),
      LOWER_BETTER,
      percent,
    ),
    row("p50 latency", pick(figures.latency, (g) => g.p50 ?? null), LOWER_BETTER, ms),
    row("p95 latency", pick(figures.latency, (g) => g.p95 ?? null), LOWER_BETTER, ms),
    row("Cost", pick(figures.cost, (g) => g.value), NEITHER, fmt.cost),
    row(
      "Cost per record",
      pick(figures.cost, withRecords((g) => g.value / g.count)),
      LOWER_BETTER,
      fmt.cost,
    ),
  ];
  for (const [score, groups] of figures.scores) {
    const means = pick(groups, withRecords((g) => g.value));
    if (means.every((m) => m === null)) continue;
    const counts = pick(groups, (g) => g.count).map((n) => n ?? 0);
    rows.push(
      row(
        h(
          "span",
          {},
          `${score} (mean)`,
          h("span", { class: "score-count" }, `${counts.join(" / ")} scores`),
        ),
        means,
        HIGHER_BETTER,
        mean,
      ),
    );
  }
  const links = h(
    "nav",
    { class: "ranges", "aria-label": "Window" },
    WINDOWS.map(([n, text]) =>
      h(
        "a",
        {
          class: "button quiet small",
          href: hrefOf(n),
          "aria-current": n === days ? "page" : null,
        },
        text,
      ),
    ),
  );
  const { start, end } = figures.period;
  return [
    links,
    h(
      "p",
      { class: "muted window" },
      `Records created ${fmt.time(start)} to ${fmt.time(end)} (UTC).`,
    ),
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "outcomes" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", { scope: "col" }, ""),
            h("th", { scope: "col", class: "num" }, `v${from}`),
            h("th", { scope: "col", class: "num" }, `v${to}`),
            h("th", { scope: "col", class: "num" }, "Change"),
          ),
        ),
        h("tbody", {}, rows),
      ),
    ),
    figures.unpriced
      ? h(
          "p",
          { class: "muted unpriced-note" },
          `${fmt.count(figures.unpriced)} records of this prompt in the window have no ` +
            "price: they count as $0 here.",
        )
      : null,
    records.every((n) => !n)
      ? h("p", { class: "muted" }, "Neither version has records in this window.")
      : null,
  ];
}
