// A chat prompt's version as a reader sees it: its messages (role, text and image parts, a
// placeholder as the row where a conversation's history goes), tools, tool choice, answer
// format and the variables its schema types. Everything is text nodes: a message's text, an
// image's URL (shown, never loaded: it may be a template, or another site's) and a schema
// are the version author's, shown as written.

import { asText, facts, h } from "./dom.js";

/** The messages of a chat version as a list, one item per message or placeholder. */
export function messageList(messages) {
  return h(
    "ol",
    { class: "chat-messages", "aria-label": "Messages" },
    (messages ?? []).map((message, index) =>
      message.type === "placeholder" ? placeholderRow(message, index) : messageRow(message, index),
    ),
  );
}

function placeholderRow(message, index) {
  return h(
    "li",
    { class: "chat-message placeholder", "data-index": index },
    h(
      "div",
      { class: "chat-head" },
      h("span", { class: "badge role-placeholder" }, "placeholder"),
      h("span", { class: "mono" }, message.name),
    ),
    h(
      "p",
      { class: "placeholder-note" },
      "A conversation's history goes here: the messages a run or a compile passes as ",
      h("span", { class: "mono" }, `placeholders.${message.name}`),
      ".",
    ),
  );
}

function messageRow(message, index) {
  const extras = [
    message.name ? ["Name", message.name] : null,
    message.tool_call_id ? ["Answers tool call", message.tool_call_id] : null,
  ].filter(Boolean);
  return h(
    "li",
    { class: `chat-message role-${message.role}`, "data-index": index },
    h(
      "div",
      { class: "chat-head" },
      h("span", { class: `badge role role-${message.role}` }, message.role),
      extras.map(([term, value]) => h("span", { class: "muted" }, `${term}: `, value)),
    ),
    contentOf(message.content),
    message.tool_calls?.length ? toolCalls(message.tool_calls) : null,
  );
}

/** A message's content: its text, or its parts (text, and images by their URL). */
function contentOf(content) {
  if (content === undefined || content === null) return null;
  if (typeof content === "string") return h("pre", { class: "chat-text" }, content);
  return h(
    "ul",
    { class: "chat-parts" },
    content.map((part) => {
      if (part.type === "text") return h("li", {}, h("pre", { class: "chat-text" }, part.text));
      if (part.type === "image_url") {
        const detail = part.image_url?.detail;
        return h(
          "li",
          { class: "image-part" },
          h("span", { class: "badge" }, "image"),
          " ",
          h("span", { class: "mono image-url" }, part.image_url?.url ?? ""),
          detail ? h("span", { class: "muted" }, ` (detail: ${detail})`) : null,
        );
      }
      return h("li", {}, h("pre", {}, asText(part)));
    }),
  );
}

function toolCalls(calls) {
  return h(
    "ul",
    { class: "chat-parts" },
    calls.map((call) =>
      h(
        "li",
        {},
        h("span", { class: "badge" }, "tool call"),
        " ",
        h(
          "span",
          { class: "mono" },
          `${call.function?.name ?? "?"}(${call.function?.arguments ?? ""})`,
        ),
      ),
    ),
  );
}

/** The tools as cards: each function's name, description and parameters' schema. */
export function toolList(tools) {
  if (!tools?.length) return h("p", { class: "muted" }, "No tools.");
  return h(
    "ul",
    { class: "tool-list" },
    tools.map((tool) => {
      const fn = tool.function ?? {};
      return h(
        "li",
        { class: "tool" },
        h("h3", { class: "mono" }, fn.name ?? "(no name)"),
        fn.description ? h("p", {}, fn.description) : null,
        fn.parameters ? h("pre", { class: "schema" }, asText(fn.parameters)) : null,
      );
    }),
  );
}

/** How the model may use the tools, in words. */
export function toolChoiceText(choice) {
  if (choice === undefined || choice === null) return "not set (the provider's default)";
  if (typeof choice === "string") return choice;
  return `the function ${choice.function?.name ?? "?"}, always`;
}

/** The answer's format: text, any JSON object, or JSON to a schema (shown). */
export function responseFormatView(format) {
  if (!format) return h("p", { class: "muted" }, "Text (not set).");
  if (format.type !== "json_schema") {
    return h("p", {}, format.type === "json_object" ? "Any JSON object" : format.type);
  }
  const spec = format.json_schema ?? {};
  return [
    facts([
      ["Type", "JSON to a schema"],
      ["Name", spec.name],
      ["Strict", spec.strict === undefined ? "" : String(spec.strict)],
    ]),
    h("pre", { class: "schema" }, asText(spec.schema ?? {})),
  ];
}

/** The variables the schema types: name, type, whether required; the schema itself below. */
export function variablesView(schema) {
  if (!schema) {
    return h(
      "p",
      { class: "muted" },
      "No schema: every variable the messages use is a required string.",
    );
  }
  const required = new Set(schema.required ?? []);
  const rows = Object.entries(schema.properties ?? {}).map(([name, spec]) =>
    h(
      "tr",
      {},
      h("th", { scope: "row", class: "mono" }, name),
      h("td", {}, typeName(spec)),
      h("td", {}, required.has(name) ? "required" : "optional"),
      h("td", { class: "muted" }, spec?.description ?? ""),
    ),
  );
  return [
    rows.length ? h("table", { class: "kv variables" }, h("tbody", {}, rows)) : null,
    h(
      "details",
      { class: "raw-schema" },
      h("summary", {}, "The schema as JSON"),
      h("pre", { class: "schema" }, asText(schema)),
    ),
  ];
}

/** A property's JSON Schema type as a word ("string", "integer or null", "any"). */
export function typeName(spec) {
  const type = spec?.type;
  if (Array.isArray(type)) return type.join(" or ");
  if (type) return type;
  if (spec?.enum) return "one of " + spec.enum.map((v) => JSON.stringify(v)).join(", ");
  return "any";
}

/** The sections of a chat version past its messages: [title, content] pairs. */
export function chatSections(version) {
  return [
    [
      "Tools",
      [facts([["Tool choice", toolChoiceText(version.tool_choice)]]), toolList(version.tools)],
    ],
    ["Response format", responseFormatView(version.response_format)],
    ["Variables", variablesView(version.variables_schema)],
    version.config === undefined || version.config === null
      ? null
      : ["Config", h("pre", { class: "schema" }, asText(version.config))],
  ].filter(Boolean);
}
