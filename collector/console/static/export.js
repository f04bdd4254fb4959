// Export buttons: start an export job with the list's filters, follow it until its file is
// ready, then download the file with the key (a header, so the file is fetched, not linked).

import { api, messageOf, request } from "./api.js";
import { h, replace } from "./dom.js";

const POLL_MS = 500;

/** The buttons and their status line, exporting what `filters` select. */
export function exportButtons(filters) {
  const status = h("span", { class: "export-status", role: "status" });
  const buttons = ["csv", "json"].map((format) =>
    h("button", { type: "button", class: "quiet" }, `Export ${format.toUpperCase()}`),
  );
  buttons.forEach((button, index) => {
    const format = index === 0 ? "csv" : "json";
    button.addEventListener("click", async () => {
      buttons.forEach((b) => (b.disabled = true));
      try {
        await runExport(format, filters, status);
      } catch (error) {
        replace(status, h("span", { class: "error" }, `Export failed: ${messageOf(error)}`));
      } finally {
        buttons.forEach((b) => (b.disabled = false));
      }
    });
  });
  return h("div", { class: "export" }, buttons, status);
}

async function runExport(format, filters, status) {
  replace(status, "Export started…");
  let { data: job } = await api("/requests/export", {
    method: "POST",
    body: { format, filters },
  });
  while (job.status !== "completed") {
    if (job.status !== "processing") {
      throw new Error(`the export ${job.status}${job.error ? `: ${job.error}` : ""}`);
    }
    replace(status, "Export processing…");
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    ({ data: job } = await api(`/requests/exports/${encodeURIComponent(job.export_id)}`));
  }
  const response = await request(
    `/requests/exports/${encodeURIComponent(job.export_id)}/download`,
  );
  const url = URL.createObjectURL(await response.blob());
  const extension = format === "csv" ? "csv" : "jsonl";
  const link = h("a", { href: url, download: `${job.export_id}.${extension}` }, "download");
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
  const rows = job.row_count === 1 ? "1 record" : `${job.row_count} records`;
  replace(status, `Exported ${rows} as ${format.toUpperCase()}.`);
}
