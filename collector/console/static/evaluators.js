// Named, versioned evaluators (docs/api-notes.md, "Online evaluation"): the list, one
// evaluator with its versions, and the form that creates one or saves a new version (a PUT),
// with "Try on records" (POST /v1/evaluators/try) before saving.

import { api, messageOf } from "./api.js";
import { asText, facts, field, goTo, h, replace, section } from "./dom.js";
import { evaluatorHref } from "./evaluations.js";
import * as fmt from "./format.js";
import { can } from "./roles.js";
import { listRow, listTable, recordHref } from "./traces.js";

// Each type and the keys of its own (the score's `name` is every type's).
const TYPES = {
  exact_match: "The output equals the expected output.",
  contains: "The output contains the expected output.",
  regex: "The output matches a regular expression.",
  json_valid: "The output is valid JSON.",
  similarity: "How close the output is to the expected output (0-1).",
  llm_judge: "A prompt of this project judges the output (a model call, priced).",
};

/** The tabs of the evaluation section: rules and evaluators. */
export function evaluationTabs(current) {
  return h(
    "nav",
    { class: "related tabs", "aria-label": "Online evaluation" },
    h("a", { href: "#/rules", "aria-current": current === "rules" ? "page" : null }, "Rules"),
    h(
      "a",
      { href: "#/evaluators", "aria-current": current === "evaluators" ? "page" : null },
      "Evaluators",
    ),
  );
}

const COLUMNS = [
  ["Name", "lead"],
  ["Type", ""],
  ["Newest version", "num"],
  ["Updated (UTC)", ""],
];

/** #/evaluators: every evaluator at its newest version. */
export async function showEvaluators(view) {
  const { data } = await api("/evaluators");
  const body = h("tbody");
  body.append(
    ...data.map((evaluator) =>
      listRow(
        COLUMNS,
        [
          h("a", { href: evaluatorHref(evaluator.name) }, evaluator.name),
          evaluator.type,
          evaluator.version,
          fmt.time(evaluator.updated_at),
        ],
        evaluatorHref(evaluator.name),
      ),
    ),
  );
  replace(
    view,
    h(
      "div",
      { class: "page-head" },
      h("h1", {}, "Evaluators"),
      can("write")
        ? h("a", { class: "button", href: "#/evaluators/+new" }, "New evaluator")
        : null,
    ),
    evaluationTabs("evaluators"),
    data.length
      ? listTable(COLUMNS, body, "Evaluators")
      : h("p", { class: "summary" }, "No evaluators yet."),
  );
}

/** #/evaluators/+new */
export async function showNewEvaluator(view) {
  replace(
    view,
    h("a", { class: "back", href: "#/evaluators" }, "← Evaluators"),
    h("h1", {}, "New evaluator"),
    evaluatorForm(null),
  );
}

/** #/evaluators/<name>: the newest definition, the edit form and every version. */
export async function showEvaluator(view, name) {
  const { data: evaluator } = await api(`/evaluators/${encodeURIComponent(name)}`);
  replace(
    view,
    h("a", { class: "back", href: "#/evaluators" }, "← Evaluators"),
    h("h1", {}, evaluator.name, " ", h("span", { class: "badge label" }, evaluator.type)),
    h(
      "div",
      { class: "detail" },
      section(
        "Newest version",
        facts([
          ["Version", String(evaluator.version)],
          ["Created (UTC)", fmt.time(evaluator.created_at)],
          ["Updated (UTC)", fmt.time(evaluator.updated_at)],
          ["Definition", h("pre", {}, asText(evaluator.definition))],
        ]),
      ),
      section(
        "Versions",
        h(
          "ol",
          { class: "versions", "aria-label": "Versions" },
          evaluator.versions.map((version) =>
            h(
              "li",
              {},
              h("strong", {}, `v${version.version}`),
              " ",
              h("span", { class: "muted" }, fmt.time(version.created_at)),
              h("pre", {}, asText(version.definition)),
            ),
          ),
        ),
      ),
      can("write")
        ? section(
            `Edit (saving makes version ${evaluator.version + 1})`,
            evaluatorForm(evaluator),
            "wide",
          )
        : null,
    ),
  );
}

