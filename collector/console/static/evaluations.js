// Online evaluation's decisions as the console shows them (docs/api-notes.md, "Online
// evaluation"): a badge per kind of decision, and the "Evaluations" card of a record's, a
// trace's and a session's page, which answers "why wasn't this scored?".

import { api } from "./api.js";
import { h, replace, section } from "./dom.js";
import * as fmt from "./format.js";
import { can } from "./roles.js";

/** Every kind of decision, in the order the console lists them. */
export const DECISIONS = [
  "scored",
  "waiting",
  "not_sampled",
  "budget_exhausted",
  "rate_limited",
  "connection_blocked",
  "error",
];

const TONE = {
  scored: "good",
  error: "bad",
  connection_blocked: "bad",
  budget_exhausted: "warn",
  rate_limited: "warn",
};

/** One decision as a coloured badge. */
export function decisionBadge(decision) {
  return h("span", { class: `badge decision ${TONE[decision] || "neutral"}` }, decision);
}

/** The route of a rule's page. */
export const ruleHref = (id) => `#/rules/${encodeURIComponent(id)}`;

/** The route of an evaluator's page. */
export const evaluatorHref = (name) => `#/evaluators/${encodeURIComponent(name)}`;

/** The "Evaluations" card: each rule's decision on this target with its reason. */
export function evaluationsSection(evaluations) {
  const list = evaluations || [];
  if (!list.length) {
    return section(
      "Evaluations",
      h("p", { class: "muted" }, "No evaluation rule has decided on this yet."),
    );
  }
  const links = {};
  const card = section(
    "Evaluations",
    h(
      "ul",
      { class: "evaluations", "aria-label": "Evaluations" },
      list.map((item) => {
        const rule = h(
          "a",
          { href: ruleHref(item.rule_id), class: "mono", title: item.rule_id },
          item.rule_id,
        );
        links[item.rule_id] = rule;
        return evaluationItem(item, rule);
      }),
    ),
  );
  ruleNames(links);
  return card;
}

/** One rule's decision: its badge, rule, evaluator, reason, time and judge's call. */
function evaluationItem(item, rule) {
  return h(
    "li",
    { class: "evaluation" },
    h(
      "div",
      { class: "evaluation-head" },
      decisionBadge(item.decision),
      rule,
      h(
        "a",
        { href: evaluatorHref(item.evaluator) },
        `${item.evaluator} v${item.evaluator_version}`,
      ),
    ),
    h("p", { class: "reason" }, item.reason || "(no reason given)"),
    h(
      "p",
      { class: "muted small" },
      `decided ${fmt.time(item.decided_at)} UTC`,
      item.cost_usd ? ` · judge cost ${fmt.cost(item.cost_usd)}` : "",
      item.judge_request_id ? " · " : "",
      item.judge_request_id
        ? h(
            "a",
            { href: `#/requests/${encodeURIComponent(item.judge_request_id)}` },
            "judge's call",
          )
        : "",
    ),
  );
}

/** Name each rule's link once the rules are read (the decisions carry only the rule's id);
 * a role that reads no rules (annotator) keeps the ids. */
async function ruleNames(links) {
  if (!can("readPrompts")) return;
  try {
    const { data } = await api("/evaluation-rules", { query: { limit: 100 } });
    for (const rule of data) {
      const link = links[rule.id];
      if (link) {
        replace(link, rule.name);
        link.classList.remove("mono");
      }
    }
  } catch {
    // The ids stay: they lead to the rules all the same.
  }
}
