// Evaluation rules (docs/api-notes.md, "Online evaluation"): the list with each rule's
// decisions of the last 24 h by kind, and the form that creates or edits one, with a preview
// of what its mapping gives on a real record that passes its filter.

import { api, messageOf } from "./api.js";
import { asText, field, goTo, h, replace } from "./dom.js";
import { DECISIONS, decisionBadge, ruleHref } from "./evaluations.js";
import { evaluationTabs, trialTable } from "./evaluators.js";
import * as fmt from "./format.js";
import { can } from "./roles.js";
import { listRow, listTable } from "./traces.js";

const COLUMNS = [
  ["Name", "lead"],
  ["Evaluator", ""],
  ["Target", ""],
  ["Enabled", ""],
  ["Last 24 h", ""],
];

/** The non-zero counts of a rule as badges ("none" when it decided nothing). */
export function countBadges(counts) {
  const found = DECISIONS.filter((kind) => counts?.[kind]);
  if (!found.length) return h("span", { class: "muted" }, "none");
  return h(
    "span",
    { class: "counts" },
    found.map((kind) =>
      h("span", { class: "count" }, decisionBadge(kind), " ", fmt.count(counts[kind])),
    ),
  );
}

/** #/rules: every rule, newest first. */
export async function showRules(view) {
  const { data } = await api("/evaluation-rules", { query: { limit: 100 } });
  const body = h("tbody");
  body.append(
    ...data.map((rule) =>
      listRow(
        COLUMNS,
        [
          h("a", { href: ruleHref(rule.id) }, rule.name),
          `${rule.evaluator}${rule.evaluator_version ? ` v${rule.evaluator_version}` : ""}`,
          rule.target,
          rule.enabled ? "yes" : "no",
          countBadges(rule.counts),
        ],
        ruleHref(rule.id),
      ),
    ),
  );
  replace(
    view,
    h(
      "div",
      { class: "page-head" },
      h("h1", {}, "Evaluation rules"),
      can("write") ? h("a", { class: "button", href: "#/rules/+new" }, "New rule") : null,
    ),
    evaluationTabs("rules"),
    data.length
      ? listTable(COLUMNS, body, "Evaluation rules")
      : h("p", { class: "summary" }, "No rules yet: a rule runs an evaluator on new records."),
  );
}

/** #/rules/+new and #/rules/<id>/edit */
export async function showRuleForm(view, id = null) {
  const [{ data: evaluators }, existing] = await Promise.all([
    api("/evaluators"),
    id ? api(`/evaluation-rules/${encodeURIComponent(id)}`).then((a) => a.data) : null,
  ]);
  replace(
    view,
    h("a", { class: "back", href: id ? ruleHref(id) : "#/rules" }, id ? "← Rule" : "← Rules"),
    h("h1", {}, id ? `Edit ${existing.name}` : "New evaluation rule"),
    evaluators.length
      ? ruleForm(evaluators, existing)
      : h(
          "p",
          {},
          "A rule runs an evaluator: ",
          h("a", { href: "#/evaluators/+new" }, "make one first"),
          ".",
        ),
  );
}

