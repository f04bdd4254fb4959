// Datasets (issue 33): the list with a create form, one dataset's items (one API page at a
// time), and the "Add to dataset" forms the request log uses, for its current filters and for
// one record. Items hold variables and outputs copied from records: untrusted text, made into
// text nodes by dom.js like everything else.

import { ApiError, api, messageOf } from "./api.js";
import { facts, field, goTo, h, longText, replace, section } from "./dom.js";
import * as fmt from "./format.js";
import { PAGE_SIZE, paged } from "./paging.js";
import { listRow, listTable } from "./traces.js";
import { can } from "./roles.js";

/** The route of dataset `name` (or of one of its sub-pages, `rest` starting with "/" or "?"). */
export function datasetHref(name, rest = "") {
  return `#/datasets/${encodeURIComponent(name)}${rest}`;
}

const DATASET_COLUMNS = [
  ["Name", ""],
  ["Description", ""],
  ["Items", "num"],
  ["Created (UTC)", ""],
];

/** #/datasets: every dataset of the project, newest first, and a form to create one. */
export async function showDatasets(view) {
  const body = h("tbody");
  const results = h("div", { class: "results" });
  replace(
    view,
    h(
      "div",
      { class: "page-head" },
      h("h1", {}, "Datasets"),
      h("a", { class: "button quiet", href: "#/experiments" }, "Experiments"),
    ),
    can("write") ? createForm() : null,
    results,
  );
  await paged(results, listTable(DATASET_COLUMNS, body, "Datasets"), {
    loading: "Loading…",
    fetchPage: (cursor) => api("/datasets", { query: { limit: PAGE_SIZE, cursor } }),
    add: (datasets) =>
      body.append(
        ...datasets.map((dataset) =>
          listRow(
            DATASET_COLUMNS,
            [
              h("a", { class: "plain", href: datasetHref(dataset.name) }, dataset.name),
              dataset.description ? h("span", { class: "muted" }, dataset.description) : "",
              fmt.count(dataset.item_count),
              h("span", { class: "mono" }, fmt.time(dataset.created_at)),
            ],
            datasetHref(dataset.name),
          ),
        ),
      ),
    describe: (shown, more) =>
      shown === 0
        ? "No datasets yet: create one here, or add records to one from the request log."
        : fmt.shown(shown, "dataset", "datasets", more),
  });
}

function createForm() {
  const name = h("input", {
    id: "dataset-name",
    name: "name",
    required: true,
    placeholder: "e.g. support-hard-cases",
    autocomplete: "off",
  });
  const description = h("input", {
    id: "dataset-description",
    name: "description",
    placeholder: "optional",
  });
  const note = h("p", { class: "action-note", role: "status" });
  const form = h(
    "form",
    { class: "attach create-dataset", "aria-label": "New dataset" },
    field("New dataset", name),
    field("Description", description),
    h("button", { type: "submit" }, "Create"),
    note,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const body = { name: name.value.trim() };
      if (description.value.trim()) body.description = description.value.trim();
      await api("/datasets", { method: "POST", body });
      goTo(datasetHref(body.name), form);
    } catch (error) {
      replace(note, h("span", { class: "error", role: "alert" }, messageOf(error)));
    }
  });
  return form;
}

/** #/datasets/<name>: the dataset's facts, its items in the order added, and its experiments. */
export async function showDataset(view, name) {
  const path = `/datasets/${encodeURIComponent(name)}`;
  const { data: dataset } = await api(path);
  const list = h("ol", { class: "items", "aria-label": "Items" });
  const results = h("div", { class: "results" });
  const note = h("p", { class: "action-note", role: "status" });
  replace(
    view,
    h("a", { class: "back", href: "#/datasets" }, "← Datasets"),
    h(
      "div",
      { class: "page-head" },
      h("h1", {}, dataset.name),
      h(
        "div",
        { class: "export" },
        h(
          "a",
          {
            class: "button quiet",
            href: `#/experiments?${new URLSearchParams({ dataset: dataset.name })}`,
          },
          "Experiments on it",
        ),
        can("write") ? deleteDatasetButton(path, dataset.name, note) : null,
      ),
    ),
    note,
    facts([
      ["Description", dataset.description ?? ""],
      ["Items", fmt.count(dataset.item_count)],
      ["Created (UTC)", fmt.time(dataset.created_at)],
      ["Id", h("span", { class: "mono" }, dataset.id)],
    ]),
    results,
  );
  await paged(results, list, {
    loading: "Loading items…",
    fetchPage: (cursor) => api(`${path}/items`, { query: { limit: PAGE_SIZE, cursor } }),
    add: (items) => list.append(...items.map((item) => itemCard(path, item, note))),
    describe: (shown, more) =>
      shown === 0
        ? "No items yet. Add records from the request log (its “Add to dataset” button)."
        : fmt.shown(shown, "item", "items", more),
  });
}

