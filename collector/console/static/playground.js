// #/playground: try a prompt on several inputs and models at once (POST /v1/playground/runs;
// docs/api-notes.md, "Playground"), streamed into a grid, without saving anything to the
// registry until "Save as new version". Opened empty, from a version
// (?prompt=<name>&version=<n>) or from a record (?request=<id>: its messages, tools, model).
//
// The API runs one prompt on one set of variables (or a dataset) per run: the grid makes one
// run per row and per prompt its columns run (the editor's, a stored version, other
// parameters), each run taking that prompt's columns' models at once. Before "Run all" the
// page shows those runs' estimate (playground_estimate.js), recomputed as they change.

import { api, messageOf } from "./api.js";
import { costText, h, replace, section } from "./dom.js";
import * as fmt from "./format.js";
import { estimatePreview } from "./playground_estimate.js";
import { resultGrid, streamRun } from "./playground_grid.js";
import { columnsEditor, inputRows, promptEditor } from "./playground_inputs.js";
import { promptHref } from "./prompt_list.js";
import { can } from "./roles.js";

// Runs sent at once (each runs up to 8 cells at once at the collector).
const RUNS_AT_ONCE = 4;
// Fields of a version the editor sends (and a saved version takes).
const FIELDS = [
  "type",
  "template",
  "messages",
  "model",
  "parameters",
  "tools",
  "tool_choice",
  "response_format",
  "variables_schema",
];

/** An "Open in playground" link: `query` is the route's (prompt=&version= or request=). */
export function playgroundLink(query) {
  return h("a", { class: "button quiet open-playground", href: `#/playground?${query}` },
    "Open in playground");
}

/**
 * The playground run a version was saved from (its `source_run_id`) as a link to the run's
 * records (metadata.playground_run_id in the playground's environment), or null.
 */
export function sourceRunLink(version) {
  const id = version?.source_run_id;
  if (!id) return null;
  const query = new URLSearchParams({
    environment: "promptrail-playground",
    meta_key: "playground_run_id",
    meta_value: id,
  });
  return h("a", { class: "mono source-run", href: `#/requests?${query}` }, id);
}

/** The route #/playground?prompt=&version= | ?request=, or a blank chat prompt. */
export async function showPlayground(view, query) {
  const source = await startFrom(query);
  const editor = promptEditor(source.fields);
  const inputs = inputRows(source.rows);
  const columns = columnsEditor(source.versions, [{}]);
  inputs.refresh(editor.variables());
  editor.onChange(() => inputs.refresh(editor.variables()));
  const maxCost = h("input", {
    id: "pg-max-cost",
    type: "number",
    min: 0,
    step: "any",
    placeholder: "no limit",
  });
  const status = h("p", { class: "pg-status", role: "status" });
  const holder = h("div", { class: "pg-grid-holder" });
  const runButton = h("button", { type: "submit" }, "Run all");
  const state = { runIds: [], editorRunId: null };
  const preview = estimatePreview(
    () => planRuns({ editor, inputs, columns, maxCost, source }),
    () => editor.variables().map((v) => v.name),
  );
  const form = h(
    "form",
    { class: "pg-run", "aria-label": "Run the playground", novalidate: true },
    h(
      "div",
      { class: "field pg-max" },
      h("label", { for: maxCost.id }, "Max cost of a run, USD (optional)"),
      maxCost,
      h(
        "span",
        { class: "hint" },
        "a run estimated above it is refused before any call, and the estimate is shown",
      ),
    ),
    preview.element,
    h("div", { class: "actions" }, runButton),
    status,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    runButton.disabled = true;
    try {
      await runAll({ editor, inputs, columns, maxCost, status, holder, state, source });
    } finally {
      runButton.disabled = false;
    }
  });
  const layout = h(
    "div",
    { class: "pg-layout" },
    section("Prompt", editor.element),
    section("Inputs", inputs.element),
    section("Columns", columns.element),
  );
  // Any edit, added or removed row or column, or max cost asks for the estimate again.
  editor.onChange(preview.schedule);
  for (const type of ["input", "change", "click"]) layout.addEventListener(type, preview.schedule);
  maxCost.addEventListener("input", preview.schedule);
  preview.schedule();
  replace(
    view,
    h("div", { class: "page-head" }, h("h1", {}, "Playground"), source.from),
    h(
      "p",
      { class: "muted" },
      "Nothing is saved to the registry until you save a version. Each cell is a record in " +
        "the promptrail-playground environment, out of the production views.",
    ),
    layout,
    section("Run", [form, holder], "wide"),
    can("write") ? section("Save", saveForm(source, editor, state), "wide") : null,
  );
}