/** The form of a new evaluator (`existing` null) or of a new version of one. */
function evaluatorForm(existing) {
  const definition = existing ? existing.definition : { type: "exact_match" };
  const input = (id, value, attrs = {}) =>
    h("input", { id, type: "text", value: value ?? "", ...attrs });
  const name = input("evaluator-name", existing?.name, {
    required: true,
    pattern: "[A-Za-z0-9_.:\\-]{1,100}",
    placeholder: "e.g. answer-is-json",
    disabled: Boolean(existing),
  });
  const type = h(
    "select",
    { id: "evaluator-type" },
    Object.keys(TYPES).map((kind) =>
      h("option", { value: kind, selected: kind === definition.type }, kind),
    ),
  );
  const typeHint = h("span", { class: "hint" });
  const scoreName = input("evaluator-score-name", definition.name, {
    placeholder: "default: the evaluator's name",
  });
  const pattern = input("evaluator-pattern", definition.pattern, { placeholder: "^\\d+$" });
  const prompt = input("evaluator-prompt", definition.prompt, { placeholder: "judge prompt" });
  const label = input("evaluator-label", definition.label, { placeholder: "e.g. production" });
  const version = h("input", {
    id: "evaluator-version",
    type: "number",
    min: 1,
    value: definition.version ?? "",
  });
  const categories = h(
    "textarea",
    { id: "evaluator-categories", rows: 3, placeholder: '{"good": 1, "bad": 0}' },
  );
  categories.value = definition.categories ? JSON.stringify(definition.categories) : "";
  const regexFields = h("div", { class: "type-fields" }, field("Pattern", pattern));
  const judgeFields = h(
    "div",
    { class: "type-fields" },
    field("Judge prompt", prompt, "A prompt of this project; its output is the verdict."),
    field("Label", label, "Which version of the prompt (or give a version)."),
    field("Version", version),
    field("Categories (JSON)", categories, "Each category the judge answers and its score."),
  );
  const shown = () => {
    regexFields.classList.toggle("hidden", type.value !== "regex");
    judgeFields.classList.toggle("hidden", type.value !== "llm_judge");
    replace(typeHint, TYPES[type.value]);
  };
  type.addEventListener("change", shown);
  shown();

  const body = () => {
    const out = { type: type.value };
    if (scoreName.value.trim()) out.name = scoreName.value.trim();
    if (type.value === "regex") out.pattern = pattern.value;
    if (type.value === "llm_judge") {
      if (prompt.value.trim()) out.prompt = prompt.value.trim();
      if (label.value.trim()) out.label = label.value.trim();
      if (version.value) out.version = Number(version.value);
      if (categories.value.trim()) out.categories = JSON.parse(categories.value);
    }
    return out;
  };
  const note = h("p", { class: "note", role: "status" });
  const form = h(
    "form",
    {
      class: existing ? "evaluator-form" : "evaluator-form card",
      "aria-label": existing ? "Edit evaluator" : "New evaluator",
    },
    field("Name", name, "Letters, digits and _.:- (it goes in paths)."),
    h("div", { class: "field" }, h("label", { for: "evaluator-type" }, "Type"), type, typeHint),
    field("Score name", scoreName),
    regexFields,
    judgeFields,
    tryPanel(body),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Save")),
    note,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const target = existing ? existing.name : name.value.trim();
    try {
      await api(`/evaluators/${encodeURIComponent(target)}`, { method: "PUT", body: body() });
      goTo(evaluatorHref(target), form);
    } catch (error) {
      replace(note, h("span", { class: "error", role: "alert" }, errorText(error)));
    }
  });
  return form;
}

function errorText(error) {
  return error instanceof SyntaxError ? `Categories: ${error.message}` : messageOf(error);
}

/** "Try on records": the definition as the form holds it, on records named or the newest. */
function tryPanel(definition) {
  const ids = h("input", {
    id: "try-ids",
    type: "text",
    placeholder: "record ids (empty: the 5 newest)",
  });
  const results = h("div", { class: "try-results", role: "status" });
  const run = h("button", { type: "button", class: "quiet" }, "Try on records");
  run.addEventListener("click", async () => {
    replace(results, "Trying…");
    try {
      const evaluator = definition();
      let requestIds = ids.value.split(/[\s,]+/).filter(Boolean);
      if (!requestIds.length) {
        const { data } = await api("/requests", { query: { limit: 5 } });
        requestIds = data.map((record) => record.id);
      }
      if (!requestIds.length) return replace(results, "No records to try it on yet.");
      const { data } = await api("/evaluators/try", {
        method: "POST",
        body: { evaluator, request_ids: requestIds },
      });
      replace(results, trialTable(data));
    } catch (error) {
      replace(results, h("span", { class: "error", role: "alert" }, errorText(error)));
    }
  });
  return h(
    "fieldset",
    { class: "try" },
    h("legend", {}, "Try before saving (nothing is saved; a judge's calls are made and priced)"),
    field("Records", ids),
    run,
    results,
  );
}

/**
 * The verdicts of a trial: each record's output and value, or why there is none; a judge's
 * trial adds each call's cost and a link to the judge's record.
 */
export function trialTable(items) {
  const judged = items.some((item) => item.judge_request_id || item.cost_usd !== null);
  const columns = [
    ["Record", "lead"],
    ["Output", ""],
    ["Value", ""],
    ...(judged
      ? [
          ["Cost", "num"],
          ["Judge's record", ""],
        ]
      : []),
  ];
  const judgeCells = (item) => [
    item.cost_usd === null || item.cost_usd === undefined
      ? h("span", { class: "muted" }, "—")
      : fmt.cost(item.cost_usd),
    item.judge_request_id
      ? h(
          "a",
          { href: recordHref(item.judge_request_id), class: "mono cut judge-record" },
          item.judge_request_id,
        )
      : h("span", { class: "muted" }, "no call"),
  ];
  const body = h("tbody");
  body.append(
    ...items.map((item) =>
      listRow(
        columns,
        [
          h("a", { href: recordHref(item.request_id), class: "mono" }, item.request_id),
          h("span", { class: "cut" }, item.output === null ? "—" : asText(item.output)),
          item.error
            ? h("span", { class: "error" }, item.error)
            : h("strong", {}, asText(item.value)),
          ...(judged ? judgeCells(item) : []),
        ],
        recordHref(item.request_id),
      ),
    ),
  );
  return listTable(columns, body, "Trial verdicts", "trial");
}
