// Side-by-side diff of two texts, line by line, with the changed words of a changed line
// marked. Hand-written (a longest-common-subsequence table, over lines and then over the words
// of each changed pair, ~60 lines) rather than a vendored npm library: templates are a few KB,
// and one module less to pin and audit.

import { h } from "./dom.js";

/**
 * The edit script from list `a` to list `b`: rows {kind: same|del|add, left, right, leftNo,
 * rightNo} (1-based positions), from a longest-common-subsequence table.
 */
function editScript(a, b) {
  // common[i][j]: length of the longest common subsequence of a[i:] and b[j:].
  const common = Array.from({ length: a.length + 1 }, () => new Int32Array(b.length + 1));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      common[i][j] =
        a[i] === b[j] ? common[i + 1][j + 1] + 1 : Math.max(common[i + 1][j], common[i][j + 1]);
    }
  }
  const rows = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      rows.push({ kind: "same", left: a[i], right: b[j], leftNo: ++i, rightNo: ++j });
    } else if (i < a.length && (j === b.length || common[i + 1][j] >= common[i][j + 1])) {
      rows.push({ kind: "del", left: a[i], right: null, leftNo: ++i, rightNo: null });
    } else {
      rows.push({ kind: "add", left: null, right: b[j], leftNo: null, rightNo: ++j });
    }
  }
  return rows;
}

/** Diff two texts into rows {kind: same|del|add|change, left, right, leftNo, rightNo}. */
export function lineDiff(before, after) {
  return pairChanges(editScript(before.split("\n"), after.split("\n")));
}

/**
 * The two sides of a changed line as nodes: words (and the spaces between them) kept as
 * text, the removed ones in <del> on the left, the added ones in <ins> on the right.
 */
function wordDiff(before, after) {
  const words = (line) => line.split(/(\s+)/).filter(Boolean);
  const left = [];
  const right = [];
  for (const step of editScript(words(before), words(after))) {
    if (step.kind === "same") {
      left.push(step.left);
      right.push(step.right);
    } else if (step.kind === "del") left.push(h("del", {}, step.left));
    else right.push(h("ins", {}, step.right));
  }
  return [left, right];
}

// A run of removed lines followed by added ones reads best side by side, as changed lines.
function pairChanges(rows) {
  const paired = [];
  for (let k = 0; k < rows.length;) {
    if (rows[k].kind !== "del") {
      paired.push(rows[k++]);
      continue;
    }
    const dels = [];
    while (k < rows.length && rows[k].kind === "del") dels.push(rows[k++]);
    const adds = [];
    while (k < rows.length && rows[k].kind === "add") adds.push(rows[k++]);
    for (let n = 0; n < Math.max(dels.length, adds.length); n++) {
      const left = dels[n];
      const right = adds[n];
      paired.push({
        kind: left && right ? "change" : left ? "del" : "add",
        left: left ? left.left : null,
        leftNo: left ? left.leftNo : null,
        right: right ? right.right : null,
        rightNo: right ? right.rightNo : null,
      });
    }
  }
  return paired;
}

/**
 * A side-by-side table of the diff of `before` and `after`, headed by the two titles.
 * `leftEmpty` / `rightEmpty`: that side has no value at all (an added or removed field), so
 * it has no lines, not one empty line.
 */
export function diffTable(before, after, leftTitle, rightTitle, options = {}) {
  const lines = (text, none) => (none ? [] : text.split("\n"));
  const rows = pairChanges(
    editScript(lines(before, options.leftEmpty), lines(after, options.rightEmpty)),
  );
  return h(
    "table",
    { class: "diff" },
    // A fixed layout takes its widths from the columns, not from the first (spanning) row.
    h(
      "colgroup",
      {},
      ["line-no", "text", "line-no", "text"].map((kind) => h("col", { class: kind })),
    ),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", { colspan: 2, scope: "col" }, leftTitle),
        h("th", { colspan: 2, scope: "col" }, rightTitle),
      ),
    ),
    h(
      "tbody",
      {},
      rows.map((row) => {
        const [left, right] =
          row.kind === "change"
            ? wordDiff(row.left, row.right)
            : [row.left ?? "", row.right ?? ""];
        return h(
          "tr",
          { class: row.kind },
          h("td", { class: "line-no" }, row.leftNo ?? ""),
          h("td", { class: row.left === null ? "text empty" : "text left" }, left),
          h("td", { class: "line-no" }, row.rightNo ?? ""),
          h("td", { class: row.right === null ? "text empty" : "text right" }, right),
        );
      }),
    ),
  );
}

/** A change's value as diffable text: a string as it is, anything else as indented JSON. */
function changeText(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

/**
 * The diff route's changes (`GET /v1/prompts/{name}/diff`) as a list: each change's path
 * (`messages[2].content`, `tools.get_weather.parameters.properties.unit`), whether it was added,
 * removed or changed, and the two sides as a side-by-side table, changed words marked.
 */
export function changeList(changes, leftTitle, rightTitle) {
  if (!changes.length) return h("p", { class: "muted" }, "The two versions are the same.");
  return h(
    "ol",
    { class: "changes", "aria-label": "Changes" },
    changes.map((change) => {
      const before = "before" in change ? changeText(change.before) : null;
      const after = "after" in change ? changeText(change.after) : null;
      return h(
        "li",
        { class: `change-item ${change.kind}` },
        h(
          "div",
          { class: "change-head" },
          h("span", { class: "mono change-path" }, change.path),
          h("span", { class: `badge change-kind ${change.kind}` }, change.kind),
        ),
        h(
          "div",
          { class: "table-wrap" },
          diffTable(before ?? "", after ?? "", leftTitle, rightTitle, {
            leftEmpty: before === null,
            rightEmpty: after === null,
          }),
        ),
      );
    }),
  );
}
