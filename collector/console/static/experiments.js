// Experiments (issue 33): the list (with the pick of two to compare), one experiment's status,
// counts and summary (refreshed while it runs) above its results with per-item outputs and
// scores, and the "Run over a dataset" form of a prompt's page.

import { api, messageOf } from "./api.js";
import { datasetHref } from "./datasets.js";
import { costText, facts, field, goTo, h, longText, replace, section } from "./dom.js";
import * as fmt from "./format.js";
import { PAGE_SIZE, filterForm, paged } from "./paging.js";
import { promptHref } from "./prompt_list.js";
import { scoreBadges, scoreText } from "./scores.js";
import { listRow, listTable } from "./traces.js";
import { can } from "./roles.js";

/** The route of experiment `id`. */
export function experimentHref(id) {
  return `#/experiments/${encodeURIComponent(id)}`;
}

/** The route comparing two experiments. */
export function compareHref(base, candidate) {
  return `#/experiments/compare?${new URLSearchParams({ base, candidate })}`;
}

/** An experiment's status as a badge: running, completed (green), cancelled, failed (red). */
export function experimentStatus(status) {
  const kind = { completed: "good", failed: "bad", cancelled: "bad" }[status] || "running";
  return h("span", { class: `badge ${kind}` }, status);
}

/** What an experiment ran: "prompt v3", "prompt @production" or "client task". */
export function whatRan(experiment) {
  if (experiment.task === "client") return "task in the client's code";
  const which = experiment.version
    ? `v${experiment.version}`
    : experiment.label
      ? `@${experiment.label}`
      : "";
  return `${experiment.prompt_name} ${which}`.trim();
}

/** "12 / 40 runs, 1 error" */
function progressText(counts) {
  const errors = counts.errors
    ? `, ${fmt.count(counts.errors)} ${counts.errors === 1 ? "error" : "errors"}`
    : "";
  return `${fmt.count(counts.done)} / ${fmt.count(counts.runs)} runs${errors}`;
}

/** A number as scoreText writes it, a negative one with a real minus sign (as compare.js). */
const number = (value) => (value < 0 ? `−${scoreText(-value)}` : scoreText(value));

/**
 * A score's mean with its 95% interval: "0.75 [0.61, 0.89]". The interval is the API's
 * (t-based): with few results it can reach past the score's range, and is shown as computed.
 */
export function meanText(summary) {
  if (summary.mean === null || summary.mean === undefined) return "—";
  const interval =
    summary.ci_low === null || summary.ci_low === undefined
      ? ""
      : ` [${number(summary.ci_low)}, ${number(summary.ci_high)}]`;
  return `${number(summary.mean)}${interval}`;
}

// Names, what ran and the scores wrap within their column, so that the row fits a laptop's
// width whole: a cut "Ran" or a "Created" scrolled out of sight says nothing.
const COLUMNS = [
  ["Experiment", "wrap"],
  ["Dataset", "wrap"],
  ["Ran", "wrap"],
  ["Status", ""],
  ["Progress", "wrap"],
  ["Scores (mean)", "wrap"],
  ["Cost", "num"],
  ["Created (UTC)", "time"],
];

/** #/experiments?dataset=&prompt_name=: newest first, each row a link, two picked to compare. */
export async function showExperiments(view, filters) {
  const body = h("tbody");
  const results = h("div", { class: "results" });
  const picked = comparePicker();
  const value = (name) => filters.get(name) || "";
  const input = (name, placeholder) =>
    h("input", { id: `filter-${name}`, name, value: value(name), placeholder, type: "text" });
  replace(
    view,
    h(
      "div",
      { class: "page-head" },
      h("h1", {}, "Experiments"),
      h("a", { class: "button quiet", href: "#/datasets" }, "Datasets"),
    ),
    filterForm(
      "#/experiments",
      "Filter experiments",
      [
        field("Dataset", input("dataset", "any dataset")),
        field("Prompt", input("prompt_name", "any prompt")),
      ],
      "filters short",
    ),
    picked.form,
    results,
  );
  await paged(results, listTable(COLUMNS, body, "Experiments", "experiments"), {
    loading: "Loading…",
    fetchPage: (cursor) =>
      api("/experiments", {
        query: {
          limit: PAGE_SIZE,
          cursor,
          dataset: value("dataset"),
          prompt_name: value("prompt_name"),
        },
      }),
    add: (experiments) => {
      picked.add(experiments);
      body.append(...experiments.map(experimentRow));
    },
    describe: (shown, more) =>
      shown === 0
        ? "No experiments yet: run a prompt's version over a dataset from the prompt's page."
        : fmt.shown(shown, "experiment", "experiments", more),
  });
}

function summaryBadges(summary) {
  const means = {};
  for (const [name, score] of Object.entries(summary.scores)) {
    if (score.mean !== null) means[name] = score.mean;
  }
  return scoreBadges(means) ?? h("span", { class: "muted" }, "—");
}

