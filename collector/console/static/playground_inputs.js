// The playground's inputs: the prompt editor (chat_editor.js's message rows, or a text
// template), the variables found in it (typed by its variables schema when it has one), the
// rows of inputs or a dataset, and the columns (a model, a stored version, parameters).

import { messagesEditor, rowMessage, rowOf } from "./chat_editor.js";
import { field, h, replace } from "./dom.js";

const json = (value) =>
  value === undefined || value === null ? "" : JSON.stringify(value, null, 2);

/** Read a JSON text area: {value} (undefined when empty) or {problem}. */
export function readJsonBox(box, label) {
  if (!box.value.trim()) return { value: undefined };
  try {
    return { value: JSON.parse(box.value) };
  } catch (error) {
    return { problem: `${label} is not JSON (${error.message})` };
  }
}

/**
 * The prompt editor from `start` (a version's fields). Answers {element, read() → {prompt}
 * or {problem}, variables() → [{name, type}], placeholders() → [name], onChange(fn)}.
 */
export function promptEditor(start) {
  const listeners = [];
  const changed = () => listeners.forEach((fn) => fn());
  // A version's type, or a text prompt by its template (a version object may leave it out).
  const type = typeof start.template === "string" && start.type !== "chat" ? "text" : "chat";
  const model = h("input", { id: "pg-model", value: start.model ?? "", autocomplete: "off" });
  const parameters = h("textarea", { id: "pg-parameters", rows: 2, spellcheck: "false" });
  // On one line: parameters are a few flat values, read whole at a glance.
  parameters.value = JSON.stringify(start.parameters ?? {});
  let rows = null;
  let messages = null;
  let template = null;
  let tools = null;
  if (type === "chat") {
    rows = (start.messages ?? [{ role: "user", content: "" }]).map(rowOf);
    messages = messagesEditor(rows, changed);
    tools = h("textarea", { id: "pg-tools", rows: 5, spellcheck: "false" });
    tools.value = json(start.tools);
  } else {
    template = h("textarea", { id: "pg-template", rows: 6 });
    template.value = start.template ?? "";
    template.addEventListener("input", changed);
  }
  const element = h(
    "div",
    { class: "pg-editor" },
    type === "chat"
      ? h(
          "fieldset",
          { class: "messages-set" },
          h("legend", {}, "Messages"),
          messages.element,
        )
      : field("Template", template, "Mustache: {{name}} fills in a value"),
    h(
      "div",
      { class: "pg-editor-fields" },
      field("Model", model, "the columns' default"),
      field("Parameters (JSON)", parameters, 'e.g. {"temperature": 0.2, "max_tokens": 200}'),
      tools ? field("Tools (JSON)", tools, "a list of function tools; empty: none") : null,
    ),
  );
  const read = () => {
    const params = readJsonBox(parameters, "Parameters");
    if (params.problem) return { problem: params.problem };
    const prompt = {
      type,
      model: model.value.trim(),
      parameters: params.value ?? {},
    };
    if (!prompt.model) return { problem: "Name the model" };
    if (type === "chat") {
      const bad = messages.problems.map((check) => check()).filter(Boolean);
      if (bad.length) return { problem: bad[0] };
      if (!rows.length) return { problem: "A chat prompt needs at least one message" };
      prompt.messages = rows.map(rowMessage);
      const toolList = readJsonBox(tools, "Tools");
      if (toolList.problem) return { problem: toolList.problem };
      prompt.tools = toolList.value ?? null;
    } else {
      prompt.template = template.value;
    }
    // Kept as the version had them: the editor does not show these.
    for (const key of ["tool_choice", "response_format", "variables_schema"]) {
      if (start[key] !== undefined && start[key] !== null) prompt[key] = start[key];
    }
    return { prompt };
  };
  const texts = () =>
    type === "chat"
      ? rows.filter((r) => r.role !== "placeholder").map((r) => r.text)
      : [template.value];
  const variables = () => {
    const props = start.variables_schema?.properties;
    if (props) {
      return Object.entries(props).map(([name, spec]) => ({ name, type: spec?.type ?? "any" }));
    }
    return mustacheNames(texts().join("\n")).map((name) => ({ name, type: "string" }));
  };
  const placeholders = () =>
    type === "chat"
      ? rows.filter((r) => r.role === "placeholder").map((r) => r.text.trim())
      : [];
  model.addEventListener("input", changed);
  return { element, read, variables, placeholders, onChange: (fn) => listeners.push(fn), model };
}