/** Where the page starts: a stored version, a record's call, or a blank chat prompt. */
async function startFrom(query) {
  const name = query.get("prompt");
  const requestId = query.get("request");
  if (name) {
    const path = `/prompts/${encodeURIComponent(name)}`;
    const number = query.get("version");
    const [{ data: version }, { data: versions }] = await Promise.all([
      api(number ? `${path}/versions/${encodeURIComponent(number)}` : path),
      api(`${path}/versions`, { query: { limit: 50 } }),
    ]);
    return {
      fields: version,
      prompt: { name: version.name ?? name, version: version.version },
      versions: versions.map((v) => v.version),
      from: h(
        "a",
        { href: promptHref(name) },
        `From ${name} v${version.version}`,
      ),
      rows: [],
    };
  }
  if (requestId) {
    const { data: record } = await api(`/requests/${encodeURIComponent(requestId)}`);
    return {
      fields: recordFields(record),
      prompt: null,
      versions: [],
      from: h(
        "a",
        { href: `#/requests/${encodeURIComponent(record.id)}` },
        `From record ${record.id}`,
      ),
      rows: [],
    };
  }
  return {
    fields: { type: "chat", messages: [{ role: "user", content: "" }], model: "gpt-4o-mini" },
    prompt: null,
    versions: [],
    from: null,
    rows: [],
  };
}

/** A record's call as a chat prompt: its exact messages, tools and model. */
function recordFields(record) {
  const input = record.input;
  const body = input && !Array.isArray(input) && typeof input === "object" ? input : {};
  const messages = Array.isArray(input) ? input : body.messages;
  const parameters = {};
  for (const key of ["temperature", "top_p", "max_tokens", "max_completion_tokens", "seed"]) {
    if (body[key] !== undefined) parameters[key] = body[key];
  }
  return {
    type: "chat",
    messages: Array.isArray(messages)
      ? messages
      : [{ role: "user", content: typeof input === "string" ? input : JSON.stringify(input) }],
    model: record.model,
    parameters,
    tools: body.tools ?? record.metadata?.tools ?? null,
    tool_choice: body.tool_choice ?? null,
    response_format: body.response_format ?? null,
  };
}

/** The prompt a column runs: the editor's (inline, or the stored version with overrides). */
function columnPrompt(column, edited, source) {
  const parameters = column.parameters ?? edited.parameters;
  if (column.version) {
    const prompt = { name: source.prompt.name, version: column.version };
    if (column.parameters) prompt.overrides = { parameters };
    return prompt;
  }
  const fields = { ...edited, parameters };
  if (!source.prompt) return fields;
  // A stored version with the editor's fields as overrides: unchanged, its records name it.
  const { type, ...overrides } = fields;
  void type;
  return { name: source.prompt.name, version: source.prompt.version, overrides };
}

/** The runs of one row: a run per distinct prompt, each with its columns' (distinct) models. */
function groups(columns, edited, source) {
  const found = [];
  for (const [index, column] of columns.entries()) {
    const prompt = columnPrompt(column, edited, source);
    const key = JSON.stringify(prompt);
    let group = found.find((g) => g.key === key && !g.models.includes(column.model));
    if (!group) {
      group = { key, prompt, models: [], columns: [], editor: !column.version };
      found.push(group);
    }
    group.models.push(column.model);
    group.columns.push(index);
  }
  return found;
}

/**
 * The runs "Run all" sends (and the estimate asks about): {jobs: [{row, group, body}], picked,
 * cols} (a run per row and prompt), or {problem}.
 */
function planRuns({ editor, inputs, columns, maxCost, source }) {
  const edited = editor.read();
  const picked = inputs.read();
  const chosen = columns.read(edited.prompt?.model ?? "");
  const problem = edited.problem || picked.problem || chosen.problem;
  if (problem) return { problem };
  const placeholders = Object.fromEntries(editor.placeholders().map((name) => [name, []]));
  const cols = chosen.columns;
  const runGroups = groups(cols, edited.prompt, source);
  const jobs = [];
  const rowList = picked.dataset ? [null] : picked.rows;
  for (const [r, row] of rowList.entries()) {
    for (const group of runGroups) {
      const body = { prompt: group.prompt, placeholders };
      if (group.models.every(Boolean)) body.models = group.models;
      if (picked.dataset) body.dataset = picked.dataset;
      else body.variables = row.variables;
      if (maxCost.value.trim()) body.max_cost_usd = Number(maxCost.value);
      jobs.push({ row: r, group, body });
    }
  }
  return { jobs, picked, cols };
}

