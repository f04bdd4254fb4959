// Two experiments compared (issue 33): per score the two means, the mean paired delta with its
// 95% interval and whether the interval clears zero, cost and latency; then the items paired
// by id, the largest regression first (one API page at a time), each with the two outputs side
// by side and the changed words marked (diff.js).

import { api } from "./api.js";
import { diffTable } from "./diff.js";
import { asText, h, longText, replace, section } from "./dom.js";
import { compareHref, experimentHref, experimentStatus, whatRan } from "./experiments.js";
import * as fmt from "./format.js";
import { PAGE_SIZE, paged } from "./paging.js";
import { scoreBadges, scoreText } from "./scores.js";
import { listTable } from "./traces.js";

/** A signed number: "+0.25", "−0.5" (a real minus sign), "0". */
function signed(value, text = scoreText) {
  if (value === null || value === undefined) return "—";
  // A difference of float sums (0.004 − 0.004) can miss zero by 1e-18: that is no change.
  if (Math.abs(value) < 1e-9) return text(0);
  if (value > 0) return `+${text(value)}`;
  if (value < 0) return `−${text(-value)}`;
  return text(0);
}

/**
 * What a score's interval says: the candidate is better (the whole interval above zero), worse
 * (below), or the data cannot tell (it holds zero, or there is none). Scores read higher-better.
 */
function verdict(score) {
  if (score.ci_low === null || score.ci_high === null) return ["unclear", "not enough pairs"];
  if (score.ci_low > 0) return ["good", "better"];
  if (score.ci_high < 0) return ["bad", "worse"];
  return ["unclear", "no clear difference"];
}

const SCORE_COLUMNS = [
  ["Score", ""],
  ["Base", "num"],
  ["Candidate", "num"],
  ["Delta", "num"],
  ["95% interval", ""],
  ["Verdict", ""],
  ["Improved", "num"],
  ["Regressed", "num"],
  ["Unchanged", "num"],
];

function scoreRows(scores) {
  // Regressions first here too: the scores whose mean fell most lead.
  const entries = Object.entries(scores).sort(([, a], [, b]) => (a.delta ?? 0) - (b.delta ?? 0));
  return entries.map(([name, score]) => {
    const [kind, words] = verdict(score);
    const interval =
      score.ci_low === null ? "—" : `[${signed(score.ci_low)}, ${signed(score.ci_high)}]`;
    const cells = [
      h("strong", {}, name),
      score.base === null ? "—" : scoreText(score.base),
      score.candidate === null ? "—" : scoreText(score.candidate),
      h("span", { class: `delta ${kind}` }, signed(score.delta)),
      interval,
      h("span", { class: `badge verdict ${kind}` }, words),
      fmt.count(score.improved),
      fmt.count(score.regressed),
      fmt.count(score.unchanged),
    ];
    // Each cell names its column, for the phone's cards (see traces.js's listTable).
    return h(
      "tr",
      {},
      cells.map((cell, i) =>
        h(
          "td",
          { class: i === 0 ? "lead" : SCORE_COLUMNS[i][1], "data-label": SCORE_COLUMNS[i][0] },
          cell,
        ),
      ),
    );
  });
}

function costLatency(data) {
  const money = (value) => (value === null || value === undefined ? "—" : fmt.cost(value));
  const ms = (value) =>
    value === null || value === undefined ? "—" : fmt.duration(Math.round(value));
  // A delta's sign stays with its figure where a phone's narrow column wraps the text.
  const whole = (text) => h("span", { class: "figure" }, text);
  const signedMoney = (value) => whole(signed(value, (v) => fmt.cost(v)));
  const signedMs = (value) => whole(signed(value, (v) => fmt.duration(Math.round(v))));
  return h(
    "table",
    { class: "kv totals" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["", "Base", "Candidate", "Delta"].map((t) => h("th", { scope: "col" }, t)),
      ),
    ),
    h(
      "tbody",
      {},
      h(
        "tr",
        {},
        h("th", { scope: "row" }, "Cost"),
        h("td", {}, money(data.estimated_cost_usd.base)),
        h("td", {}, money(data.estimated_cost_usd.candidate)),
        h("td", {}, signedMoney(data.estimated_cost_usd.delta)),
      ),
      h(
        "tr",
        {},
        h("th", { scope: "row" }, "Latency p50"),
        h("td", {}, ms(data.latency_ms.base)),
        h("td", {}, ms(data.latency_ms.candidate)),
        h("td", {}, signedMs(data.latency_ms.delta)),
      ),
    ),
  );
}

function sideHead(title, experiment) {
  return h(
    "div",
    { class: "side-head" },
    h("span", { class: "muted" }, title),
    h("a", { href: experimentHref(experiment.id) }, experiment.name),
    " ",
    experimentStatus(experiment.status),
    h("span", { class: "muted" }, `${whatRan(experiment)} · ${fmt.time(experiment.created_at)}`),
  );
}