function deleteDatasetButton(path, name, note) {
  const button = h("button", { type: "button", class: "quiet" }, "Delete dataset");
  button.addEventListener("click", async () => {
    // A dataset's items cannot be brought back: ask once.
    if (!window.confirm(`Delete dataset ${name} and its items?`)) return;
    try {
      await api(path, { method: "DELETE" });
      goTo("#/datasets", button);
    } catch (error) {
      replace(note, h("span", { class: "error", role: "alert" }, messageOf(error)));
    }
  });
  return button;
}

function itemCard(path, item, note) {
  // Items made from one record's detail keep its id in their metadata (the items route has
  // no source field); those made from the log's filters in source_request_id.
  const fromMeta = item.metadata?.source_request_id;
  const source = item.source_request_id ?? (typeof fromMeta === "string" ? fromMeta : null);
  const edit = h("button", { type: "button", class: "quiet small" }, "Edit");
  const remove = h("button", { type: "button", class: "quiet small" }, "Remove");
  const body = h("div", { class: "item-body" });
  const card = h(
    "li",
    { class: "card item", "data-item-id": item.id },
    h(
      "p",
      { class: "item-head" },
      h("span", { class: "mono item-id" }, item.id),
      source ? h("a", { href: `#/requests/${encodeURIComponent(source)}` }, "its record") : null,
      // Hidden from who may not write (still made: the handlers below hang on them).
      can("write") ? [edit, remove] : null,
    ),
    body,
  );
  let current = item;
  const show = () => replace(body, itemPair(current));
  show();
  edit.addEventListener("click", () => {
    edit.disabled = true;
    replace(
      body,
      itemEditor(path, current, {
        saved: (stored) => {
          current = stored;
          show();
          edit.disabled = false;
          replace(note, `Saved item ${stored.id}.`);
          edit.focus();
        },
        cancelled: () => {
          show();
          edit.disabled = false;
          edit.focus();
        },
      }),
    );
  });
  remove.addEventListener("click", async () => {
    try {
      await api(`${path}/items/${encodeURIComponent(item.id)}`, { method: "DELETE" });
      card.remove();
      replace(note, `Removed item ${item.id}.`);
    } catch (error) {
      replace(note, h("span", { class: "error", role: "alert" }, messageOf(error)));
    }
  });
  return card;
}

function itemPair(item) {
  return h(
    "div",
    { class: "pair" },
    h("div", {}, h("h3", {}, "Input variables"), longText(item.input_variables)),
    h(
      "div",
      {},
      h("h3", {}, "Expected output"),
      item.expected_output === null
        ? h("p", { class: "muted" }, "none")
        : longText(item.expected_output, "output"),
    ),
  );
}

/**
 * An item's edit form: its input variables (a JSON object) and expected output (text, or a
 * JSON object when the item's is one; empty for none). Saved, the item is posted again with
 * its id, which replaces it (its metadata kept).
 */
