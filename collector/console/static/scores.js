// Scores in the console: badges of a record's means, the scores of one record, trace or
// session, the reviewer's form (thumbs, a number or a category from the score config, comment
// and correction) and the review queue. Scores are posted through POST /v1/scores with source
// "annotation", on a record (request_id), a whole trace (trace_id) or a whole session
// (session_id: a conversation, its records' metadata.session_id).

import { api, messageOf, session } from "./api.js";
import { facts, field, h, longText, replace, section } from "./dom.js";
import * as fmt from "./format.js";
import { can } from "./roles.js";

/** A score's value as text: booleans as true/false, numbers to three decimals at most. */
export function scoreText(value) {
  if (value === true) return "true";
  if (value === false) return "false";
  if (typeof value === "number") return String(Math.round(value * 1000) / 1000);
  return String(value);
}

/**
 * A list item's mean of score `name` as its badge says it: a boolean score's mean (true = 1)
 * is "true" (all true), "false" (all false) or the share of true ("67% true"); any other
 * as `scoreText`.
 */
function meanText(value, dataType) {
  if (dataType !== "boolean" || typeof value !== "number") return scoreText(value);
  if (value >= 1 || value <= 0) return String(value >= 1);
  return `${Math.round(value * 100)}% true`;
}

/** A score badge's classes: a boolean one is green (all true) or red (all false). */
function badgeClass(value, dataType = null) {
  const bool = typeof value === "boolean" || (dataType === "boolean" && typeof value === "number");
  if (bool && Number(value) >= 1) return "badge score good";
  if (bool && Number(value) <= 0) return "badge score bad";
  return "badge score";
}

// The data type of each score name, as far as the console has learnt it: a list item's means
// are numbers for numeric and boolean scores alike, so a boolean's badge needs the name's type
// (its score config's, else its newest score's). Kept per API key or chosen project.
let typesOf = { key: null, known: new Map(), asked: new Map(), configs: null };

/** The types learnt with the key signed in now (a new key starts afresh). */
function currentTypes() {
  const owner = session.key || `project:${session.project}`;
  if (typesOf.key !== owner) {
    typesOf = { key: owner, known: new Map(), asked: new Map(), configs: null };
  }
  return typesOf;
}

/** Score `name`'s data type: from its config, else from its newest score; null if unknown. */
function scoreType(name) {
  const types = currentTypes();
  if (!types.asked.has(name)) {
    types.asked.set(
      name,
      (async () => {
        types.configs ??= scoreConfigs();
        const configs = await types.configs;
        let type = configs.get(name)?.data_type ?? null;
        if (type === null) {
          try {
            const { data } = await api("/scores", { query: { name, limit: 1 } });
            type = data[0]?.data_type ?? null;
          } catch {
            // Unknown: the badge keeps its number.
          }
        }
        types.known.set(name, type);
        return type;
      })(),
    );
  }
  return types.asked.get(name);
}

/** Note that score `name` is of `dataType` (a score just saved). */
function noteType(name, dataType) {
  const types = currentTypes();
  types.known.set(name, dataType);
  types.asked.set(name, Promise.resolve(dataType));
}

function scoreBadge(name, value) {
  const known = currentTypes().known.get(name);
  const badge = h("span", {
    class: badgeClass(value, known),
  });
  const show = (dataType) => {
    badge.className = badgeClass(value, dataType);
    badge.textContent = `${name} ${meanText(value, dataType)}`;
  };
  show(known ?? null);
  // A number of a name whose type is not known yet: shown as it is, then as its type says.
  if (known === undefined && typeof value === "number") scoreType(name).then(show);
  return badge;
}

