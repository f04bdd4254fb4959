// Charts drawn as SVG by hand: a column chart over time and a bar chart by group. Labels are
// text nodes (group names are record data: prompt names, metadata values). Hand-drawn rather
// than a charting library: two chart shapes, no interaction beyond a tooltip, nothing to pin.

import { append, h } from "./dom.js";

const SVG_NS = "http://www.w3.org/2000/svg";

/** An SVG element (`h` makes HTML ones); children are nodes or text. */
function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  return append(el, children);
}

// About the width the chart is drawn at beside its total, so that its 12px text reads as 12px.
const WIDTH = 420;
const HEIGHT = 180;
const TOP = 8; // room for the top scale label
const BOTTOM = 42; // two lines of axis labels: time, and the date where it changes
const LEFT = 66; // the value scale's labels ("30,000 ms")
const RIGHT = 18; // half of a last label centred under its column

/**
 * A readable top for the scale: the smallest of 1, 2, 2.5, 5 × a power of ten at least
 * `value`; for counts (`whole`), an even whole number, so that the middle line is whole too.
 */
function roundTop(value, whole) {
  if (!(value > 0)) return whole ? 2 : 1;
  const power = 10 ** Math.floor(Math.log10(value));
  const steps = [1, 2, 2.5, 5, 10].map((step) => step * power);
  const top = steps.find((step) => step >= value * 0.9999);
  return whole ? Math.max(2, Math.ceil(top / 2) * 2) : top;
}

/**
 * Columns over time: `points` are {label, value, inner?, title} in time order; `label` is null
 * (no label) or [line, second line?] written under its column. Columns scale to a round top
 * above the largest value; `scale(value)` writes the values of the scale's three lines (0,
 * half, top); `whole` keeps those whole numbers (counts). `inner` (p50 beside a p95 column)
 * is drawn inside its column.
 */
export function columnChart(points, { label, scale = String, whole = false }) {
  const top = roundTop(Math.max(...points.map((p) => p.value), 0), whole);
  const slot = (WIDTH - LEFT - RIGHT) / Math.max(points.length, 1);
  const base = HEIGHT - BOTTOM;
  const y = (value) => base - (value / top) * (base - TOP);
  const grid = [0, top / 2, top].map((value) =>
    svg(
      "g",
      { class: "scale" },
      svg("line", {
        x1: LEFT,
        x2: WIDTH - RIGHT,
        y1: y(value),
        y2: y(value),
        class: value ? "grid" : "axis",
      }),
      svg("text", { x: LEFT - 6, y: y(value) + 4, "text-anchor": "end" }, scale(value)),
    ),
  );
  const columns = points.map((point, index) => {
    const x = LEFT + index * slot;
    const height = base - y(point.value);
    const [line, date] = point.label ?? [];
    return svg(
      "g",
      { class: "column" },
      svg("rect", {
        x: x + slot * 0.1,
        y: base - height,
        width: Math.max(slot * 0.8, 1),
        height: Math.max(height, point.value > 0 ? 1 : 0),
      }),
      point.inner === undefined
        ? null
        : svg("rect", {
            class: "inner",
            x: x + slot * 0.25,
            y: y(point.inner),
            width: Math.max(slot * 0.5, 1),
            height: base - y(point.inner),
          }),
      svg("title", {}, point.title),
      line ? svg("text", { x: x + slot / 2, y: base + 21, "text-anchor": "middle" }, line) : null,
      date
        ? svg(
            "text",
            { x: x + slot / 2, y: base + 35, "text-anchor": "middle", class: "date" },
            date,
          )
        : null,
    );
  });
  return svg(
    "svg",
    { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, class: "chart", role: "img", "aria-label": label },
    grid,
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
          svg(
            "svg",
            {
              viewBox: "0 0 100 10",
              preserveAspectRatio: "none",
              class: "bar",
              "aria-hidden": "true",
            },
            svg("rect", { x: 0, y: 0, height: 10, width: Math.max((row.value / top) * 100, 0.5) }),
          ),
        ),
        h("span", { class: "bar-value" }, row.text),
      ),
    ),
  );
}