/** The top-level names a Mustache text uses (not those inside a section, its items'). */
export function mustacheNames(text) {
  const names = [];
  let depth = 0;
  for (const match of text.matchAll(/\{\{\s*([#^/!&{]?)\s*([A-Za-z_][\w.]*)\s*\}?\}\}/g)) {
    const [, sigil, raw] = match;
    const name = raw.split(".")[0];
    if (sigil === "!") continue;
    if (sigil === "/") {
      depth = Math.max(0, depth - 1);
      continue;
    }
    if (depth === 0 && !names.includes(name)) names.push(name);
    if (sigil === "#" || sigil === "^") depth += 1;
  }
  return names;
}

/** A typed value from a row's text: numbers, booleans and JSON by the variable's type. */
function typed(text, type) {
  if (type === "integer" || type === "number") return Number(text);
  if (type === "boolean") return text.trim() === "true";
  if (type === "string") return text;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * The rows of inputs (a table: one column per variable) or a dataset (name and limit).
 * Answers {element, refresh(variables), read() → {rows: [{label, variables}]} | {dataset}}.
 */
export function inputRows(initial = []) {
  let variables = [];
  const values = initial.length ? initial.map((row) => ({ ...row })) : [{}];
  const table = h("div", { class: "pg-rows" });
  const mode = h(
    "select",
    { id: "pg-input-mode" },
    h("option", { value: "rows" }, "Rows of inputs"),
    h("option", { value: "dataset" }, "A dataset"),
  );
  const dataset = h("input", { id: "pg-dataset", autocomplete: "off" });
  const limit = h("input", { id: "pg-limit", type: "number", min: 1, max: 100, value: 10 });
  const datasetBox = h(
    "div",
    { class: "pg-dataset hidden" },
    field("Dataset", dataset),
    field("Items", limit, "its first items, 1-100"),
  );
  const addRow = h(
    "button",
    {
      type: "button",
      class: "quiet",
      onclick: () => {
        values.push({});
        draw();
      },
    },
    "Add row",
  );
  const draw = () => {
    replace(
      table,
      h(
        "table",
        { class: "kv pg-input-table", "aria-label": "Rows of inputs" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", { scope: "col" }, "Row"),
            variables.map((v) => h("th", { scope: "col" }, `${v.name} (${v.type})`)),
            h("th", { scope: "col" }, ""),
          ),
        ),
        h(
          "tbody",
          {},
          values.map((row, index) =>
            h(
              "tr",
              {},
              h("th", { scope: "row" }, String(index + 1)),
              variables.map((v) => {
                const input = h("input", {
                  "aria-label": `${v.name} of row ${index + 1}`,
                  value: row[v.name] ?? "",
                  autocomplete: "off",
                });
                input.addEventListener("input", () => {
                  row[v.name] = input.value;
                });
                return h("td", {}, input);
              }),
              h(
                "td",
                {},
                h(
                  "button",
                  {
                    type: "button",
                    class: "quiet small",
                    "aria-label": `Remove row ${index + 1}`,
                    disabled: values.length === 1,
                    onclick: () => {
                      values.splice(index, 1);
                      draw();
                    },
                  },
                  "×",
                ),
              ),
            ),
          ),
        ),
      ),
      variables.length
        ? null
        : h("p", { class: "muted" }, "The prompt uses no variable: each row runs it as it is."),
    );
  };
  mode.addEventListener("change", () => {
    const rows = mode.value === "rows";
    table.classList.toggle("hidden", !rows);
    addRow.classList.toggle("hidden", !rows);
    datasetBox.classList.toggle("hidden", rows);
  });
  const element = h(
    "div",
    { class: "pg-inputs" },
    field("Inputs", mode),
    table,
    h("div", { class: "actions" }, addRow),
    datasetBox,
  );
  const refresh = (next) => {
    if (JSON.stringify(next) === JSON.stringify(variables)) return;
    variables = next;
    draw();
  };
  const read = () => {
    if (mode.value === "dataset") {
      if (!dataset.value.trim()) return { problem: "Name the dataset" };
      return { dataset: { name: dataset.value.trim(), limit: Number(limit.value) || 10 } };
    }
    return {
      rows: values.map((row, index) => {
        const filled = {};
        for (const v of variables) {
          if ((row[v.name] ?? "") !== "") filled[v.name] = typed(row[v.name], v.type);
        }
        const shown = Object.entries(filled)
          .map(([name, value]) => `${name}=${JSON.stringify(value)}`)
          .join(", ");
        return { label: `${index + 1}. ${shown || "(no variables)"}`, variables: filled };
      }),
    };
  };
  draw();
  return { element, refresh, read };
}

/**
 * The columns: each a model (empty: the editor's), optional parameters (JSON, replacing the
 * editor's) and the prompt it runs (the editor, or a stored version of the prompt).
 * Answers {element, read() → {columns: [{model, parameters?, version?, label}]} | {problem}}.
 */
export function columnsEditor(versions = [], initial = [{}]) {
  const columns = initial.map((c) => ({ model: "", parameters: "", version: "", ...c }));
  const list = h("ol", { class: "pg-columns", "aria-label": "Columns" });
  const draw = () => {
    replace(
      list,
      columns.map((column, index) => {
        const n = index + 1;
        const model = h("input", {
          id: `pg-column-${n}-model`,
          "aria-label": `Model of column ${n}`,
          value: column.model,
          placeholder: "the editor's model",
          autocomplete: "off",
        });
        model.addEventListener("input", () => (column.model = model.value));
        const params = h("input", {
          id: `pg-column-${n}-parameters`,
          "aria-label": `Parameters of column ${n}`,
          value: column.parameters,
          placeholder: '{"temperature": 1}',
          autocomplete: "off",
          spellcheck: "false",
        });
        params.addEventListener("input", () => (column.parameters = params.value));
        const version = versions.length
          ? h(
              "select",
              { id: `pg-column-${n}-version`, "aria-label": `Prompt of column ${n}` },
              h("option", { value: "" }, "the editor"),
              versions.map((v) =>
                h("option", { value: v, selected: String(v) === String(column.version) }, `v${v}`),
              ),
            )
          : null;
        version?.addEventListener("change", () => (column.version = version.value));
        return h(
          "li",
          { class: "pg-column" },
          h("span", { class: "pg-column-number" }, `Column ${n}`),
          field("Model", model),
          field("Parameters (JSON)", params),
          version ? field("Prompt", version) : null,
          h(
            "button",
            {
              type: "button",
              class: "quiet small",
              "aria-label": `Remove column ${n}`,
              disabled: columns.length === 1,
              onclick: () => {
                columns.splice(index, 1);
                draw();
              },
            },
            "Remove",
          ),
        );
      }),
    );
  };
  const add = h(
    "button",
    {
      type: "button",
      class: "quiet",
      onclick: () => {
        columns.push({ model: "", parameters: "", version: "" });
        draw();
      },
    },
    "Add column",
  );
  const read = (editorModel) => {
    const out = [];
    for (const [index, column] of columns.entries()) {
      // A stored version's column without a model runs that version's own model.
      const entry = { model: column.model.trim() || (column.version ? "" : editorModel) };
      if (column.parameters.trim()) {
        try {
          entry.parameters = JSON.parse(column.parameters);
        } catch (error) {
          return { problem: `Column ${index + 1}'s parameters are not JSON (${error.message})` };
        }
      }
      if (column.version) entry.version = Number(column.version);
      entry.label = [
        entry.model || "its model",
        entry.version ? `v${entry.version}` : null,
        entry.parameters ? JSON.stringify(entry.parameters) : null,
      ]
        .filter(Boolean)
        .join(" · ");
      out.push(entry);
    }
    return { columns: out };
  };
  draw();
  return { element: h("div", {}, list, h("div", { class: "actions" }, add)), read };
}