function experimentRow(experiment) {
  const href = experimentHref(experiment.id);
  return listRow(
    COLUMNS,
    [
      h("a", { class: "plain", href }, experiment.name),
      h("a", { href: datasetHref(experiment.dataset) }, experiment.dataset),
      whatRan(experiment),
      experimentStatus(experiment.status),
      progressText(experiment.counts),
      summaryBadges(experiment.summary),
      fmt.cost(experiment.summary.estimated_cost_usd),
      h("span", { class: "mono" }, fmt.time(experiment.created_at)),
    ],
    href,
  );
}

/** Two selects (base, candidate) filled with the experiments listed so far, and "Compare". */
function comparePicker() {
  const base = h("select", { id: "compare-base", required: true });
  const candidate = h("select", { id: "compare-candidate", required: true });
  const form = h(
    "form",
    { class: "attach compare-pick hidden", "aria-label": "Compare two experiments" },
    field("Base", base),
    field("Candidate", candidate),
    h("button", { type: "submit" }, "Compare"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    goTo(compareHref(base.value, candidate.value), form);
  });
  let listed = 0;
  const add = (experiments) => {
    for (const experiment of experiments) {
      // Name and time: what ran is in the table below, and a longer label was cut.
      const label = `${experiment.name} · ${fmt.time(experiment.created_at)}`;
      base.append(h("option", { value: experiment.id }, label));
      candidate.append(h("option", { value: experiment.id }, label));
    }
    listed += experiments.length;
    // Newest first: the candidate is the newest, the base the one before it.
    if (listed >= 2) {
      candidate.selectedIndex = 0;
      base.selectedIndex = 1;
      form.classList.remove("hidden");
    }
  };
  return { form, add };
}

// How often a running experiment's page asks for its counts.
const POLL_MS = 1000;

/** #/experiments/<id>: status, counts and summary (refreshed while it runs), then its results. */
export async function showExperiment(view, id) {
  const path = `/experiments/${encodeURIComponent(id)}`;
  const { data: experiment } = await api(path);
  const head = h("div", { class: "experiment-head" });
  const note = h("p", { class: "action-note", role: "status" });
  const results = h("div", { class: "results" });
  replace(
    view,
    h("a", { class: "back", href: "#/experiments" }, "← Experiments"),
    head,
    note,
    h("h2", { class: "results-title" }, "Results"),
    results,
  );
  let shownDone = -1;
  const refresh = async (current) => {
    replace(head, experimentHead(path, current, note));
    // Results appear as they finish: the first page is asked again when the count moved.
    if (current.counts.done !== shownDone) {
      shownDone = current.counts.done;
      await showResults(results, path);
    }
  };
  await refresh(experiment);
  if (experiment.status !== "running") return;
  const poll = async () => {
    // The user went to another page: stop asking.
    if (!head.isConnected) return;
    try {
      const { data: current } = await api(path);
      await refresh(current);
      if (current.status === "running") setTimeout(poll, POLL_MS);
    } catch (error) {
      replace(note, h("span", { class: "error", role: "alert" }, messageOf(error)));
    }
  };
  setTimeout(poll, POLL_MS);
}

function experimentHead(path, experiment, note) {
  const summary = experiment.summary;
  const counts = experiment.counts;
  const running = experiment.status === "running";
  const cancel =
    running && can("write") ? h("button", { type: "button", class: "quiet" }, "Cancel") : null;
  cancel?.addEventListener("click", async () => {
    try {
      await api(`${path}/cancel`, { method: "POST" });
      goTo(window.location.hash, cancel);
    } catch (error) {
      replace(note, h("span", { class: "error", role: "alert" }, messageOf(error)));
    }
  });
  const compare = h(
    "a",
    {
      class: "button quiet",
      href: `#/experiments?${new URLSearchParams({ dataset: experiment.dataset })}`,
    },
    "Compare with another",
  );
  const progress = h("progress", {
    max: Math.max(counts.runs, 1),
    value: counts.done,
    "aria-label": "Runs done",
  });
  return [
    h(
      "div",
      { class: "page-head" },
      h("h1", {}, experiment.name, " ", experimentStatus(experiment.status)),
      h("div", { class: "export" }, cancel, compare),
    ),
    h("p", { class: "muted mono record-id" }, experiment.id),
    h(
      "div",
      { class: "detail" },
      section(
        "Run",
        facts([
          ["Dataset", h("a", { href: datasetHref(experiment.dataset) }, experiment.dataset)],
          [
            "Prompt",
            experiment.prompt_name
              ? h("a", { href: promptHref(experiment.prompt_name) }, whatRan(experiment))
              : whatRan(experiment),
          ],
          ["Model", experiment.model ?? ""],
          ["Evaluators", experiment.evaluators.map((e) => e.name || e.type).join(", ")],
          ["Repetitions", String(experiment.repetitions)],
          ["Items", fmt.count(counts.items)],
          [
            "Progress",
            h("span", { class: "progress" }, running ? progress : null, progressText(counts)),
          ],
          ["Error", experiment.error ?? ""],
          ["Created (UTC)", fmt.time(experiment.created_at)],
          ["Completed (UTC)", experiment.completed_at ? fmt.time(experiment.completed_at) : ""],
        ]),
      ),
      section("Summary", summaryFacts(summary)),
    ),
  ];
}

