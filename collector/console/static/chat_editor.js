// The chat prompt editor: create a chat prompt, or a new version of one. Messages are rows
// (add, remove, move up and down; a role, or a placeholder for a conversation's history);
// tools, response format, variables schema and parameters are JSON. Every field is checked as
// it is typed (chat_checks.js) and its problem shown under it; Save sends nothing while one is
// shown, and the collector's own refusal (a 400) is shown too.

import { api, messageOf } from "./api.js";
import {
  contentTexts,
  parametersShape,
  partsProblem,
  readJson,
  responseFormatShape,
  templateProblem,
  toolsShape,
  variablesSchemaShape,
} from "./chat_checks.js";
import { field, h, replace } from "./dom.js";

const ROLES = ["system", "developer", "user", "assistant", "tool"];
const json = (value) =>
  value === undefined || value === null ? "" : JSON.stringify(value, null, 2);

/** A row's state from a version's message: its role, its text, and what the editor keeps. */
export function rowOf(message) {
  if (message.type === "placeholder") return { role: "placeholder", text: message.name };
  const { role, content, ...kept } = message;
  const parts = typeof content !== "string";
  return { role, text: parts ? json(content) : content, parts, kept };
}

/** The message a row stands for (its content read as JSON when it holds parts). */
export function rowMessage(row) {
  if (row.role === "placeholder") return { type: "placeholder", name: row.text.trim() };
  let content = row.text;
  if (row.parts) {
    try {
      content = JSON.parse(row.text);
    } catch {
      content = null;
    }
  }
  // A role change drops what only the old role had (a tool's call id, an assistant's calls).
  const kept = { ...(row.kept ?? {}) };
  if (row.role !== "tool") delete kept.tool_call_id;
  if (row.role !== "assistant") delete kept.tool_calls;
  return { role: row.role, content, ...kept };
}

/** Why a row is no message the collector takes (null when it is one). */
function rowProblem(row) {
  if (row.role === "placeholder") {
    return /^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(row.text.trim())
      ? null
      : "A placeholder's name is 1-64 letters, digits or _, not starting with a digit.";
  }
  let content = row.text;
  if (row.parts) {
    const read = readJson(row.text, partsProblem, false);
    if (read.problem) return read.problem;
    content = read.value;
  }
  for (const text of contentTexts(content)) {
    const problem = templateProblem(text);
    if (problem) return problem;
  }
  return null;
}

/** A problem's line under its field (empty while there is none). */
function problemLine(id) {
  return h("span", { class: "field-problem", id, "aria-live": "polite" });
}

function showProblem(line, control, problem) {
  replace(line, problem ?? "");
  control.setAttribute("aria-invalid", problem ? "true" : "false");
  if (problem) control.setAttribute("aria-describedby", line.id);
  else control.removeAttribute("aria-describedby");
}

