// The run panel: one field per template variable, and the streamed output as it arrives.
// EventSource cannot send a header, so the stream is a fetch POST whose body is read as
// server-sent events ("data: <json>" blocks separated by a blank line).

import { api, messageOf, readEvents, request } from "./api.js";
import { chatRunFields } from "./chat_run.js";
import { costText, field, h, replace } from "./dom.js";
import * as fmt from "./format.js";

/**
 * The panel for running version `version` of prompt `name`. A blank variable is missing (the
 * API would fill it with nothing, "Say hello to , …"): the panel names it and sends nothing,
 * unless its "empty" box says an empty value is meant.
 */
export async function runPanel(name, version) {
  const path = `/prompts/${encodeURIComponent(name)}`;
  const template = await api(`${path}/versions/${version}/template`);
  if (template.type === "chat") return chatPanel(path, version, template);
  const variables = Object.keys(template.variables).map((variable) => {
    const input = h("textarea", { id: `run-${variable}`, name: variable, rows: 2 });
    // Named "empty value" and described by its variable's label, not labelled with the
    // variable's name: the variable's own label must name its text box alone.
    const empty = h("input", {
      type: "checkbox",
      id: `run-empty-${variable}`,
      "aria-label": "empty value",
      "aria-describedby": `run-label-${variable}`,
    });
    const check = h(
      "span",
      { class: "check" },
      empty,
      h("span", { "aria-hidden": "true", onclick: () => empty.click() }, "send empty"),
    );
    const box = field(variable, input, check);
    box.querySelector("label").id = `run-label-${variable}`;
    return { variable, input, empty, field: box };
  });
  const userInput = h("textarea", { id: "run-user-input", rows: 2 });
  const output = h("pre", { class: "output run-output", "aria-live": "polite" });
  const status = h("p", { class: "run-status", role: "status" });
  const button = h("button", { type: "submit" }, "Run");
  const form = h(
    "form",
    { class: "run", "aria-label": "Run this prompt" },
    variables.map((v) => v.field),
    field("User input (optional)", userInput),
    button,
    status,
    output,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const missing = variables.filter((v) => !v.input.value.trim() && !v.empty.checked);
    if (missing.length) {
      const names = missing.map((v) => v.variable).join(", ");
      replace(output);
      return replace(
        status,
        h(
          "span",
          { class: "error", role: "alert" },
          `Fill in ${names}, or tick its “send empty” box to send an empty value. ` +
            "Nothing was run.",
        ),
      );
    }
    const body = {
      variables: Object.fromEntries(
        variables.map((v) => [
          v.variable,
          v.empty.checked && !v.input.value.trim() ? "" : v.input.value,
        ]),
      ),
      stream: true,
    };
    if (userInput.value) body.user_input = userInput.value;
    await run(`${path}/versions/${version}/run`, body, { button, output, status });
  });
  return form;
}

/**
 * A chat prompt's panel: variables typed by its schema (chat_run.js), a JSON text area per
 * placeholder, the streamed answer and, when the model calls tools, the calls.
 */
function chatPanel(path, version, template) {
  const fields = chatRunFields(template);
  const userInput = h("textarea", { id: "run-user-input", rows: 2 });
  const output = h("pre", { class: "output run-output", "aria-live": "polite" });
  const status = h("p", { class: "run-status", role: "status" });
  const button = h("button", { type: "submit" }, "Run");
  const form = h(
    "form",
    // Our checks say what is wrong (a number's step included), not the browser's bubbles.
    { class: "run", "aria-label": "Run this prompt", novalidate: true },
    fields.elements,
    field("User input (optional)", userInput, "sent as a last user message"),
    button,
    status,
    output,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const read = fields.read();
    if (read.problems) {
      replace(output);
      return replace(
        status,
        h(
          "span",
          { class: "error", role: "alert" },
          `${read.problems.join(". ")}. Nothing was run.`,
        ),
      );
    }
    const body = { variables: read.variables, placeholders: read.placeholders, stream: true };
    if (userInput.value) body.user_input = userInput.value;
    await run(`${path}/versions/${version}/run`, body, { button, output, status });
  });
  return form;
}

async function stream(path, body, output, status) {
  const response = await request(path, { method: "POST", body });
  let requestId = null;
  await readEvents(response, (event) => {
    requestId = show(event, output, status, requestId);
  });
}

/** Run a version with `body`, streaming its answer into `output`; the button waits meanwhile. */
async function run(path, body, { button, output, status }) {
  button.disabled = true;
  replace(output);
  replace(status, "Running…");
  try {
    await stream(path, body, output, status);
  } catch (error) {
    replace(status, h("span", { class: "error" }, messageOf(error)));
  } finally {
    button.disabled = false;
  }
}

/** Show one event of the stream; answers the run's record id (sent by "start"). */
function show(event, output, status, requestId) {
  if (event.type === "chunk") output.append(event.content ?? "");
  else if (event.type === "start") {
    replace(status, "Streaming…");
    return event.request_id ?? requestId;
  } else if (event.type === "error") {
    replace(
      status,
      h("span", { class: "error" }, `${event.error.message} (${event.error.code})`),
      recordLink(requestId),
    );
  } else if (event.type === "end") {
    const usage = event.usage;
    replace(
      status,
      `Done: ${fmt.count(usage.total_tokens)} tokens, `,
      costText(usage.estimated_cost_usd, event.cost_known),
      ".",
      // A chat run says how it finished and which tools the model called.
      event.finish_reason && event.finish_reason !== "stop"
        ? ` Finished: ${event.finish_reason}.`
        : null,
      recordLink(requestId),
      toolCallList(event.tool_calls),
    );
  }
  return requestId;
}

/** " See the record." linking to the run's record in the request log. */
function recordLink(requestId) {
  if (!requestId) return null;
  const href = `#/requests/${encodeURIComponent(requestId)}`;
  return [" ", h("a", { href, class: "run-record" }, "See the record")];
}

/** The tools a chat run's model called: each name and its arguments (a JSON string). */
function toolCallList(calls) {
  if (!calls?.length) return null;
  return h(
    "ul",
    { class: "chat-parts run-tool-calls", "aria-label": "Tool calls" },
    calls.map((call) =>
      h(
        "li",
        {},
        h("span", { class: "badge" }, "tool call"),
        " ",
        h("span", { class: "mono" }, `${call.name}(${call.arguments})`),
      ),
    ),
  );
}