function itemEditor(path, item, { saved, cancelled }) {
  const id = `edit-${item.id.replace(/[^A-Za-z0-9_-]/g, "_")}`;
  const structured = item.expected_output !== null && typeof item.expected_output === "object";
  const variables = h("textarea", { id: `${id}-variables`, rows: 6, class: "mono" });
  variables.value = JSON.stringify(item.input_variables, null, 2);
  const expected = h("textarea", { id: `${id}-expected`, rows: 4 });
  expected.value = structured
    ? JSON.stringify(item.expected_output, null, 2)
    : (item.expected_output ?? "");
  const status = h("p", { class: "action-note", role: "status" });
  const save = h("button", { type: "submit" }, "Save item");
  const cancel = h("button", { type: "button", class: "quiet" }, "Cancel");
  cancel.addEventListener("click", cancelled);
  const form = h(
    "form",
    { class: "item-edit", "aria-label": `Edit item ${item.id}` },
    h(
      "div",
      { class: "pair" },
      field("Input variables", variables, "a JSON object of the prompt's variables"),
      field(
        "Expected output",
        expected,
        structured ? "a JSON object; empty for none" : "text; empty for none",
      ),
    ),
    h("div", { class: "actions" }, save, cancel),
    status,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const fail = (text) => replace(status, h("span", { class: "error", role: "alert" }, text));
    let inputVariables;
    let expectedOutput = expected.value.trim() === "" ? null : expected.value;
    try {
      inputVariables = JSON.parse(variables.value);
      if (structured && expectedOutput !== null) expectedOutput = JSON.parse(expectedOutput);
    } catch (error) {
      return fail(`Not JSON: ${error.message}`);
    }
    const isObject = (value) =>
      value !== null && typeof value === "object" && !Array.isArray(value);
    if (!isObject(inputVariables)) return fail("Input variables must be a JSON object.");
    if (structured && expectedOutput !== null && !isObject(expectedOutput)) {
      return fail("The expected output must be a JSON object.");
    }
    const changed = {
      id: item.id,
      input_variables: inputVariables,
      expected_output: expectedOutput,
      metadata: item.metadata ?? {},
    };
    save.disabled = true;
    replace(status, "Saving…");
    try {
      const { data } = await api(`${path}/items`, { method: "POST", body: { items: [changed] } });
      if (data.rejected?.length) return fail(data.rejected[0].error?.message ?? "Not saved.");
      saved({ ...item, ...changed });
    } catch (error) {
      fail(messageOf(error));
    } finally {
      save.disabled = false;
    }
  });
  queueMicrotask(() => variables.focus());
  return form;
}

/** The project's dataset names, for a picker's suggestions (one page of 100: a hint only). */
async function datasetNames() {
  try {
    const { data } = await api("/datasets", { query: { limit: 100 } });
    return data.map((dataset) => dataset.name);
  } catch {
    return [];
  }
}

/**
 * A dataset name input with the project's datasets as suggestions; a name not in use yet is a
 * new dataset, created when the form is sent.
 */
async function datasetInput(id) {
  const names = await datasetNames();
  const list = h(
    "datalist",
    { id: `${id}-names` },
    names.map((name) => h("option", { value: name })),
  );
  const input = h("input", {
    id,
    list: list.id,
    required: true,
    autocomplete: "off",
    placeholder: names[0] ? `e.g. ${names[0]} or a new name` : "a new dataset's name",
  });
  return [input, list];
}

/**
 * Make dataset `name` unless it exists: a name among `known` (the picker's suggestions) is not
 * created again, and a name in use is no error here either (it is the one meant).
 */
async function ensureDataset(name, known) {
  if ([...known.options].some((option) => option.value === name)) return;
  try {
    await api("/datasets", { method: "POST", body: { name } });
  } catch (error) {
    if (!(error instanceof ApiError && error.code === "DATASET_ALREADY_EXISTS")) throw error;
  }
  known.append(h("option", { value: name }));
}

function outputCheckbox(id) {
  const box = h("input", { id, type: "checkbox", checked: true });
  return [
    box,
    h("label", { for: id, class: "check-label" }, box, " Its output as the expected answer"),
  ];
}

function done(note, text, name) {
  replace(note, text, " ", h("a", { href: datasetHref(name) }, `Open ${name}`));
}

function failed(note, error) {
  replace(note, h("span", { class: "error", role: "alert" }, messageOf(error)));
}