function ruleForm(evaluators, rule) {
  const filter = rule?.filter || {};
  const metaKey = Object.keys(filter.metadata || {})[0] || "";
  const text = (id, value, placeholder = "") =>
    h("input", { id, type: "text", value: value ?? "", placeholder });
  const number = (id, value, attrs = {}) =>
    h("input", { id, type: "number", step: "any", value: value ?? "", ...attrs });
  const select = (id, options, chosen) =>
    h(
      "select",
      { id },
      options.map(([value, label]) => h("option", { value, selected: value === chosen }, label)),
    );
  const c = {
    name: text("rule-name", rule?.name, "e.g. answers are JSON"),
    evaluator: select(
      "rule-evaluator",
      evaluators.map((e) => [e.name, `${e.name} (${e.type}, v${e.version})`]),
      rule?.evaluator,
    ),
    version: h("select", { id: "rule-evaluator-version" }),
    target: select(
      "rule-target",
      ["record", "trace", "session"].map((t) => [t, t]),
      rule?.target || "record",
    ),
    prompt: text("rule-prompt", filter.prompt_name, "any prompt"),
    promptVersion: number("rule-prompt-version", filter.version, { min: 1, step: 1 }),
    label: text("rule-label", filter.label, "e.g. production"),
    model: text("rule-model", filter.model, "any model"),
    kind: text("rule-kind", filter.kind, "e.g. llm"),
    status: select(
      "rule-status",
      [
        ["", "Any"],
        ["success", "success"],
        ["error", "error"],
      ],
      filter.status || "",
    ),
    span: text("rule-span", filter.span_name, "any span"),
    metaKey: text("rule-meta-key", metaKey, "e.g. user_tier"),
    metaValue: text("rule-meta-value", metaKey ? filter.metadata[metaKey] : "", ""),
    sampling: number("rule-sampling", rule?.sampling ?? 1, { min: 0, max: 1 }),
    delay: number("rule-delay", rule?.delay_seconds ?? 0, { min: 0, step: 1 }),
    idle: number("rule-idle", rule?.idle_seconds ?? 120, { min: 0, step: 1 }),
    budget: number("rule-budget", rule?.daily_budget_usd, { min: 0 }),
    perMinute: number("rule-per-minute", rule?.max_per_minute, { min: 1, step: 1 }),
    scoreName: text("rule-score-name", rule?.score_name, "default: the evaluator's name"),
    input: text("rule-map-input", rule?.mapping?.input, "input"),
    output: text("rule-map-output", rule?.mapping?.output, "output.content"),
    expected: text("rule-map-expected", rule?.mapping?.expected, "e.g. metadata.expected"),
    enabled: h("input", { id: "rule-enabled", type: "checkbox", checked: rule?.enabled ?? true }),
  };
  // Versions number from 1 to the newest: empty runs the newest when each evaluation runs.
  const versions = (pinned) => {
    const newest = evaluators.find((e) => e.name === c.evaluator.value)?.version ?? 0;
    const numbers = Array.from({ length: newest }, (_, i) => String(newest - i));
    replace(
      c.version,
      h("option", { value: "" }, "the newest"),
      numbers.map((v) => h("option", { value: v, selected: v === pinned }, `v${v}`)),
    );
  };
  c.evaluator.addEventListener("change", () => versions(""));
  versions(String(rule?.evaluator_version ?? ""));
  const value = (control) => control.value.trim();
  const numeric = (control) => (value(control) === "" ? undefined : Number(control.value));
  const mappingOf = () =>
    value(c.input) || value(c.output)
      ? {
          input: value(c.input),
          output: value(c.output),
          ...(value(c.expected) ? { expected: value(c.expected) } : {}),
        }
      : null;
  const filterOf = () => {
    const out = {};
    for (const [key, control] of [
      ["prompt_name", c.prompt],
      ["label", c.label],
      ["model", c.model],
      ["kind", c.kind],
      ["status", c.status],
      ["span_name", c.span],
    ]) {
      if (value(control)) out[key] = value(control);
    }
    if (numeric(c.promptVersion) !== undefined) out.version = numeric(c.promptVersion);
    if (value(c.metaKey)) out.metadata = { [value(c.metaKey)]: metaValueOf(value(c.metaValue)) };
    return out;
  };
  const body = () => ({
    name: value(c.name),
    evaluator: c.evaluator.value,
    evaluator_version: numeric(c.version) ?? null,
    target: c.target.value,
    filter: filterOf(),
    sampling: numeric(c.sampling) ?? 1,
    delay_seconds: numeric(c.delay) ?? 0,
    idle_seconds: numeric(c.idle) ?? 120,
    mapping: mappingOf(),
    score_name: value(c.scoreName) || null,
    daily_budget_usd: numeric(c.budget) ?? null,
    max_per_minute: numeric(c.perMinute) ?? null,
    enabled: c.enabled.checked,
  });
  const note = h("p", { class: "note", role: "status" });
  const preview = h("div", { class: "mapping-preview", role: "status" });
  const previewButton = h(
    "button",
    { type: "button", class: "quiet" },
    "Preview on a matching record",
  );
  previewButton.addEventListener("click", () =>
    showPreview(preview, filterOf(), mappingOf(), evaluators, c.evaluator.value),
  );
  const group = (legend, ...fields) =>
    h(
      "fieldset",
      { class: "rule-group" },
      h("legend", {}, legend),
      h("div", { class: "grid" }, fields),
    );
  const form = h(
    "form",
    { class: "rule-form card", "aria-label": rule ? "Edit rule" : "New rule" },
    group(
      "Rule",
      field("Name", c.name),
      field("Evaluator", c.evaluator),
      field("Evaluator version", c.version, "The newest: whichever is newest when it runs."),
      field("Target", c.target),
      field("Score name", c.scoreName),
      h(
        "div",
        { class: "field check" },
        c.enabled,
        h("label", { for: "rule-enabled" }, "Enabled"),
      ),
    ),
    group(
      "Filter (the request list's filters)",
      field("Prompt", c.prompt),
      field("Prompt version", c.promptVersion),
      field("Label", c.label, "Needs a prompt; not with a version."),
      field("Model", c.model),
      field("Kind", c.kind),
      field("Status", c.status),
      field("Span name", c.span),
      field("Metadata key", c.metaKey),
      field("Metadata value", c.metaValue, "true, false and numbers match as such."),
    ),
    group(
      "Sampling, timing and budget",
      field("Sampling (0-1)", c.sampling),
      field("Delay (s, records)", c.delay),
      field("Idle time (s, traces and sessions)", c.idle),
      field("Daily budget (USD)", c.budget, "Judges' spend, charged per UTC day."),
      field("Max per minute", c.perMinute),
    ),
    group(
      "Mapping (empty: input or input variables, and the output's content)",
      field("Input", c.input, "input, input_variables[.<key>], output[.<key>], metadata.<key>"),
      field("Output", c.output),
      field("Expected", c.expected),
      h("div", { class: "field" }, previewButton),
    ),
    preview,
    h("div", { class: "actions" }, h("button", { type: "submit" }, rule ? "Save" : "Create rule")),
    note,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const sent = body();
      const { data } = rule
        ? await api(`/evaluation-rules/${encodeURIComponent(rule.id)}`, {
            method: "PATCH",
            body: sent,
          })
        : await api("/evaluation-rules", { method: "POST", body: dropNulls(sent) });
      goTo(ruleHref(data.id), form);
    } catch (error) {
      replace(note, h("span", { class: "error", role: "alert" }, messageOf(error)));
    }
  });
  return form;
}

