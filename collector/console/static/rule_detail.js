// One evaluation rule's page (docs/api-notes.md, "Online evaluation"): its settings, its
// decisions of the last 24 h by kind (the rule's counts), a chart of its recent decisions by
// hour and kind, its judges' spend today against its daily budget, and its decisions newest
// first with their reasons and links to what they decided on.

import { api, messageOf } from "./api.js";
import { append, asText, facts, field, goTo, h, replace, section } from "./dom.js";
import { DECISIONS, decisionBadge, evaluatorHref, ruleHref } from "./evaluations.js";
import { evaluationTabs } from "./evaluators.js";
import * as fmt from "./format.js";
import { PAGE_SIZE, paged } from "./paging.js";
import { countBadges } from "./rules.js";
import { can } from "./roles.js";
import { listRow, listTable, recordHref, sessionHref } from "./traces.js";
import { traceHref } from "./trace.js";

const COLUMNS = [
  ["Decided (UTC)", ""],
  ["Decision", ""],
  ["Target", ""],
  ["Reason", "reason"],
  ["Cost", "num"],
];

const HREF = { record: recordHref, trace: traceHref, session: sessionHref };

/** #/rules/<id> */
export async function showRule(view, id) {
  const path = `/evaluation-rules/${encodeURIComponent(id)}`;
  const [{ data: rule }, recent] = await Promise.all([
    api(path),
    api(`${path}/decisions`, { query: { limit: 100 } }),
  ]);
  const body = h("tbody");
  const results = h("div", { class: "results" });
  const chosen = h(
    "select",
    { id: "decision-filter", "aria-label": "Show decisions" },
    h("option", { value: "" }, "Every decision"),
    DECISIONS.map((kind) => h("option", { value: kind }, kind)),
  );
  replace(
    view,
    h("a", { class: "back", href: "#/rules" }, "← Rules"),
    h(
      "div",
      { class: "page-head" },
      h(
        "h1",
        {},
        rule.name,
        " ",
        h("span", { class: "badge label" }, rule.enabled ? "enabled" : "disabled"),
      ),
      can("write")
        ? h(
            "div",
            { class: "actions" },
            h("a", { class: "button", href: `${ruleHref(rule.id)}/edit` }, "Edit"),
            deleteButton(path, rule),
          )
        : null,
    ),
    evaluationTabs("rules"),
    h("p", { class: "muted mono record-id" }, rule.id),
    h(
      "div",
      { class: "detail" },
      section("Settings", ruleFacts(rule)),
      section(
        "Last 24 hours",
        h("div", {}, countBadges(rule.counts), spendLine(rule, recent.data)),
      ),
      section("Decisions by hour", decisionChart(recent.data, recent.pagination.has_more), "wide"),
      can("write") && rule.target === "record" ? section("Backfill", backfillForm(path)) : null,
    ),
    h(
      "div",
      { class: "page-head decisions-head" },
      h("h2", {}, "Decisions"),
      h("div", { class: "field" }, chosen),
    ),
    results,
  );
  const list = async () => {
    body.replaceChildren();
    await paged(results, listTable(COLUMNS, body, "Decisions", "decisions"), {
      loading: "Loading…",
      fetchPage: (cursor) =>
        api(`${path}/decisions`, { query: { limit: PAGE_SIZE, cursor, decision: chosen.value } }),
      add: (items) => body.append(...items.map(decisionRow)),
      describe: (shown, more) =>
        shown ? fmt.shown(shown, "decision", "decisions", more) : "No decisions yet.",
    });
  };
  chosen.addEventListener("change", () =>
    list().catch((error) => replace(results, h("p", { class: "error" }, messageOf(error)))),
  );
  await list();
}

