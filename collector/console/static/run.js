// The run panel: one field per template variable, and the streamed output as it arrives.
// EventSource cannot send a header, so the stream is a fetch POST whose body is read as
// server-sent events ("data: <json>" blocks separated by a blank line).

import { api, messageOf, request } from "./api.js";
import { h, replace } from "./dom.js";
import * as fmt from "./format.js";

/** The panel for running version `version` of prompt `name`. */
export async function runPanel(name, version) {
  const path = `/prompts/${encodeURIComponent(name)}`;
  const template = await api(`${path}/versions/${version}/template`);
  const fields = Object.keys(template.variables).map((variable) => {
    const input = h("textarea", { id: `run-${variable}`, name: variable, rows: 2 });
    return [variable, h("div", { class: "field" }, h("label", { for: input.id }, variable), input)];
  });
  const userInput = h("textarea", { id: "run-user-input", rows: 2 });
  const output = h("pre", { class: "output run-output", "aria-live": "polite" });
  const status = h("p", { class: "run-status", role: "status" });
  const button = h("button", { type: "submit" }, "Run");
  const form = h(
    "form",
    { class: "run", "aria-label": "Run this prompt" },
    fields.map(([, field]) => field),
    h(
      "div",
      { class: "field" },
      h("label", { for: userInput.id }, "User input (optional)"),
      userInput,
    ),
    button,
    status,
    output,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const variables = Object.fromEntries(fields.map(([variable, field]) => [
      variable,
      field.querySelector("textarea").value,
    ]));
    const body = { variables, stream: true };
    if (userInput.value) body.user_input = userInput.value;
    button.disabled = true;
    replace(output);
    replace(status, "Running…");
    try {
      await stream(`${path}/versions/${version}/run`, body, output, status);
    } catch (error) {
      replace(status, h("span", { class: "error" }, messageOf(error)));
    } finally {
      button.disabled = false;
    }
  });
  return form;
}

async function stream(path, body, output, status) {
  const response = await request(path, { method: "POST", body });
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trimStart())
        .join("\n");
      if (data) show(JSON.parse(data), output, status);
    }
  }
}

function show(event, output, status) {
  if (event.type === "chunk") output.append(event.content ?? "");
  else if (event.type === "start") replace(status, "Streaming…");
  else if (event.type === "error") {
    replace(status, h("span", { class: "error" }, `${event.error.message} (${event.error.code})`));
  } else if (event.type === "end") {
    const usage = event.usage;
    replace(
      status,
      `Done: ${fmt.count(usage.total_tokens)} tokens, ${fmt.cost(usage.estimated_cost_usd)}.`,
    );
  }
}
