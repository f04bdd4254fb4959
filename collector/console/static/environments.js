// The environment picker every list shows (docs/api-notes.md, "Environments"): the project's
// environments (GET /v1/environments), chosen as the lists' `environment=` and remembered in
// the address with the other filters. Its default is the API's: every environment but the
// service's own (promptrail-…, an experiment's runs).

import { api } from "./api.js";
import { field, h } from "./dom.js";

// Short enough for the filter row at any width; the title says what it means.
const DEFAULT_LABEL = "Default";
const DEFAULT_TITLE = "Default: every environment but the service's own (experiment runs)";

function option(value, label, chosen) {
  return h("option", { value, selected: value === chosen }, label);
}

/** The "Environment" field of a list's filter form; `filters` are the route's. */
export function environmentField(filters, id = "filter-environment") {
  const chosen = filters.get("environment") || "";
  const select = h(
    "select",
    { id, name: "environment", title: DEFAULT_TITLE },
    option("", DEFAULT_LABEL, chosen),
    option("all", "All", chosen),
    // The chosen one shows at once, before the list of names arrives.
    chosen && chosen !== "all" ? option(chosen, chosen, chosen) : null,
  );
  api("/environments")
    .then(({ data }) => {
      for (const environment of data) {
        if (environment.name === chosen) continue;
        select.append(option(environment.name, environment.name, chosen));
      }
    })
    .catch(() => {}); // the picker keeps its first options; the list shows any error itself
  return field("Environment", select);
}