function ruleFacts(rule) {
  const filter = Object.keys(rule.filter || {}).length ? asText(rule.filter) : "every record";
  return facts([
    [
      "Evaluator",
      h(
        "a",
        { href: evaluatorHref(rule.evaluator) },
        `${rule.evaluator} ${rule.evaluator_version ? `v${rule.evaluator_version}` : "(newest)"}`,
      ),
    ],
    ["Target", rule.target],
    ["Score name", rule.score_name],
    ["Filter", h("pre", {}, filter)],
    ["Sampling", `${Math.round(rule.sampling * 1000) / 10}%`],
    ["Delay", rule.target === "record" ? `${rule.delay_seconds} s` : null],
    ["Idle time", rule.target === "record" ? null : `${rule.idle_seconds} s`],
    ["Mapping", rule.mapping ? h("pre", {}, asText(rule.mapping)) : "default"],
    [
      "Daily budget",
      rule.daily_budget_usd === null ? "none" : fmt.cost(rule.daily_budget_usd),
    ],
    ["Max per minute", rule.max_per_minute === null ? "no limit" : fmt.count(rule.max_per_minute)],
    [
      "Backfill",
      rule.backfill
        ? `${rule.backfill.status}: ${fmt.count(rule.backfill.done)} of ` +
          fmt.count(rule.backfill.total)
        : null,
    ],
    ["Created (UTC)", fmt.time(rule.created_at)],
  ]);
}

/** Today's (UTC) spend of the rule's judges, summed from the decisions' costs: the API gives
 * no spend figure, so a day with more than the decisions read is marked as at least that. */
function spendLine(rule, decisions) {
  const today = new Date().toISOString().slice(0, 10);
  const ofToday = decisions.filter((d) => String(d.decided_at).slice(0, 10) === today);
  const spent = ofToday.reduce((sum, d) => sum + (d.cost_usd || 0), 0);
  const partial = ofToday.length === decisions.length && decisions.length === 100;
  const spentText = `${partial ? "at least " : ""}${fmt.cost(spent)}`;
  if (rule.daily_budget_usd === null) {
    return h("p", { class: "spend" }, `Judges' spend today: ${spentText} (no daily budget).`);
  }
  const share = rule.daily_budget_usd ? Math.min(spent / rule.daily_budget_usd, 1) : 1;
  return h(
    "div",
    { class: "spend" },
    h("p", {}, `Judges' spend today: ${spentText} of ${fmt.cost(rule.daily_budget_usd)} budget.`),
    h("progress", { max: 1, value: share, "aria-label": "Spend against the daily budget" }),
    h(
      "p",
      { class: "hint" },
      "Summed from the decisions' judge costs (the API exposes no spend figure).",
    ),
  );
}

const SVG_NS = "http://www.w3.org/2000/svg";
const [WIDTH, HEIGHT, BASE, LEFT] = [420, 150, 124, 34];

function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  return append(el, children);
}