function summaryFacts(summary) {
  const scores = Object.entries(summary.scores).sort(([a], [b]) => (a < b ? -1 : 1));
  return [
    scores.length
      ? h(
          "table",
          { class: "kv summary-scores" },
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              ["Score", "Mean [95% interval]", "Results"].map((t) => h("th", { scope: "col" }, t)),
            ),
          ),
          h(
            "tbody",
            {},
            scores.map(([name, score]) =>
              h(
                "tr",
                {},
                h("th", { scope: "row" }, name),
                h("td", {}, meanText(score)),
                h("td", {}, fmt.count(score.count)),
              ),
            ),
          ),
        )
      : h("p", { class: "muted" }, "No scores yet."),
    facts([
      ["Cost", fmt.cost(summary.estimated_cost_usd)],
      ["Judge cost", summary.judge_cost_usd ? fmt.cost(summary.judge_cost_usd) : ""],
      ["Tokens", fmt.count(summary.total_tokens)],
      ["Latency p50", fmt.duration(rounded(summary.latency_ms.p50))],
      ["Latency p95", fmt.duration(rounded(summary.latency_ms.p95))],
    ]),
  ];
}

function rounded(ms) {
  return ms === null || ms === undefined ? null : Math.round(ms);
}

async function showResults(container, path) {
  const list = h("ol", { class: "items results-list", "aria-label": "Results" });
  await paged(container, list, {
    loading: "Loading results…",
    fetchPage: (cursor) => api(`${path}/results`, { query: { limit: PAGE_SIZE, cursor } }),
    add: (results) => list.append(...results.map(resultCard)),
    describe: (shown, more) =>
      shown === 0 ? "No results yet." : fmt.shown(shown, "result", "results", more),
  });
}

function resultCard(result) {
  const bad = result.status === "error";
  return h(
    "li",
    { class: `card item result${bad ? " failed" : ""}`, "data-item-id": result.item_id },
    h(
      "p",
      { class: "item-head" },
      h("span", { class: "mono item-id" }, result.item_id),
      result.repetition > 1
        ? h("span", { class: "muted" }, `repetition ${result.repetition}`)
        : null,
      h("span", { class: `badge ${bad ? "bad" : "good"}` }, result.status),
      scoreBadges(result.scores),
      h("span", { class: "muted" }, fmt.duration(rounded(result.latency_ms))),
      h("span", { class: "muted" }, costText(result.estimated_cost_usd)),
      result.request_id
        ? h("a", { href: `#/requests/${encodeURIComponent(result.request_id)}` }, "its record")
        : null,
    ),
    // A failed run's error, or an evaluator's (a judge that could not run) on a result whose
    // output is there.
    result.error
      ? h(
          "div",
          { class: "result-error" },
          h("h3", {}, bad ? "Error" : "Evaluator error"),
          longText(result.error, "error"),
        )
      : null,
    h(
      "div",
      { class: "pair three" },
      h("div", {}, h("h3", {}, "Input variables"), longText(result.input_variables)),
      h(
        "div",
        {},
        h("h3", {}, "Expected"),
        result.expected_output === null
          ? h("p", { class: "muted" }, "none")
          : longText(result.expected_output),
      ),
      h("div", {}, h("h3", {}, "Output"), longText(result.output, "output")),
    ),
  );
}

/**
 * An LLM judge's categories as the API takes them, a map of name to number, from "good=1,
 * bad=0" (or "good: 1", or a JSON object); a string saying what is wrong when it is not one.
 */
export function parseCategories(text) {
  const trimmed = text.trim();
  let pairs;
  if (trimmed.startsWith("{")) {
    try {
      pairs = Object.entries(JSON.parse(trimmed));
    } catch (error) {
      return `Judge categories are not JSON: ${error.message}`;
    }
  } else {
    pairs = [];
    for (const part of trimmed.split(",")) {
      if (!part.trim()) continue;
      const match = part.match(/^\s*(.+?)\s*[=:]\s*(\S+)\s*$/);
      if (!match) return `Judge categories: “${part.trim()}” is not name=number.`;
      pairs.push([match[1], match[2] === "" ? NaN : Number(match[2])]);
    }
  }
  const categories = {};
  for (const [name, value] of pairs) {
    if (typeof value !== "number" || !Number.isFinite(value)) {
      return `Judge categories: ${name}'s value is not a number.`;
    }
    categories[name] = value;
  }
  if (Object.keys(categories).length === 0) return "Judge categories: none given.";
  return categories;
}

