// The run panel's fields for a chat prompt: one input per variable, typed by the version's
// template payload (`variables: {name: {type, required}}`, from its variables schema), and
// one JSON text area per placeholder (the messages of a conversation's history).

import { field, h } from "./dom.js";

const NUMBERS = new Set(["integer", "number"]);

/**
 * The control for a variable of `type`; answers {control, read() → {value}, {blank} or
 * {problem}}.
 */
function control(name, type) {
  const id = `run-${name}`;
  if (NUMBERS.has(type)) {
    const input = h("input", { id, name, type: "number", step: type === "integer" ? 1 : "any" });
    return {
      control: input,
      read: () => {
        if (!input.value.trim()) return { blank: true };
        const value = Number(input.value);
        if (!Number.isFinite(value) || (type === "integer" && !Number.isInteger(value))) {
          const kind = type === "integer" ? "a whole number" : "a number";
          return { problem: `${name} must be ${kind}` };
        }
        return { value };
      },
    };
  }
  if (type === "boolean") {
    const select = h(
      "select",
      { id, name },
      ["", "true", "false"].map((v) => h("option", { value: v }, v || "(not given)")),
    );
    return {
      control: select,
      read: () => (select.value ? { value: select.value === "true" } : { blank: true }),
    };
  }
  const box = h("textarea", { id, name, rows: 2 });
  if (type === "string") {
    const read = () => (box.value.trim() ? { value: box.value } : { blank: true });
    return { control: box, read };
  }
  // Lists, objects and untyped section variables ("any") are written as JSON.
  box.spellcheck = false;
  return {
    control: box,
    read: () => {
      if (!box.value.trim()) return { blank: true };
      try {
        return { value: JSON.parse(box.value) };
      } catch (error) {
        return { problem: `${name} is not JSON (${error.message})` };
      }
    },
  };
}

/**
 * The fields of a chat prompt's run panel from its template payload: answers {elements,
 * read() → {variables, placeholders} or {problems: [text]}}. A blank required string is
 * missing unless its "send empty" box is ticked; a blank optional variable is left out.
 */
export function chatRunFields(template) {
  const variables = Object.entries(template.variables ?? {}).map(([name, spec]) => {
    const { control: input, read } = control(name, spec.type);
    const empty =
      spec.type === "string"
        ? h("input", {
            type: "checkbox",
            id: `run-empty-${name}`,
            "aria-label": "empty value",
            "aria-describedby": `run-label-${name}`,
          })
        : null;
    const hint = `${spec.type === "any" ? "JSON, any value" : spec.type}${
      spec.required ? ", required" : ", optional"
    }${["string", "integer", "number", "boolean"].includes(spec.type) ? "" : " (JSON)"}`;
    const box = field(name, input, hint);
    if (empty) {
      box.append(
        h(
          "span",
          { class: "check" },
          empty,
          h("span", { "aria-hidden": "true", onclick: () => empty.click() }, "send empty"),
        ),
      );
    }
    box.querySelector("label").id = `run-label-${name}`;
    return { name, spec, read, empty, element: box };
  });
  const placeholders = (template.placeholders ?? []).map((name) => {
    const box = h("textarea", { id: `run-placeholder-${name}`, rows: 3, spellcheck: "false" });
    box.value = "[]";
    const element = field(
      `${name} (placeholder)`,
      box,
      'its messages as JSON, e.g. [{"role": "user", "content": "Hi"}]; [] for none',
    );
    return { name, box, element };
  });
  const read = () => {
    const problems = [];
    const missing = [];
    const values = {};
    for (const v of variables) {
      const got = v.read();
      if (got.problem) problems.push(got.problem);
      else if (!got.blank) values[v.name] = got.value;
      else if (v.empty?.checked) values[v.name] = "";
      else if (v.spec.required) missing.push(v.name);
    }
    if (missing.length) {
      problems.unshift(
        `Fill in ${missing.join(", ")}` +
          (missing.some((n) => variables.find((v) => v.name === n).empty)
            ? ", or tick a text's “send empty” box to send an empty value"
            : ""),
      );
    }
    const filled = {};
    for (const p of placeholders) {
      try {
        const messages = JSON.parse(p.box.value || "[]");
        if (!Array.isArray(messages)) throw new Error("not a list");
        filled[p.name] = messages;
      } catch (error) {
        problems.push(`${p.name} must be a JSON list of messages (${error.message})`);
      }
    }
    return problems.length ? { problems } : { variables: values, placeholders: filled };
  };
  const elements = [...variables.map((v) => v.element), ...placeholders.map((p) => p.element)];
  return { elements, read };
}
