// Charts drawn as SVG by hand: a column chart over time and a bar chart by group. Labels are
// text nodes (group names are record data: prompt names, metadata values). Hand-drawn rather
// than a charting library: two chart shapes, no interaction beyond a tooltip, nothing to pin.

import { h } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";

/** An SVG element; children are nodes or text. */
function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) {
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
  }
  return el;
}

const WIDTH = 600;
const HEIGHT = 180;
const BOTTOM = 22;
const LEFT = 4;

/**
 * Columns over time: `points` are {label, value, inner?, title} in time order; every
 * `labelEvery`-th label is written under its column. Columns scale to the largest value;
 * `inner` (p50 beside a p95 column) is drawn inside its column.
 */
export function columnChart(points, { label, labelEvery = 1 }) {
  const top = Math.max(...points.map((p) => p.value), 0) || 1;
  const slot = (WIDTH - LEFT) / Math.max(points.length, 1);
  const plot = HEIGHT - BOTTOM;
  const columns = points.map((point, index) => {
    const height = (point.value / top) * (plot - 8);
    const x = LEFT + index * slot;
    return s(
      "g",
      { class: "column" },
      s("rect", {
        x: x + slot * 0.1,
        y: plot - height,
        width: Math.max(slot * 0.8, 1),
        height: Math.max(height, point.value > 0 ? 1 : 0),
      }),
      point.inner === undefined
        ? null
        : s("rect", {
            class: "inner",
            x: x + slot * 0.25,
            y: plot - (point.inner / top) * (plot - 8),
            width: Math.max(slot * 0.5, 1),
            height: (point.inner / top) * (plot - 8),
          }),
      s("title", {}, point.title),
      index % labelEvery === 0
        ? s("text", { x: x + slot / 2, y: HEIGHT - 6, "text-anchor": "middle" }, point.label)
        : null,
    );
  });
  return s(
    "svg",
    { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, class: "chart", role: "img", "aria-label": label },
    s("line", { x1: 0, x2: WIDTH, y1: plot, y2: plot, class: "axis" }),
    columns,
  );
}

/** Horizontal bars by group: `rows` are {name, value, text}, largest first. */
export function barChart(rows, { label }) {
  const top = Math.max(...rows.map((r) => r.value), 0) || 1;
  return h(
    "div",
    { class: "bars", role: "list", "aria-label": label },
    rows.map((row) =>
      h(
        "div",
        { class: "bar-row", role: "listitem" },
        h("span", { class: "bar-name" }, row.name === "" ? "(none)" : row.name),
        h(
          "span",
          { class: "bar-track" },
          s(
            "svg",
            { viewBox: "0 0 100 10", preserveAspectRatio: "none", class: "bar", "aria-hidden": "true" },
            s("rect", { x: 0, y: 0, height: 10, width: Math.max((row.value / top) * 100, 0.5) }),
          ),
        ),
        h("span", { class: "bar-value" }, row.text),
      ),
    ),
  );
}
