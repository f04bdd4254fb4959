// The prompt registry: the list (search, folder, tags), and the create and edit forms.

import { api, messageOf } from "./api.js";
import { chatForm, newChatForm } from "./chat_editor.js";
import { field, h, replace } from "./dom.js";
import * as fmt from "./format.js";
import { PAGE_SIZE, filterForm, paged } from "./paging.js";
import { can } from "./roles.js";

const FILTERS = [
  ["search", "Search", "name or words"],
  ["folder", "Folder", "e.g. /support"],
  ["tags", "Tags", "e.g. billing, faq"],
];

/** The route of prompt `name` (`suffix` for its sub-pages). */
export function promptHref(name, suffix = "") {
  return `#/prompts/${encodeURIComponent(name)}${suffix}`;
}

/** #/prompts?search=&folder=&tags=: the prompts matching the filters, a page at a time. */
export async function showPrompts(view, filters) {
  const body = h("tbody");
  const results = h("div");
  replace(
    view,
    h(
      "div",
      { class: "page-head" },
      h("h1", {}, "Prompts"),
      can("write") ? h("a", { class: "button", href: "#/prompts/+new" }, "New prompt") : null,
    ),
    promptFilters(filters),
    results,
  );
  const query = Object.fromEntries(FILTERS.map(([name]) => [name, filters.get(name)]));
  let total = 0;
  const table = h(
    "table",
    { class: "records phone-cards" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Name", "Description", "Version", "Created (UTC)"].map((label) =>
          h("th", { scope: "col", class: label === "Version" ? "num" : "" }, label),
        ),
      ),
    ),
    body,
  );
  await paged(results, h("div", { class: "table-wrap" }, table), {
    loading: "Loading…",
    fetchPage: async (cursor) => {
      const page = await api("/prompts", { query: { ...query, limit: PAGE_SIZE, cursor } });
      total = page.pagination.total ?? total;
      return page;
    },
    add: (prompts) => body.append(...prompts.map(promptRow)),
    describe: (shown) => {
      if (shown === 0) return "No prompts match.";
      const noun = total === 1 ? "prompt" : "prompts";
      return `${fmt.count(shown)} of ${fmt.count(total)} ${noun} shown.`;
    },
  });
}

function promptRow(prompt) {
  return h(
    "tr",
    {},
    h("td", { class: "lead" }, h("a", { href: promptHref(prompt.name) }, prompt.name)),
    h("td", { class: "muted", "data-label": "Description" }, prompt.description),
    h("td", { class: "num", "data-label": "Version" }, prompt.version),
    h("td", { class: "mono", "data-label": "Created (UTC)" }, fmt.time(prompt.created_at)),
  );
}

function promptFilters(filters) {
  const fields = FILTERS.map(([name, label, placeholder]) => {
    const input = h("input", {
      id: `prompt-${name}`,
      name,
      value: filters.get(name) || "",
      placeholder,
    });
    return field(label, input);
  });
  return filterForm("#/prompts", "Filter prompts", fields, "filters prompt-filters");
}

// The fields of the create and edit forms: [name, label, control, hint].
function promptFields(values, creating) {
  const text = (name, attrs = {}) => h("input", { name, value: values[name] ?? "", ...attrs });
  const area = (name, rows) => {
    const box = h("textarea", { name, rows });
    box.value = values[name] ?? "";
    return box;
  };
  return [
    creating ? ["name", "Name", text("name", { required: true }), "letters, digits, _ . -"] : null,
    [
      "template",
      "Template",
      area("template", 8),
      "{variable} fills in a value; {{ and }} are literal braces",
    ],
    [
      "model",
      "Model",
      text("model", { required: true }),
      "e.g. gpt-4o-mini, claude-3-5-haiku, openai/…",
    ],
    [
      "parameters",
      "Parameters (JSON)",
      area("parameters", 3),
      'e.g. {"temperature": 0.2, "max_tokens": 200}',
    ],
    ["description", "Description", text("description"), ""],
    ["tags", "Tags", text("tags"), "comma-separated"],
    [
      "folder",
      "Folder",
      text("folder"),
      creating ? "e.g. /support" : "e.g. /support; left empty: none",
    ],
    ["labels", "Labels for this version", text("labels"), "comma-separated, e.g. production"],
  ].filter(Boolean);
}