function dropNulls(body) {
  return Object.fromEntries(Object.entries(body).filter(([, v]) => v !== null));
}

/** A metadata value as typed: true, false and numbers as such, else the text. */
function metaValueOf(text) {
  if (text === "true" || text === "false") return text === "true";
  return text !== "" && !Number.isNaN(Number(text)) ? Number(text) : text;
}

/** The value of a mapping path in a record (the contract's path grammar), or undefined. */
export function valueAt(record, path) {
  const [head, ...rest] = path.split(".");
  const key = rest.join(".");
  if (head === "input" && !key) return record.input;
  if (head === "input_variables") {
    return key ? record.input_variables?.[key] : record.input_variables;
  }
  if (head === "output") return key ? record.output?.[key] : record.output;
  if (head === "metadata" && key) return record.metadata?.[key];
  return undefined;
}

/** What a mapping (null: the default one) gives on a record. */
export function mappedValues(record, mapping) {
  if (!mapping) {
    const given = record.input;
    const none = [null, undefined, ""].includes(given) || (Array.isArray(given) && !given.length);
    const input = none ? record.input_variables : given;
    const content = record.output?.content;
    return { input, output: content ?? record.output, expected: undefined };
  }
  return {
    input: valueAt(record, mapping.input),
    output: valueAt(record, mapping.output),
    expected: mapping.expected ? valueAt(record, mapping.expected) : undefined,
  };
}

/** Find the newest record the filter passes (the list's filters), show what the mapping gives
 * (computed here from the record) and, for a code evaluator, its verdict (the try route). */
async function showPreview(container, filter, mapping, evaluators, evaluatorName) {
  replace(container, "Looking for a matching record…");
  try {
    const query = {
      limit: 50,
      prompt_name: filter.prompt_name,
      status: filter.status,
      kind: filter.kind,
    };
    for (const [key, wanted] of Object.entries(filter.metadata || {})) {
      query[`metadata.${key}`] = String(wanted);
    }
    // The list filters by prompt, status, kind and metadata; model, version and span name are
    // checked here on the newest 50 it gives (a label's version is not resolved).
    const { data } = await api("/requests", { query });
    const found = data.find(
      (item) =>
        (!filter.model || item.model === filter.model) &&
        (filter.version === undefined || item.version === filter.version) &&
        (!filter.span_name || item.span_name === filter.span_name),
    );
    if (!found) return replace(container, "No recent record matches this filter.");
    const { data: record } = await api(`/requests/${encodeURIComponent(found.id)}`);
    const values = mappedValues(record, mapping);
    const shown = (v) =>
      v === undefined || v === null ? "(names nothing in this record)" : asText(v);
    const evaluator = evaluators.find((e) => e.name === evaluatorName);
    let verdict = null;
    if (evaluator && evaluator.type !== "llm_judge") {
      const { data: items } = await api("/evaluators/try", {
        method: "POST",
        body: { evaluator: evaluator.definition, request_ids: [record.id], mapping },
      });
      verdict = trialTable(items);
    }
    replace(
      container,
      h(
        "p",
        {},
        "On record ",
        h("a", { href: `#/requests/${encodeURIComponent(record.id)}`, class: "mono" }, record.id),
        ":",
      ),
      h(
        "dl",
        { class: "facts mapped" },
        h("dt", {}, "Input"),
        h("dd", {}, h("pre", {}, shown(values.input))),
        h("dt", {}, "Output"),
        h("dd", {}, h("pre", {}, shown(values.output))),
        h("dt", {}, "Expected"),
        h("dd", {}, h("pre", {}, mapping?.expected ? shown(values.expected) : "(none mapped)")),
      ),
      verdict,
    );
  } catch (error) {
    replace(container, h("span", { class: "error", role: "alert" }, messageOf(error)));
  }
}