const EVALUATORS = [
  ["exact_match", "Exact match", true],
  ["contains", "Contains the expected answer", false],
  ["similarity", "Similarity to the expected answer", true],
  ["json_valid", "Valid JSON", false],
];

/**
 * A prompt page's "Run over a dataset": a version (the shown one by default) over a dataset,
 * with evaluators, repetitions and concurrency; sent, it opens the experiment's page.
 */
export async function experimentForm(promptName, version) {
  let names = [];
  try {
    names = (await api("/datasets", { query: { limit: 100 } })).data.map(
      (dataset) => dataset.name,
    );
  } catch {
    // No list: the form still takes a typed name.
  }
  const dataset = h(
    "select",
    { id: "experiment-dataset", required: true },
    names.map((name) => h("option", { value: name }, name)),
  );
  const versionInput = h("input", {
    id: "experiment-version",
    type: "number",
    min: 1,
    value: version,
    required: true,
  });
  const repetitions = h("input", {
    id: "experiment-repetitions",
    type: "number",
    min: 1,
    max: 10,
    value: 1,
    required: true,
  });
  const concurrency = h("input", {
    id: "experiment-concurrency",
    type: "number",
    min: 1,
    max: 32,
    value: 4,
    required: true,
  });
  const checks = EVALUATORS.map(([type, label, on]) => {
    const box = h("input", {
      type: "checkbox",
      id: `evaluator-${type}`,
      value: type,
      checked: on,
    });
    return [box, h("label", { for: box.id, class: "check-label" }, box, ` ${label}`)];
  });
  const pattern = h("input", {
    id: "evaluator-regex",
    placeholder: "e.g. ^Hello",
    autocomplete: "off",
  });
  const judge = h("input", {
    id: "evaluator-judge",
    placeholder: "a judge prompt's name",
    autocomplete: "off",
  });
  const categories = h("input", {
    id: "evaluator-categories",
    placeholder: "good=1, bad=0",
    autocomplete: "off",
  });
  const note = h("p", { class: "action-note", role: "status" });
  if (names.length === 0) {
    return h(
      "p",
      { class: "muted" },
      "No datasets yet. ",
      h("a", { href: "#/datasets" }, "Create one"),
      " or add records to one from the request log.",
    );
  }
  const form = h(
    "form",
    { class: "run-experiment", "aria-label": "Run over a dataset" },
    h(
      "div",
      { class: "run-fields" },
      field("Dataset", dataset),
      field("Version", versionInput),
      field("Repetitions", repetitions, "1 to 10"),
      field("Concurrency", concurrency, "1 to 32"),
    ),
    h(
      "fieldset",
      { class: "evaluators" },
      h("legend", {}, "Evaluators"),
      checks.map(([, label]) => label),
    ),
    h(
      "div",
      { class: "run-fields judge-fields" },
      field("Regex", pattern, "optional"),
      field("LLM judge", judge, "optional"),
      field(
        "Judge categories",
        categories,
        "optional: name=number pairs; the first one the judge names is its score",
      ),
    ),
    h("button", { type: "submit" }, "Run over the dataset"),
    note,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const evaluators = checks.filter(([box]) => box.checked).map(([box]) => ({ type: box.value }));
    if (pattern.value.trim()) evaluators.push({ type: "regex", pattern: pattern.value.trim() });
    const fail = (text) => replace(note, h("span", { class: "error", role: "alert" }, text));
    let judgeCategories = null;
    if (categories.value.trim()) {
      if (!judge.value.trim()) return fail("Name the judge prompt its categories are for.");
      judgeCategories = parseCategories(categories.value);
      if (typeof judgeCategories === "string") return fail(judgeCategories);
    }
    if (judge.value.trim()) {
      const evaluator = { type: "llm_judge", prompt: judge.value.trim() };
      if (judgeCategories) evaluator.categories = judgeCategories;
      evaluators.push(evaluator);
    }
    replace(note, "Starting…");
    try {
      const { data } = await api("/experiments", {
        method: "POST",
        body: {
          dataset: dataset.value,
          prompt: promptName,
          version: Number(versionInput.value),
          evaluators,
          repetitions: Number(repetitions.value),
          concurrency: Number(concurrency.value),
        },
      });
      goTo(experimentHref(data.id), form);
    } catch (error) {
      fail(messageOf(error));
    }
  });
  return [
    form,
    h(
      "p",
      { class: "hint" },
      h(
        "a",
        { href: `#/experiments?${new URLSearchParams({ prompt_name: promptName })}` },
        "This prompt's experiments",
      ),
    ),
  ];
}