/** Read the form into an API body; `keep` names the fields left out when empty. */
function readForm(form, keep) {
  const body = {};
  for (const control of form.querySelectorAll("input, textarea")) {
    const value = control.value.trim();
    if (!value && keep.includes(control.name)) continue;
    if (control.name === "parameters") body.parameters = value ? JSON.parse(value) : {};
    else if (control.name === "tags" || control.name === "labels") {
      body[control.name] = value
        .split(",")
        .map((part) => part.trim())
        .filter(Boolean);
    } else body[control.name] = control.name === "template" ? control.value : value;
  }
  return body;
}

function promptForm(title, values, creating, submit) {
  const note = h("p", { class: "note", role: "status" });
  const form = h(
    "form",
    { class: "prompt-form card" },
    promptFields(values, creating).map(([name, label, control, hint]) => {
      control.id = `field-${name}`;
      return field(label, control, hint);
    }),
    h("div", { class: "actions" }, h("button", { type: "submit" }, title)),
    note,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await submit(form);
    } catch (error) {
      const message =
        error instanceof SyntaxError
          ? `Parameters are not JSON: ${error.message}`
          : messageOf(error);
      replace(note, h("span", { class: "error" }, message));
      note.setAttribute("role", "alert");
    }
  });
  return form;
}

/** #/prompts/+new: create a prompt (version 1), a text prompt or (the type chosen) a chat one. */
export function showNewPrompt(view) {
  const values = { parameters: "{}" };
  const textForm = promptForm("Create prompt", values, true, async (form) => {
    const { data } = await api("/prompts", { method: "POST", body: readForm(form, ["folder"]) });
    window.location.hash = promptHref(data.name);
  });
  const holder = h("div", {}, textForm);
  let chatPage = null;
  const choose = (type) => {
    chatPage ??= newChatForm((name) => (window.location.hash = promptHref(name)));
    replace(holder, type === "chat" ? chatPage : textForm);
  };
  const radio = (type, label, hint) =>
    h(
      "label",
      { class: "type-choice" },
      h("input", {
        type: "radio",
        name: "prompt-type",
        value: type,
        checked: type === "text",
        onchange: () => choose(type),
      }),
      h("span", {}, h("strong", {}, label), h("span", { class: "hint" }, hint)),
    );
  replace(
    view,
    h("a", { class: "back", href: "#/prompts" }, "← Prompts"),
    h("h1", {}, "New prompt"),
    h(
      "fieldset",
      { class: "type-choices" },
      h("legend", {}, "Type"),
      radio("text", "Text", "a single string with {variable} slots"),
      radio("chat", "Chat", "messages with roles, Mustache, tools, a JSON answer"),
    ),
    holder,
  );
}

/** #/prompts/<name>/edit: a new version with the changed fields. */
export async function showEditPrompt(view, name) {
  const path = `/prompts/${encodeURIComponent(name)}`;
  const { data: prompt } = await api(path);
  const { data: newest } = await api(`${path}/versions/${prompt.version}`);
  if (newest.type === "chat") return showEditChat(view, path, prompt, newest);
  const values = {
    template: newest.template,
    model: newest.model,
    parameters: JSON.stringify(newest.parameters, null, 1),
    description: prompt.description,
    tags: prompt.tags.join(", "),
    folder: prompt.folder ?? "",
  };
  replace(
    view,
    h("a", { class: "back", href: promptHref(name) }, `← ${name}`),
    h("h1", {}, `Edit ${name}`),
    h("p", { class: "muted" }, `Saving makes version ${prompt.version + 1}.`),
    promptForm("Save new version", values, false, async (form) => {
      // Every field is prefilled, so what the form holds is the new version's: an emptied
      // folder removes it (null), emptied tags and description clear them.
      const body = readForm(form, ["folder"]);
      body.folder ??= null;
      await api(path, { method: "PATCH", body });
      window.location.hash = promptHref(name);
    }),
  );
}

/** The edit page of a chat prompt: the chat editor, prefilled with the newest version. */
function showEditChat(view, path, prompt, newest) {
  const values = {
    ...newest,
    description: prompt.description,
    tags: prompt.tags.join(", "),
    folder: prompt.folder ?? "",
  };
  replace(
    view,
    h("a", { class: "back", href: promptHref(prompt.name) }, `← ${prompt.name}`),
    h("h1", {}, `Edit ${prompt.name}`),
    h("p", { class: "muted" }, `Saving makes version ${prompt.version + 1}.`),
    chatForm("Save new version", values, false, async (body) => {
      await api(path, { method: "PATCH", body });
      window.location.hash = promptHref(prompt.name);
    }),
  );
}