/** A list item's `scores` ({name: mean}) as one badge per name; nothing when it has none. */
export function scoreBadges(means) {
  // By name, so a row's badges keep their places whatever order the API gives.
  const entries = Object.entries(means || {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  if (entries.length === 0) return null;
  return h(
    "span",
    { class: "score-badges" },
    entries.map(([name, value]) => scoreBadge(name, value)),
  );
}

// A session's page, as the router takes it (sessions.js links the same way).
const sessionHref = (sessionId) => `#/sessions/${encodeURIComponent(sessionId)}`;

/**
 * What a score judges when that is not the page's own subject (`here`: "record", "trace" or
 * "session"): a trace's score on a record's page, a session's (a link to it) anywhere but
 * its own page. A session's score has no record: never a link to one.
 */
function targetNote(score, here) {
  if (score.session_id && here !== "session") {
    return h(
      "span",
      { class: "muted score-target" },
      "on the session ",
      h("a", { href: sessionHref(score.session_id), title: score.session_id }, score.session_id),
    );
  }
  if (score.trace_id && !score.request_id && here === "record") {
    return h("span", { class: "muted" }, "on the trace");
  }
  return null;
}

/** One score as the detail shows it: name and value, then source, time, comment, correction. */
function scoreItem(score, here) {
  return h(
    "li",
    { class: "score-item", "data-score-id": score.id },
    h(
      "p",
      { class: "score-head" },
      h("span", { class: badgeClass(score.value) }, `${score.name} ${scoreText(score.value)}`),
      h("span", { class: "muted" }, `${score.source} · ${fmt.time(score.created_at)}`),
      targetNote(score, here),
    ),
    facts([
      ["Comment", score.comment ? longText(score.comment) : ""],
      ["Correction", score.correction ? longText(score.correction, "correction") : ""],
    ]),
  );
}

function scoreList(list, scores, here) {
  replace(
    list,
    scores.length
      ? scores.map((score) => scoreItem(score, here))
      : h("li", { class: "muted none" }, "No scores yet."),
  );
}

/** The score configs by name (GET /v1/score-configs); none when the call fails. */
export async function scoreConfigs() {
  try {
    const { data } = await api("/score-configs");
    return new Map(data.map((config) => [config.name, config]));
  } catch {
    return new Map();
  }
}

/**
 * The "Scores" card of one record: its scores (the detail's `scores`, newest first) and the
 * reviewer's form. `options.name` fixes the score name (the review queue); `options.onSaved`
 * runs after a score is saved.
 */
export function scoresSection(record, configs, options = {}) {
  return scoresCard({ request_id: record.id }, record.scores || [], configs, options);
}

/**
 * The "Scores" card of a trace's page: the means over the trace and its records (`means`, the
 * trace's `scores`), the scores given to the trace itself (GET /v1/scores?trace_id=, newest
 * first) and the reviewer's form, whose score judges the whole trace.
 */
export async function traceScoresSection(traceId, means, configs) {
  return ownScoresSection({ trace_id: traceId }, "On the trace", means, configs);
}

/**
 * The "Scores" card of a session's page: the means over the session, its records and their
 * traces (`means`, the session's `scores`), the scores given to the session itself
 * (GET /v1/scores?session_id=, newest first: a conversation's own judgements, with their
 * comments and corrections) and the reviewer's form, whose score judges the whole session.
 */
export async function sessionScoresSection(sessionId, means, configs) {
  return ownScoresSection({ session_id: sessionId }, "On the session", means, configs);
}

/** A trace's or a session's card: its means, the scores on `target` itself, the form. */
async function ownScoresSection(target, heading, means, configs) {
  let scores = [];
  let problem = null;
  try {
    scores = (await api("/scores", { query: { ...target, limit: 100 } })).data;
  } catch (error) {
    problem = h("p", { class: "error", role: "alert" }, messageOf(error));
  }
  const badges = scoreBadges(means);
  const lead = [
    badges
      ? h("p", { class: "score-means" }, h("span", { class: "muted" }, "Means: "), badges)
      : null,
    problem,
    h("h3", {}, heading),
  ];
  return scoresCard(target, scores, configs, {}, lead);
}

function scoresCard(target, given, configs, options, lead = null) {
  const list = h("ol", { class: "scores", "aria-label": "Scores" });
  const scores = [...given];
  const here = "trace_id" in target ? "trace" : "session_id" in target ? "session" : "record";
  scoreList(list, scores, here);
  // A viewer reads scores and gives none: no form to be refused.
  const form = can("score")
    ? scoreForm(target, configs, options, (score) => {
        scores.unshift(score);
        scoreList(list, scores, here);
        options.onSaved?.(score);
      })
    : null;
  return section("Scores", [lead, list, form], "scores-card");
}

const TYPES = [
  ["boolean", "Thumbs"],
  ["numeric", "Number"],
  ["categorical", "Category"],
];

/** The reviewer's form. Enter submits from any control but the correction (Ctrl+Enter there). */
function scoreForm(target, configs, options, saved) {
  const names = h(
    "datalist",
    { id: "score-names" },
    [...configs.keys()].map((name) => h("option", { value: name })),
  );
  const name = h("input", {
    id: "score-name",
    name: "name",
    type: "text",
    list: "score-names",
    required: true,
    maxlength: 100,
    value: options.name || "",
    readonly: options.name ? true : null,
  });
  const type = h(
    "select",
    { id: "score-type", name: "data_type" },
    TYPES.map(([value, label]) => h("option", { value }, label)),
  );
  const valueBox = h("div", { class: "score-value" });
  const comment = h("input", { id: "score-comment", name: "comment", type: "text" });
  const correction = h("textarea", { id: "score-correction", name: "correction", rows: 3 });
  const note = h("p", { class: "note", role: "status" });
  const submit = h("button", { type: "submit" }, "Save score");
  let valueOf = () => undefined;

  // The value's control follows the type: the config's when the name has one.
  const showValue = () => {
    const config = configs.get(name.value.trim());
    if (config) type.value = config.data_type;
    type.disabled = Boolean(config);
    valueOf = renderValue(valueBox, type.value, config);
  };
  name.addEventListener("input", showValue);
  type.addEventListener("change", showValue);
  showValue();

  const form = h(
    "form",
    { class: "score-form", "aria-label": "Add a score" },
    h("h3", {}, "Add a score"),
    names,
    h("div", { class: "score-fields" }, field("Score name", name), field("Type", type)),
    valueBox,
    field("Comment", comment),
    field("Correction", correction, "What the output should have been (Ctrl+Enter saves)"),
    h("div", { class: "actions" }, submit),
    note,
  );
  form.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || event.isComposing) return;
    const inText = event.target instanceof HTMLTextAreaElement;
    if (event.target instanceof HTMLButtonElement) return;
    if (inText && !(event.ctrlKey || event.metaKey)) return;
    event.preventDefault();
    form.requestSubmit();
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const value = valueOf();
    note.className = "note";
    note.setAttribute("role", "status");
    if (!name.value.trim()) return replace(note, "Name the score first.");
    if (value === undefined) return replace(note, "Choose a value first.");
    submit.disabled = true;
    replace(note, "Saving…");
    const body = {
      ...target,
      name: name.value.trim(),
      value,
      data_type: type.value,
      source: "annotation",
    };
    if (comment.value.trim()) body.comment = comment.value.trim();
    if (correction.value.trim()) body.correction = correction.value;
    try {
      const { data } = await api("/scores", { method: "POST", body });
      comment.value = "";
      correction.value = "";
      showValue();
      noteType(data.name, data.data_type);
      replace(note, `Saved ${data.name} ${scoreText(data.value)}.`);
      saved(data);
    } catch (error) {
      note.className = "note error";
      note.setAttribute("role", "alert");
      replace(note, messageOf(error));
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}

/** Fill `box` with the control of a value of `dataType`; return a reader of its value. */
function renderValue(box, dataType, config) {
  if (dataType === "boolean") {
    const choice = (value, label) => {
      const input = h("input", { type: "radio", name: "score-thumb", value: String(value) });
      return h("label", { class: `thumb ${value ? "up" : "down"}` }, input, label);
    };
    const group = h(
      "fieldset",
      { class: "thumbs" },
      h("legend", {}, "Value"),
      choice(true, "▲ Good"),
      choice(false, "▼ Bad"),
    );
    replace(box, group);
    return () => {
      const checked = group.querySelector("input:checked");
      return checked ? checked.value === "true" : undefined;
    };
  }
  if (dataType === "categorical" && config?.categories?.length) {
    const select = h(
      "select",
      { id: "score-value", name: "value" },
      h("option", { value: "" }, "Choose…"),
      config.categories.map((category) => h("option", { value: category }, category)),
    );
    replace(box, field("Value", select));
    return () => select.value || undefined;
  }
  if (dataType === "categorical") {
    const input = h("input", { id: "score-value", name: "value", type: "text" });
    replace(box, field("Value", input));
    return () => input.value.trim() || undefined;
  }
  const range = config && (config.min != null || config.max != null);
  const input = h("input", {
    id: "score-value",
    name: "value",
    type: "number",
    step: "any",
    min: config?.min ?? null,
    max: config?.max ?? null,
  });
  const hint = range ? `from ${config.min ?? "any"} to ${config.max ?? "any"}` : "";
  replace(box, field("Value", input, hint));
  return () => (input.value.trim() === "" ? undefined : Number(input.value));
}