async function runAll({ editor, inputs, columns, maxCost, status, holder, state, source }) {
  const planned = planRuns({ editor, inputs, columns, maxCost, source });
  if (planned.problem) {
    replace(holder);
    return replace(status, h("span", { class: "error", role: "alert" }, `${planned.problem}.`));
  }
  const { jobs, picked, cols } = planned;
  const grid = resultGrid(cols.map((c) => ({ label: c.label })));
  replace(holder, grid.element);
  for (const row of picked.dataset ? [] : picked.rows) grid.addRow(row.label);
  const datasetRows = new Map();
  const totals = { estimate: 0, cost: 0, runs: 0, method: new Set(), refused: [] };
  state.runIds = [];
  state.editorRunId = null;
  const say = () => {
    const methods = [...totals.method].join(", ");
    replace(
      status,
      `Estimated before any call: `,
      h("strong", { class: "pg-estimate" }, fmt.cost(totals.estimate)),
      methods
        ? ` (${methods}; output counted at max_tokens, else 1,024 tokens; from ` +
            `${totals.runs} of ${jobs.length} runs' first event)`
        : "",
      ". Spent: ",
      costText(totals.cost, true),
      ".",
      totals.refused.map((text) => h("span", { class: "error pg-refused" }, ` ${text}`)),
    );
  };
  replace(status, `Running ${jobs.length} run${jobs.length === 1 ? "" : "s"}…`);
  const cellOf = (job, started, head) => {
    let row = job.row;
    if (picked.dataset) {
      const item = head.item_id ?? `item ${head.cell}`;
      if (!datasetRows.has(item)) datasetRows.set(item, grid.addRow(`item ${item}`));
      row = datasetRows.get(item);
    }
    const index = job.group.models.indexOf(head.model);
    const column = job.group.columns[index >= 0 ? index : 0];
    return grid.cell(row, column);
  };
  const one = async (job) => {
    const heads = new Map();
    try {
      await streamRun(job.body, (event) => {
        if (event.type === "start") {
          totals.estimate += event.estimated_cost_usd ?? 0;
          totals.runs += 1;
          if (event.estimate_method) totals.method.add(event.estimate_method);
          state.runIds.push(event.id);
          if (job.group.editor && job.row === 0 && !state.editorRunId) {
            state.editorRunId = event.id;
          }
          for (const head of event.cells) {
            const handle = cellOf(job, event, head);
            heads.set(head.cell, handle);
            handle?.start();
          }
          say();
        } else if (event.type === "chunk") heads.get(event.cell)?.chunk(event.delta ?? "");
        else if (event.type === "end") heads.get(event.cell)?.end(event);
        else if (event.type === "done") {
          totals.cost += event.cost_usd ?? 0;
          say();
        }
      });
    } catch (error) {
      // Refused before any call (a 402 over max_cost_usd names the estimate; a 400): the
      // run's cells say why.
      const estimated = error.details?.estimated_usd;
      const text =
        estimated === undefined
          ? messageOf(error)
          : `Estimated at ${fmt.cost(estimated)}, above the max cost: nothing was called.`;
      if (!picked.dataset) {
        for (const column of job.group.columns) grid.cell(job.row, column)?.fail(text);
      }
      if (!totals.refused.includes(text)) totals.refused.push(text);
      say();
    }
  };
  const queue = [...jobs];
  await Promise.all(
    Array.from({ length: Math.min(RUNS_AT_ONCE, queue.length) }, async () => {
      while (queue.length) await one(queue.shift());
    }),
  );
  say();
  status.append(" Done.");
}

/** "Save as new version": a PATCH of the stored prompt, or a new prompt, naming the run. */
function saveForm(source, editor, state) {
  const note = h("p", { class: "note", role: "status" });
  const name = source.prompt
    ? null
    : h("input", { id: "pg-save-name", autocomplete: "off", placeholder: "support-reply" });
  const save = async (event) => {
    event.preventDefault();
    const edited = editor.read();
    if (edited.problem) {
      return replace(note, h("span", { class: "error", role: "alert" }, `${edited.problem}.`));
    }
    const body = {};
    for (const key of FIELDS) {
      if (edited.prompt[key] !== undefined && edited.prompt[key] !== null) {
        body[key] = edited.prompt[key];
      }
    }
    const runId = state.editorRunId ?? state.runIds[0];
    if (runId) body.source_run_id = runId;
    try {
      let saved;
      if (source.prompt) {
        delete body.type;
        const path = `/prompts/${encodeURIComponent(source.prompt.name)}`;
        saved = (await api(path, { method: "PATCH", body })).data;
      } else {
        body.name = name.value.trim();
        saved = (await api("/prompts", { method: "POST", body })).data;
      }
      replace(
        note,
        `Saved ${saved.name} v${saved.version}`,
        runId ? ` from run ${runId}` : "",
        ". ",
        h("a", { href: promptHref(saved.name) }, "Open the prompt"),
      );
    } catch (error) {
      const named = error.details?.field ? ` (field: ${error.details.field})` : "";
      replace(note, h("span", { class: "error", role: "alert" }, `${messageOf(error)}${named}`));
    }
  };
  return h(
    "form",
    { class: "pg-save", "aria-label": "Save as new version", onsubmit: save },
    h(
      "p",
      { class: "muted" },
      source.prompt
        ? `The editor's prompt becomes the next version of ${source.prompt.name}`
        : "The editor's prompt becomes a new prompt",
      ", naming the run of the editor's prompt on the first row as the run it came from.",
    ),
    name
      ? h("div", { class: "field" }, h("label", { for: name.id }, "Prompt name"), name)
      : null,
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Save as new version")),
    note,
  );
}