/** Columns per hour of the last 24 of the decisions read (the newest 100), stacked by kind. */
function decisionChart(decisions, more) {
  if (!decisions.length) return h("p", { class: "muted" }, "No decisions yet.");
  const hours = new Map();
  for (const d of decisions) {
    const hour = String(d.decided_at).slice(0, 13);
    if (!hours.has(hour)) hours.set(hour, {});
    const kinds = hours.get(hour);
    kinds[d.decision] = (kinds[d.decision] || 0) + 1;
  }
  // The last 24 hours (UTC), an empty column for an hour without decisions.
  const now = Date.now();
  const ordered = Array.from({ length: 24 }, (_, i) => {
    const hour = new Date(now - (23 - i) * 3_600_000).toISOString().slice(0, 13);
    return [hour, hours.get(hour) || {}];
  });
  const top = Math.max(...ordered.map(([, kinds]) => sum(kinds)), 1);
  const slot = (WIDTH - LEFT - 8) / ordered.length;
  const scale = (BASE - 8) / top;
  const columns = ordered.map(([hour, kinds], index) => {
    const x = LEFT + index * slot + slot * 0.15;
    let y = BASE;
    const segments = DECISIONS.filter((k) => kinds[k]).map((k) => {
      const height = kinds[k] * scale;
      y -= height;
      return svg("rect", { class: `segment ${k}`, x, y, width: slot * 0.7, height });
    });
    return svg(
      "g",
      { class: "column" },
      segments,
      svg("title", {}, `${hour.replace("T", " ")}:00 UTC: ${describe(kinds)}`),
      index % 4 === 3
        ? svg(
            "text",
            { x: x + slot * 0.35, y: BASE + 18, "text-anchor": "middle" },
            `${hour.slice(11, 13)}h`,
          )
        : null,
    );
  });
  const axis = [0, top].map((value) =>
    svg(
      "g",
      { class: "scale" },
      svg("line", {
        x1: LEFT,
        x2: WIDTH - 8,
        y1: BASE - value * scale,
        y2: BASE - value * scale,
        class: value ? "grid" : "axis",
      }),
      svg("text", { x: LEFT - 6, y: BASE - value * scale + 4, "text-anchor": "end" }, value),
    ),
  );
  return h(
    "div",
    {},
    svg(
      "svg",
      {
        viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
        class: "chart decisions-chart",
        role: "img",
        "aria-label": "Decisions by hour and kind",
      },
      axis,
      columns,
    ),
    h(
      "p",
      { class: "decision-legend" },
      DECISIONS.filter((k) => ordered.some(([, kinds]) => kinds[k])).map((k) =>
        h("span", { class: "key" }, h("span", { class: `swatch ${k}` }), k),
      ),
    ),
    h(
      "p",
      { class: "hint" },
      more ? "The last 24 hours (UTC) of the newest 100 decisions." : "The last 24 hours (UTC).",
    ),
  );
}

const sum = (kinds) => Object.values(kinds).reduce((a, b) => a + b, 0);
const describe = (kinds) =>
  Object.entries(kinds)
    .map(([k, n]) => `${n} ${k}`)
    .join(", ");

function decisionRow(decision) {
  const href = (HREF[decision.target_type] || recordHref)(decision.target_id);
  return listRow(
    COLUMNS,
    [
      h("a", { href }, fmt.time(decision.decided_at)),
      decisionBadge(decision.decision),
      h("span", { class: "mono" }, `${decision.target_type} ${decision.target_id}`),
      decision.reason,
      decision.cost_usd ? fmt.cost(decision.cost_usd) : "",
    ],
    href,
  );
}


function deleteButton(path, rule) {
  const button = h("button", { type: "button", class: "quiet" }, "Delete rule");
  button.addEventListener("click", async () => {
    // Its decisions go with it: ask once.
    if (!window.confirm(`Delete the rule ${rule.name} and its decisions?`)) return;
    try {
      await api(path, { method: "DELETE" });
      goTo("#/rules", button);
    } catch (error) {
      button.after(h("span", { class: "error", role: "alert" }, messageOf(error)));
    }
  });
  return button;
}

/** Decide the records of a window of days (UTC) as the live path would have. */
function backfillForm(path) {
  const day = (id) => h("input", { id, type: "date", required: true });
  const from = day("backfill-from");
  const to = day("backfill-to");
  const note = h("p", { class: "note", role: "status" });
  const form = h(
    "form",
    { class: "backfill", "aria-label": "Backfill" },
    h("p", { class: "hint" }, "Decide the records of these days (UTC), the last one included."),
    h("div", { class: "grid" }, field("From", from), field("To", to)),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Start backfill")),
    note,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const end = new Date(`${to.value}T00:00:00Z`);
    end.setUTCDate(end.getUTCDate() + 1);
    try {
      const { data } = await api(`${path}/backfill`, {
        method: "POST",
        body: { from: `${from.value}T00:00:00Z`, to: end.toISOString() },
      });
      replace(note, `Backfill ${data.status}: ${fmt.count(data.total)} records to decide.`);
    } catch (error) {
      replace(note, h("span", { class: "error", role: "alert" }, messageOf(error)));
    }
  });
  return form;
}