/** #/experiments/compare?base=ID&candidate=ID */
export async function showCompare(view, query) {
  const base = query.get("base") || "";
  const candidate = query.get("candidate") || "";
  const compare = { base, candidate };
  const [{ data: left }, { data: right }, first] = await Promise.all([
    api(`/experiments/${encodeURIComponent(base)}`),
    api(`/experiments/${encodeURIComponent(candidate)}`),
    api("/experiments/compare", { query: { ...compare, limit: PAGE_SIZE } }),
  ]);
  const data = first.data;
  const list = h("ol", {
    class: "items compare-items",
    "aria-label": "Items, largest regression first",
  });
  const results = h("div", { class: "results" });
  const scoreBody = h("tbody", {}, scoreRows(data.scores));
  replace(
    view,
    h(
      "a",
      { class: "back", href: `#/experiments?${new URLSearchParams({ dataset: left.dataset })}` },
      "← Experiments",
    ),
    h(
      "div",
      { class: "page-head" },
      h("h1", {}, "Comparison"),
      h("a", { class: "button quiet", href: compareHref(candidate, base) }, "Swap sides"),
    ),
    h("div", { class: "sides" }, sideHead("Base", left), sideHead("Candidate", right)),
    section(
      "Scores",
      Object.keys(data.scores).length
        ? [
            listTable(SCORE_COLUMNS, scoreBody, "Scores"),
            h(
              "p",
              { class: "hint" },
              "Delta: the mean of candidate − base over the items both ran. The interval is " +
                "a 95% interval of that mean: when it holds 0 the data cannot tell the two " +
                "apart.",
            ),
          ]
        : h("p", { class: "muted" }, "Neither experiment has scores."),
      "wide",
    ),
    section("Cost and latency", costLatency(data), "wide"),
    data.unmatched
      ? h(
          "p",
          { class: "note" },
          data.unmatched === 1
            ? "1 result has no pair in the other experiment and is left out."
            : `${fmt.count(data.unmatched)} results have no pair in the other experiment ` +
                "and are left out.",
        )
      : null,
    h("h2", { class: "results-title" }, "Items, largest regression first"),
    results,
  );
  // The first page is the one already fetched with the totals; "Load more" follows its cursor.
  await paged(results, list, {
    loading: "Loading items…",
    fetchPage: async (cursor) => {
      const page =
        cursor === undefined
          ? first
          : await api("/experiments/compare", { query: { ...compare, limit: PAGE_SIZE, cursor } });
      return { data: page.data.items, pagination: page.pagination };
    },
    add: (items) => list.append(...items.map((item) => itemCard(item, left, right))),
    describe: (shown, more) =>
      shown === 0 ? "No items in common." : fmt.shown(shown, "item", "items", more),
  });
}

function deltaBadges(delta) {
  const entries = Object.entries(delta || {}).sort(([, a], [, b]) => a - b);
  return entries.map(([name, value]) =>
    h(
      "span",
      { class: `badge delta ${value < 0 ? "bad" : value > 0 ? "good" : "unclear"}` },
      `${name} ${signed(value)}`,
    ),
  );
}

function itemCard(item, left, right) {
  const regressed = Object.values(item.delta || {}).some((value) => value < 0);
  const title = (label, experiment, side) => [
    `${label}: ${experiment.name} `,
    scoreBadges(side.scores),
  ];
  return h(
    "li",
    { class: `card item compared${regressed ? " regressed" : ""}`, "data-item-id": item.item_id },
    h(
      "p",
      { class: "item-head" },
      h("span", { class: "mono item-id" }, item.item_id),
      deltaBadges(item.delta),
    ),
    h(
      "div",
      { class: "pair" },
      h("div", {}, h("h3", {}, "Input variables"), longText(item.input_variables)),
      h(
        "div",
        {},
        h("h3", {}, "Expected"),
        item.expected_output === null
          ? h("p", { class: "muted" }, "none")
          : longText(item.expected_output),
      ),
    ),
    outputs(asText(item.base.output), asText(item.candidate.output), [
      title("Base", left, item.base),
      title("Candidate", right, item.candidate),
    ]),
  );
}

// The word diff is a table of (words × words) cells: past this many characters a side, the two
// outputs are shown side by side unmarked rather than stall the tab.
const DIFF_CHARS = 20000;

function outputs(before, after, [leftTitle, rightTitle]) {
  if (before.length <= DIFF_CHARS && after.length <= DIFF_CHARS) {
    return h("div", { class: "table-wrap" }, diffTable(before, after, leftTitle, rightTitle));
  }
  return h(
    "div",
    { class: "pair" },
    h("div", {}, h("h3", {}, leftTitle), longText(before, "output")),
    h("div", {}, h("h3", {}, rightTitle), longText(after, "output")),
  );
}
