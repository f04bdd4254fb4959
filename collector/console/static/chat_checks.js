// The chat editor's checks as you type: a message's Mustache must parse (mustache.js, the
// spec-compliant library vendored as released, vendor/README.md), and each JSON field must be
// JSON of the right shape. They catch the common mistakes before anything is sent; the
// collector's checks (its Mustache parser, jsonschema's meta-schemas) stay the final word, and
// its 400 is shown when it disagrees.

import Mustache from "./vendor/mustache.js";

/** Why `text` is no template the collector takes (null when it parses). */
export function templateProblem(text) {
  let tokens;
  try {
    tokens = Mustache.parse(text);
  } catch (error) {
    return `The template does not parse: ${error.message}.`;
  }
  const partial = findPartial(tokens);
  return partial === null ? null : `Partials are not supported: {{>${partial}}}.`;
}

function findPartial(tokens) {
  for (const token of tokens) {
    if (token[0] === ">") return token[1];
    if (Array.isArray(token[4])) {
      const inner = findPartial(token[4]);
      if (inner !== null) return inner;
    }
  }
  return null;
}

/** The template texts of a message's content: its text, or its text parts and image URLs. */
export function contentTexts(content) {
  if (typeof content === "string") return [content];
  if (!Array.isArray(content)) return [];
  return content.flatMap((part) => {
    if (part?.type === "text" && typeof part.text === "string") return [part.text];
    if (part?.type === "image_url" && typeof part.image_url?.url === "string") {
      return [part.image_url.url];
    }
    return [];
  });
}

/** Why `parts` is no list of content parts (null when it is one). */
export function partsProblem(parts) {
  if (!Array.isArray(parts) || parts.length === 0) {
    return "Parts must be a non-empty JSON list of {type: text | image_url} objects.";
  }
  for (const [index, part] of parts.entries()) {
    const at = `Part ${index + 1}`;
    if (part?.type === "text") {
      if (typeof part.text !== "string") return `${at}: a text part needs "text" (a string).`;
    } else if (part?.type === "image_url") {
      if (typeof part.image_url?.url !== "string" || !part.image_url.url) {
        return `${at}: an image part needs "image_url": {"url": …}.`;
      }
    } else return `${at}: "type" must be "text" or "image_url".`;
  }
  return null;
}

/**
 * Read a JSON field: {value, problem}. Empty text is no value (null) where `optional`; the
 * shape check `shape(value)` answers why the value is wrong, or null.
 */
export function readJson(text, shape, optional = true) {
  if (!text.trim()) {
    return optional ? { value: null, problem: null } : { value: null, problem: "Required." };
  }
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { value: null, problem: `Not JSON: ${error.message}.` };
  }
  return { value, problem: shape(value) };
}

const isObject = (value) => typeof value === "object" && value !== null && !Array.isArray(value);
const FUNCTION_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** Parameters: a JSON object. */
export function parametersShape(value) {
  return isObject(value) ? null : "Parameters must be a JSON object.";
}

/** Tools: a list of {"type": "function", "function": {"name", "description"?, "parameters"}}. */
export function toolsShape(value) {
  if (!Array.isArray(value)) return "Tools must be a JSON list.";
  for (const [index, tool] of value.entries()) {
    const at = `Tool ${index + 1}`;
    if (!isObject(tool) || tool.type !== "function" || !isObject(tool.function)) {
      return `${at}: must be {"type": "function", "function": {…}}.`;
    }
    if (!FUNCTION_NAME.test(tool.function.name ?? "")) {
      return `${at}: function.name must be 1-64 letters, digits, _ or -.`;
    }
    const params = tool.function.parameters;
    if (params !== undefined && !isObject(params)) {
      return `${at}: function.parameters must be a JSON Schema (an object).`;
    }
  }
  return null;
}

/** A response format: {"type": "text" | "json_object"} or a json_schema with name and schema. */
export function responseFormatShape(value) {
  if (!isObject(value)) return "The response format must be a JSON object.";
  if (value.type === "text" || value.type === "json_object") return null;
  if (value.type !== "json_schema") {
    return 'Its "type" must be "text", "json_object" or "json_schema".';
  }
  const spec = value.json_schema;
  if (!isObject(spec) || typeof spec.name !== "string" || !spec.name) {
    return 'A json_schema format needs "json_schema": {"name", "schema"}.';
  }
  if (!isObject(spec.schema)) return "json_schema.schema must be a JSON Schema (an object).";
  return null;
}

/**
 * The variables schema: a JSON Schema of "type": "object" whose properties are schemas. A
 * structural check only: the collector validates it against the JSON Schema meta-schema.
 */
export function variablesSchemaShape(value) {
  if (!isObject(value)) return "The variables schema must be a JSON object (a JSON Schema).";
  if (value.type !== "object") return 'The variables schema must have "type": "object".';
  if (value.properties !== undefined) {
    if (!isObject(value.properties)) return '"properties" must be an object.';
    for (const [name, spec] of Object.entries(value.properties)) {
      if (!isObject(spec) && typeof spec !== "boolean") {
        return `properties.${name} must be a schema (an object).`;
      }
    }
  }
  if (value.required !== undefined) {
    const names = value.required;
    if (!Array.isArray(names) || names.some((n) => typeof n !== "string")) {
      return '"required" must be a list of variable names.';
    }
  }
  return null;
}