/** The message rows, drawn from `rows` (the editor's state) after every change of order. */
export function messagesEditor(rows, onChange) {
  const list = h("ol", { class: "message-rows", "aria-label": "Messages to edit" });
  const problems = [];
  const draw = () => {
    problems.length = 0;
    replace(list, rows.map((row, index) => messageRow(row, index)));
    // Problems show from the start (a prefilled version, a row just moved), not only once typed.
    for (const check of problems) check();
    onChange();
  };
  const move = (index, by) => {
    rows.splice(index + by, 0, ...rows.splice(index, 1));
    draw();
  };
  const messageRow = (row, index) => {
    const n = index + 1;
    const role = h(
      "select",
      { id: `message-${n}-role`, "aria-label": `Role of message ${n}` },
      [...ROLES, "placeholder"].map((r) => h("option", { value: r, selected: r === row.role }, r)),
    );
    role.addEventListener("change", () => {
      // A placeholder's name and a message's text are different things: start afresh.
      if ((role.value === "placeholder") !== (row.role === "placeholder")) row.text = "";
      row.role = role.value;
      draw();
    });
    const placeholder = row.role === "placeholder";
    const text = placeholder
      ? h("input", { id: `message-${n}-text`, "aria-label": `Placeholder ${n} name` })
      : h("textarea", { id: `message-${n}-text`, "aria-label": `Message ${n}`, rows: 3 });
    text.value = row.text;
    const line = problemLine(`message-${n}-problem`);
    const check = () => {
      const problem = rowProblem(row);
      showProblem(line, text, problem);
      return problem;
    };
    problems.push(check);
    text.addEventListener("input", () => {
      row.text = text.value;
      check();
      onChange();
    });
    const partsBox = h("input", {
      type: "checkbox",
      id: `message-${n}-parts`,
      checked: Boolean(row.parts),
    });
    partsBox.addEventListener("change", () => {
      row.parts = partsBox.checked;
      // Text becomes one text part, and back, so the switch loses nothing typed.
      if (row.parts && !row.text.trim().startsWith("[")) {
        row.text = json([{ type: "text", text: row.text }]);
      }
      draw();
    });
    const button = (label, name, act, disabled = false) =>
      h(
        "button",
        { type: "button", class: "quiet small", "aria-label": name, disabled, onclick: act },
        label,
      );
    return h(
      "li",
      { class: placeholder ? "message-row placeholder" : "message-row" },
      h(
        "div",
        { class: "message-row-head" },
        role,
        placeholder
          ? h("span", { class: "muted" }, "a conversation's history goes here")
          : h(
              "label",
              { class: "check", for: partsBox.id },
              partsBox,
              "parts (JSON: text and images)",
            ),
        h(
          "span",
          { class: "row-buttons" },
          button("↑", `Move message ${n} up`, () => move(index, -1), index === 0),
          button("↓", `Move message ${n} down`, () => move(index, 1), index === rows.length - 1),
          button("Remove", `Remove message ${n}`, () => {
            rows.splice(index, 1);
            draw();
          }),
        ),
      ),
      text,
      line,
    );
  };
  const add = (role) => () => {
    rows.push({ role, text: "", parts: false });
    draw();
    list.querySelector(`#message-${rows.length}-text`)?.focus();
  };
  const controls = h(
    "div",
    { class: "actions add-rows" },
    h("button", { type: "button", class: "quiet", onclick: add("user") }, "Add message"),
    h(
      "button",
      { type: "button", class: "quiet", onclick: add("placeholder") },
      "Add placeholder",
    ),
  );
  draw();
  return { element: h("div", { class: "messages-editor" }, list, controls), problems };
}

/** A JSON text area and its check: answers {element, read() → {value, problem}}. */
function jsonField(id, label, value, shape, hint) {
  const box = h("textarea", { id, rows: 4, spellcheck: "false" });
  box.value = json(value);
  const line = problemLine(`${id}-problem`);
  const read = () => {
    const result = readJson(box.value, shape);
    showProblem(line, box, result.problem);
    return result;
  };
  box.addEventListener("input", read);
  const element = field(label, box, hint);
  element.append(line);
  return { element, read };
}

function toolChoiceField(choice) {
  const kind = typeof choice === "object" && choice !== null ? "function" : (choice ?? "");
  const select = h(
    "select",
    { id: "field-tool_choice" },
    [
      ["", "not set (the provider's default)"],
      ["auto", "auto"],
      ["none", "none"],
      ["required", "required (some tool)"],
      ["function", "one function, always"],
    ].map(([value, text]) => h("option", { value, selected: value === kind }, text)),
  );
  const name = h("input", {
    id: "field-tool_choice-name",
    "aria-label": "Function to call",
    placeholder: "function name",
    value: kind === "function" ? choice.function?.name : "",
  });
  const sync = () => name.classList.toggle("hidden", select.value !== "function");
  select.addEventListener("change", sync);
  sync();
  const element = field("Tool choice", select);
  element.append(name);
  const read = () => {
    if (select.value === "function") {
      return { type: "function", function: { name: name.value.trim() } };
    }
    return select.value || null;
  };
  return { element, read };
}

/**
 * The editor. `values`: the version to start from (messages, model, parameters, tools, …, and
 * description, tags, folder); `submit(body)` saves the body (create or PATCH).
 */