/**
 * The request log's "Add to dataset": the records its current filters select (`filters` in the
 * body shape of POST …/items/from-requests, score filters as keys), up to `limit`, each an item
 * whose id is the record's (adding a record twice makes one item).
 */
export async function addFromLogForm(filters) {
  const [name, names] = await datasetInput("log-dataset");
  const limit = h("input", {
    id: "log-limit",
    type: "number",
    min: 1,
    max: 10000,
    value: 1000,
    required: true,
  });
  const [asExpected, asExpectedLabel] = outputCheckbox("log-as-expected");
  const note = h("p", { class: "action-note", role: "status" });
  const form = h(
    "form",
    { class: "attach add-to-dataset", "aria-label": "Add these requests to a dataset" },
    field("Dataset", name),
    names,
    field("At most", limit, "records, newest first"),
    asExpectedLabel,
    h("button", { type: "submit" }, "Add to dataset"),
    note,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const chosen = name.value.trim();
    replace(note, "Adding…");
    try {
      await ensureDataset(chosen, names);
      const { data } = await api(`/datasets/${encodeURIComponent(chosen)}/items/from-requests`, {
        method: "POST",
        body: { filters, limit: Number(limit.value), output_as_expected: asExpected.checked },
      });
      const noun = data.accepted === 1 ? "record" : "records";
      done(note, `Added ${fmt.count(data.accepted)} ${noun} to ${chosen}.`, chosen);
    } catch (error) {
      failed(note, error);
    }
  });
  return form;
}

// An item id takes these characters only (docs/api-notes.md, "Datasets and experiments");
// a record id outside them gets a new one.
const ITEM_ID = /^[A-Za-z0-9_.:-]{1,128}$/;

/**
 * A record's "Add to dataset": one item of its variables (and its output as the expected
 * answer when asked), with the record's id as the item's, as the log's form makes them.
 */
export async function addRecordForm(record) {
  const [name, names] = await datasetInput("record-dataset");
  const [asExpected, asExpectedLabel] = outputCheckbox("record-as-expected");
  const note = h("p", { class: "action-note", role: "status" });
  const content = record.output?.content;
  const form = h(
    "form",
    { class: "add-to-dataset one", "aria-label": "Add this record to a dataset" },
    field("Dataset", name),
    names,
    typeof content === "string" ? asExpectedLabel : null,
    h("button", { type: "submit" }, "Add"),
    note,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const chosen = name.value.trim();
    const item = {
      input_variables: record.input_variables || {},
      // The items route has no source field: the record's id is kept in the item's metadata.
      metadata: { source_request_id: record.id },
    };
    if (ITEM_ID.test(record.id)) item.id = record.id;
    if (typeof content === "string" && asExpected.checked) item.expected_output = content;
    try {
      await ensureDataset(chosen, names);
      const { data } = await api(`/datasets/${encodeURIComponent(chosen)}/items`, {
        method: "POST",
        body: { items: [item] },
      });
      if (data.rejected.length) {
        const why = data.rejected[0].error;
        return failed(note, new ApiError(400, why));
      }
      done(note, `Added to ${chosen}.`, chosen);
    } catch (error) {
      failed(note, error);
    }
  });
  return form;
}

/**
 * The request log's "Add to dataset" panel (a disclosure, so the log keeps its place): the form
 * is made when first opened, since it asks the API for the dataset names.
 */
export function addFromLogPanel(filters) {
  const body = h("div", { class: "add-body" }, h("p", { class: "muted" }, "Loading…"));
  const panel = h(
    "details",
    { class: "add-panel" },
    h("summary", {}, "Add these requests to a dataset"),
    body,
  );
  let made = false;
  panel.addEventListener("toggle", async () => {
    if (!panel.open || made) return;
    made = true;
    replace(body, await addFromLogForm(filters));
    body.querySelector("input")?.focus();
  });
  return panel;
}

/** A record detail's "Add to dataset" card; its form fills in once the names are known. */
export function addRecordPanel(record) {
  const body = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  addRecordForm(record).then((form) => replace(body, form));
  return section("Add to dataset", body, "add-record");
}
