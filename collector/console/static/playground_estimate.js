// The playground's estimate before "Run all": one POST /v1/playground/estimates per run the page
// would send (the same bodies), summed, recomputed a moment after the prompt, inputs, columns
// or max cost change. The collector makes it from the run's own plan and calls no provider, so
// the figure is the one the runs' start events then report (docs/api-notes.md, "Playground").

import { api, messageOf } from "./api.js";
import { h, replace } from "./dom.js";
import * as fmt from "./format.js";

// How long the page waits after a change before it asks again.
const DEBOUNCE_MS = 400;

const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

/**
 * The estimate line: `plan()` answers the runs "Run all" would send ({jobs: [{body}], picked}
 * or {problem}) and `names()` the variables each row must fill. Answers {element, schedule()}.
 */
export function estimatePreview(plan, names) {
  const element = h("p", { class: "pg-preview", role: "status", "aria-live": "polite" });
  let timer = null;
  let asked = 0;

  const show = async (turn) => {
    const planned = plan();
    if (planned.problem) {
      const why = `No estimate yet: ${planned.problem}.`;
      return replace(element, h("span", { class: "muted" }, why));
    }
    const { jobs, picked } = planned;
    // A row missing a variable would only be refused (400): say so instead of asking.
    if (!picked.dataset) {
      const wanted = names();
      const short = jobs.find((job) => wanted.some((n) => !(n in (job.body.variables ?? {}))));
      if (short) {
        return replace(
          element,
          h("span", { class: "muted" }, "No estimate yet: fill every row's variables."),
        );
      }
    }
    replace(element, h("span", { class: "muted" }, "Estimating…"));
    let estimates;
    try {
      estimates = await Promise.all(
        jobs.map((job) => api("/playground/estimates", { method: "POST", body: job.body })),
      );
    } catch (error) {
      if (turn !== asked) return;
      return replace(element, h("span", { class: "error" }, `No estimate: ${messageOf(error)}`));
    }
    if (turn !== asked) return; // a later change asked again: its answer is the one to show
    const data = estimates.map((answer) => answer.data);
    const total = data.reduce((sum, d) => sum + (d.estimated_cost_usd ?? 0), 0);
    const cells = data.reduce((sum, d) => sum + (d.cells?.length ?? 0), 0);
    const methods = [...new Set(data.map((d) => d.estimate_method))].join(", ");
    const max = jobs[0]?.body.max_cost_usd;
    const over = max === undefined ? 0 : data.filter((d) => d.estimated_cost_usd > max).length;
    replace(
      element,
      "Estimate before running: ",
      h("strong", { class: "pg-preview-cost" }, fmt.cost(total)),
      ` for ${plural(cells, "cell")} in ${plural(jobs.length, "run")} (${methods}; output ` +
        "counted at max_tokens, else 1,024 tokens).",
      over
        ? h(
            "span",
            { class: "error pg-preview-over" },
            ` ${plural(over, "run")} above the max cost would be refused before any call.`,
          )
        : "",
    );
  };

  const schedule = () => {
    clearTimeout(timer);
    const turn = ++asked;
    timer = setTimeout(() => show(turn), DEBOUNCE_MS);
  };
  return { element, schedule };
}