export function chatForm(title, values, creating, submit) {
  const rows = (values.messages ?? [{ role: "system", content: "" }]).map(rowOf);
  const note = h("p", { class: "note", role: "status" });
  const text = (name, attrs = {}) =>
    h("input", { id: `field-${name}`, name, value: values[name] ?? "", ...attrs });
  const name = creating ? text("name", { required: true }) : null;
  const model = text("model", { required: true });
  const messages = messagesEditor(rows, () => replace(note));
  const tools = jsonField(
    "field-tools",
    "Tools (JSON)",
    values.tools,
    toolsShape,
    '[{"type": "function", "function": {"name", "description", "parameters"}}]',
  );
  const choice = toolChoiceField(values.tool_choice);
  const format = jsonField(
    "field-response_format",
    "Response format (JSON)",
    values.response_format,
    responseFormatShape,
    '{"type": "json_schema", "json_schema": {"name", "schema"}}; empty: text',
  );
  const schema = jsonField(
    "field-variables_schema",
    "Variables schema (JSON Schema)",
    values.variables_schema,
    variablesSchemaShape,
    'e.g. {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}',
  );
  const parameters = jsonField(
    "field-parameters",
    "Parameters (JSON)",
    values.parameters ?? {},
    parametersShape,
    'e.g. {"temperature": 0.2, "max_tokens": 200}',
  );
  const description = text("description");
  const tags = text("tags");
  const folder = text("folder");
  const labels = text("labels");
  const form = h(
    "form",
    { class: "prompt-form chat-form card", "aria-label": title },
    name ? field("Name", name, "letters, digits, _ . -") : null,
    field("Model", model, "e.g. gpt-4o-mini, claude-3-5-haiku, openai/…"),
    h(
      "fieldset",
      { class: "messages-set" },
      h("legend", {}, "Messages"),
      h(
        "p",
        { class: "hint" },
        "Mustache: {{name}} fills in a value, {{#list}}…{{/list}} repeats or hides, " +
          "{{^x}}…{{/x}} shows when x is empty.",
      ),
      messages.element,
    ),
    tools.element,
    choice.element,
    format.element,
    schema.element,
    parameters.element,
    field("Description", description),
    field("Tags", tags, "comma-separated"),
    field("Folder", folder, creating ? "e.g. /support" : "e.g. /support; left empty: none"),
    field("Labels for this version", labels, "comma-separated, e.g. production"),
    h("div", { class: "actions" }, h("button", { type: "submit" }, title)),
    note,
  );
  const list = (input) =>
    input.value
      .split(",")
      .map((part) => part.trim())
      .filter(Boolean);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const read = [tools, format, schema, parameters].map((f) => f.read());
    const bad = messages.problems.map((check) => check()).filter(Boolean).length;
    const badJson = read.filter((r) => r.problem).length;
    if (!rows.length || bad || badJson) {
      const why = rows.length
        ? "Fix the fields marked above first: nothing was saved."
        : "A chat prompt needs at least one message: nothing was saved.";
      note.setAttribute("role", "alert");
      return replace(note, h("span", { class: "error" }, why));
    }
    const [toolList, answer, variables, params] = read.map((r) => r.value);
    const body = {
      messages: rows.map(rowMessage),
      model: model.value.trim(),
      parameters: params ?? {},
      tools: toolList,
      tool_choice: choice.read(),
      response_format: answer,
      variables_schema: variables,
      description: description.value.trim(),
      tags: list(tags),
      folder: folder.value.trim() || null,
      labels: list(labels),
    };
    if (creating) {
      Object.assign(body, { name: name.value.trim(), type: "chat" });
      // A new prompt leaves out what it does not set (a PATCH's null removes it instead).
      for (const key of Object.keys(body)) if (body[key] === null) delete body[key];
    }
    try {
      await submit(body);
    } catch (error) {
      const field_ = error.details?.field ? ` (field: ${error.details.field})` : "";
      note.setAttribute("role", "alert");
      replace(note, h("span", { class: "error" }, `${messageOf(error)}${field_}`));
    }
  });
  return form;
}

/** Create a chat prompt with the editor (the new-prompt page's chat form). */
export function newChatForm(onCreated) {
  return chatForm("Create prompt", { parameters: {} }, true, async (body) => {
    const { data } = await api("/prompts", { method: "POST", body });
    onCreated(data.name);
  });
}
