// The scorer's page: pick a model and version, give its inputs (drawn, typed or pasted, as its input
// spec asks), see what it predicts. Everything a server or a model sends (names, labels, metadata,
// errors) enters the page as text nodes, never as markup; the page runs under a Content-Security-Policy
// without inline script.
"use strict";

const $ = (id) => document.getElementById(id);
const BAR_PIXELS = 300; // a bar's width at probability 1
const state = { models: new Map(), meta: null, editors: [] };

// ---- Small helpers ---------------------------------------------------------------------------

function element(tag, className, ...children) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  node.append(...children.map((child) => (child instanceof Node ? child : String(child))));
  return node;
}

function showError(message) {
  $("error").textContent = message || "";
}

function authHeaders(json) {
  const headers = json ? { "Content-Type": "application/json" } : {};
  const key = $("key").value;
  if (key) headers["Authorization"] = "Bearer " + key;
  return headers;
}

async function call(method, path, body) {
  const init = { method, headers: authHeaders(body !== undefined) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  let answer = null;
  try {
    answer = await response.json();
  } catch (ignored) {
    answer = null;
  }
  if (!response.ok) {
    const said = answer && typeof answer.error === "string" ? answer.error : "";
    throw new Error(said || `the server answered ${response.status}`);
  }
  return answer;
}

const encode = encodeURIComponent;
const isNumberList = (value) => Array.isArray(value) && value.every((v) => typeof v === "number");
const product = (numbers) => numbers.reduce((a, b) => a * b, 1);

function asText(value) {
  return typeof value === "string" ? value : JSON.stringify(value);
}

// ---- Models and versions ---------------------------------------------------------------------

async function loadModels() {
  showError("");
  let index;
  try {
    index = await call("POST", "/v2/repository/index", { ready: true });
  } catch (error) {
    showError(`Cannot list the models: ${error.message}`);
    return;
  }
  state.models = new Map();
  for (const entry of Array.isArray(index) ? index : []) {
    if (!entry || typeof entry.name !== "string" || typeof entry.version !== "string") continue;
    if (!state.models.has(entry.name)) state.models.set(entry.name, []);
    state.models.get(entry.name).push(entry.version);
  }
  for (const versions of state.models.values()) versions.sort((a, b) => Number(b) - Number(a));
  const wanted = new URLSearchParams(window.location.search);
  const names = [...state.models.keys()].sort();
  $("model").replaceChildren(...names.map((name) => new Option(name, name)));
  const model = wanted.get("model");
  if (model !== null && state.models.has(model)) $("model").value = model;
  else if (model !== null) showError(`No model named ${JSON.stringify(model)} is served here.`);
  fillVersions(wanted.get("version"));
  await showModel();
}

function fillVersions(wanted) {
  const versions = state.models.get($("model").value) || [];
  const labels = versions.map((v, i) => new Option(i === 0 ? `${v} (latest)` : v, v));
  $("version").replaceChildren(...labels);
  if (wanted !== null && versions.includes(wanted)) $("version").value = wanted;
}

async function showModel() {
  const name = $("model").value;
  const version = $("version").value;
  state.meta = null;
  $("about").replaceChildren();
  $("fields").replaceChildren();
  clearResults();
  if (!name || !version) return;
  const url = new URL(window.location.href);
  url.searchParams.set("model", name);
  url.searchParams.set("version", version);
  window.history.replaceState(null, "", url);
  try {
    state.meta = await call("GET", `/v2/models/${encode(name)}/versions/${encode(version)}`);
  } catch (error) {
    showError(error.message);
    return;
  }
  renderAbout(state.meta);
  renderInputs(state.meta);
}

function tensorLine(spec) {
  const shape = Array.isArray(spec.shape) ? spec.shape.map((d) => (d === -1 ? "any" : d)) : [];
  return `${asText(spec.name)} ${asText(spec.datatype)} [${shape.join(", ")}]`;
}

function renderAbout(meta) {
  const rows = [
    ["Name", meta.name],
    ["Version", (meta.parameters && meta.parameters.version) || $("version").value],
    ["Versions served", Array.isArray(meta.versions) ? meta.versions.join(", ") : ""],
    ["Platform", meta.platform],
    ["Inputs", (meta.inputs || []).map(tensorLine).join("; ")],
    ["Outputs", (meta.outputs || []).map(tensorLine).join("; ")],
  ];
  const parameters = meta.parameters && typeof meta.parameters === "object" ? meta.parameters : {};
  for (const [key, value] of Object.entries(parameters)) {
    if (key === "version") continue;
    rows.push([key, Array.isArray(value) ? value.map(asText).join(", ") : asText(value)]);
  }
  $("about").replaceChildren(...rows.flatMap(([term, value]) => [element("dt", "", term), element("dd", "", asText(value ?? ""))]));
}

// ---- Inputs: an editor per input tensor, chosen from its shape --------------------------------

function dimensionsOf(spec) {
  return Array.isArray(spec.shape) ? spec.shape.slice(1) : [];
}

// An image: [H, W], [H, W, 1 or 3], or a flat square of at least 8×8 values (MNIST's 784).
function imageShape(dims) {
  if (dims.length === 1 && dims[0] >= 64 && Number.isInteger(Math.sqrt(dims[0]))) {
    return { height: Math.sqrt(dims[0]), width: Math.sqrt(dims[0]), channels: 1 };
  }
  const channels = dims.length === 3 ? dims[2] : 1;
  const image = dims.length === 2 || (dims.length === 3 && (channels === 1 || channels === 3));
  if (image && dims[0] >= 8 && dims[1] >= 8) return { height: dims[0], width: dims[1], channels };
  return null;
}

function renderInputs(meta) {
  const specs = Array.isArray(meta.inputs) ? meta.inputs : [];
  state.editors = specs.map((spec) => editorFor(spec, specs.length === 1));
  $("fields").replaceChildren(...state.editors.map((editor) => editor.element));
}

function editorFor(spec, alone) {
  const dims = dimensionsOf(spec);
  const image = imageShape(dims);
  const legend = element("legend", "", tensorLine(spec));
  let editor;
  if (image) editor = imageEditor(spec, dims, image, alone);
  else if (dims.length === 1 && dims[0] > 0 && dims[0] <= 64) editor = cellsEditor(spec, dims[0]);
  else editor = textEditor(spec, dims);
  editor.element = element("fieldset", "", legend, editor.element);
  return editor;
}

// Numbers from a JSON array (nested or flat) or CSV text (one row per line); `lines` is the number of
// rows (top-level JSON items or non-empty lines), for a dimension of any length.
function parseNumbers(text, name) {
  const trimmed = text.trim();
  if (!trimmed) throw new Error(`input ${name}: give its values`);
  let values;
  let lines;
  if (trimmed.startsWith("[")) {
    let parsed;
    try {
      parsed = JSON.parse(trimmed);
    } catch (error) {
      throw new Error(`input ${name}: not valid JSON (${error.message})`);
    }
    values = [parsed].flat(Infinity);
    lines = Array.isArray(parsed) && Array.isArray(parsed[0]) ? parsed.length : 1;
  } else {
    const rows = trimmed.split(/\r?\n/).filter((line) => line.trim());
    values = rows.flatMap((line) => line.trim().split(/[\s,;]+/));
    lines = rows.length;
  }
  const numbers = values.map((value) => (typeof value === "string" && value.trim() !== "" ? Number(value) : value));
  const bad = numbers.findIndex((value) => typeof value !== "number" || !Number.isFinite(value));
  if (bad >= 0) throw new Error(`input ${name}: value ${bad + 1} (${asText(values[bad])}) is not a finite number`);
  return { numbers, lines };
}

// The request shape [1, ...dims] for this many values, solving one dimension of any length.
function shapeFor(name, dims, count) {
  const variable = dims.filter((d) => d === -1).length;
  const fixed = product(dims.filter((d) => d !== -1));
  if (variable === 0 && count === fixed) return [1, ...dims];
  if (variable === 1 && count > 0 && count % fixed === 0) return [1, ...dims.map((d) => (d === -1 ? count / fixed : d))];
  const wanted = variable ? `a multiple of ${fixed}` : String(fixed);
  throw new Error(`input ${name}: ${count} values given, ${wanted} needed`);
}

function textEditor(spec, dims) {
  const name = asText(spec.name);
  const steps = dims.length === 2 && dims[0] === -1;
  const area = element("textarea", "", "");
  area.rows = steps ? 6 : 4;
  area.setAttribute("aria-label", `values of ${name}`);
  const hint = steps
    ? `One step per line, ${dims[1]} values each (CSV), or JSON [[…], …].`
    : `${product(dims.map((d) => Math.abs(d)))} values: a JSON array (nested or flat) or CSV.`;
  return {
    element: element("div", "", element("p", "help", hint), area),
    read() {
      const { numbers } = parseNumbers(area.value, name);
      return { shape: shapeFor(name, dims, numbers.length), data: numbers };
    },
    clear() {
      area.value = "";
    },
  };
}

function cellsEditor(spec, size) {
  const name = asText(spec.name);
  const cells = Array.from({ length: size }, (_, i) => {
    const input = element("input", "");
    input.type = "number";
    input.step = "any";
    input.setAttribute("aria-label", `${name}[${i}]`);
    return input;
  });
  const paste = element("textarea", "", "");
  paste.rows = 2;
  paste.setAttribute("aria-label", `paste a row of ${name}`);
  paste.addEventListener("input", () => {
    try {
      const { numbers } = parseNumbers(paste.value, name);
      numbers.slice(0, size).forEach((value, i) => (cells[i].value = String(value)));
      showError(numbers.length === size ? "" : `input ${name}: ${numbers.length} values pasted, ${size} needed`);
    } catch (error) {
      showError(error.message);
    }
  });
  const grid = element("div", "cells", ...cells.map((cell, i) => element("label", "", `${i}`, cell)));
  const pasteLabel = element("label", "", "Paste a CSV row or JSON array", paste);
  return {
    element: element("div", "", grid, pasteLabel),
    read() {
      const empty = cells.findIndex((cell) => cell.value.trim() === "" || !Number.isFinite(Number(cell.value)));
      if (empty >= 0) throw new Error(`input ${name}: value ${empty} is empty or not a number`);
      return { shape: [1, size], data: cells.map((cell) => Number(cell.value)) };
    },
    clear() {
      cells.forEach((cell) => (cell.value = ""));
      paste.value = "";
    },
  };
}

function imageEditor(spec, dims, image, alone) {
  const name = asText(spec.name);
  const canvas = element("canvas", "draw");
  canvas.width = 280;
  canvas.height = Math.round((280 * image.height) / image.width);
  canvas.tabIndex = 0;
  canvas.setAttribute("role", "img");
  canvas.setAttribute("aria-label", `drawing area for ${name}: arrow keys draw, Shift+arrows move, Delete clears`);
  const context = canvas.getContext("2d");
  const pen = { x: canvas.width / 2, y: canvas.height / 2, down: false };
  const blank = () => {
    context.fillStyle = "#000";
    context.fillRect(0, 0, canvas.width, canvas.height);
  };
  const strokeTo = (x, y) => {
    context.lineWidth = Math.max(8, canvas.width / 12);
    context.lineCap = "round";
    context.strokeStyle = "#fff";
    context.beginPath();
    context.moveTo(pen.x, pen.y);
    context.lineTo(x, y);
    context.stroke();
  };
  const at = (event) => {
    const box = canvas.getBoundingClientRect();
    return [event.clientX - box.left, event.clientY - box.top];
  };
  canvas.addEventListener("pointerdown", (event) => {
    pen.down = true;
    [pen.x, pen.y] = at(event);
    strokeTo(pen.x, pen.y);
  });
  canvas.addEventListener("pointermove", (event) => {
    if (!pen.down) return;
    const [x, y] = at(event);
    strokeTo(x, y);
    [pen.x, pen.y] = [x, y];
  });
  window.addEventListener("pointerup", () => {
    if (!pen.down) return;
    pen.down = false;
    if (alone) predict();
  });
  canvas.addEventListener("keydown", (event) => {
    const moves = { ArrowUp: [0, -1], ArrowDown: [0, 1], ArrowLeft: [-1, 0], ArrowRight: [1, 0] };
    if (event.key in moves) {
      event.preventDefault();
      const step = canvas.width / 20;
      const x = Math.min(canvas.width, Math.max(0, pen.x + moves[event.key][0] * step));
      const y = Math.min(canvas.height, Math.max(0, pen.y + moves[event.key][1] * step));
      if (!event.shiftKey) strokeTo(x, y);
      [pen.x, pen.y] = [x, y];
    } else if (event.key === "Delete" || event.key === "Backspace") {
      event.preventDefault();
      blank();
    } else if (event.key === "Enter") {
      event.preventDefault();
      predict();
    }
  });
  blank();
  const typed = textEditor(spec, dims);
  const details = element("details", "", element("summary", "", "Type or paste values instead"), typed.element);
  const help = `Drawn white on black, scaled to ${image.width}×${image.height} grey levels in [0, 1].`;
  return {
    element: element("div", "", canvas, element("p", "help", help), details),
    read() {
      if (details.open && typed.element.querySelector("textarea").value.trim()) return typed.read();
      const values = pixels(canvas, image);
      return { shape: [1, ...dims], data: values };
    },
    clear() {
      blank();
      typed.clear();
    },
  };
}

function pixels(canvas, image) {
  const small = document.createElement("canvas");
  small.width = image.width;
  small.height = image.height;
  const context = small.getContext("2d");
  context.drawImage(canvas, 0, 0, image.width, image.height);
  const data = context.getImageData(0, 0, image.width, image.height).data;
  const values = [];
  for (let i = 0; i < data.length; i += 4) {
    for (let channel = 0; channel < image.channels; channel += 1) values.push(data[i + channel] / 255);
  }
  return values;
}

// ---- Prediction --------------------------------------------------------------------------------

async function predict() {
  const meta = state.meta;
  if (!meta) return;
  let tensors;
  try {
    tensors = state.editors.map((editor) => editor.read());
  } catch (error) {
    showError(error.message);
    return;
  }
  const body = {
    inputs: tensors.map((tensor, i) => ({
      name: meta.inputs[i].name,
      shape: tensor.shape,
      datatype: meta.inputs[i].datatype,
      data: tensor.data,
    })),
  };
  const path = `/v2/models/${encode($("model").value)}/versions/${encode($("version").value)}/infer`;
  try {
    const answer = await call("POST", path, body);
    showError("");
    renderResults(meta, answer);
  } catch (error) {
    showError(error.message);
  }
}

function clearResults() {
  $("prediction").textContent = "–";
  $("results").replaceChildren();
}

// What an output means. h21's output kinds when the metadata names one (probabilities, binary,
// multilabel, logits, values), else read from the numbers: a distribution is probabilities.
function kindOf(meta, index, values) {
  const output = (meta.outputs || [])[index] || {};
  const parameters = meta.parameters || {};
  const named = [output.kind, output.parameters && output.parameters.kind, index === 0 ? parameters.kind : null];
  const kind = named.find((value) => typeof value === "string");
  if (kind) return kind;
  const distribution = values.length > 1 && values.every((v) => v >= 0 && v <= 1);
  return distribution && Math.abs(values.reduce((a, b) => a + b, 0) - 1) < 1e-3 ? "probabilities" : "values";
}

function classesOf(meta, index, size) {
  const classes = index === 0 && meta.parameters ? meta.parameters.classes : null;
  const labels = Array.isArray(classes) ? classes.map(asText) : [];
  return labels.length === size ? labels : Array.from({ length: size }, (_, i) => String(i));
}

function thresholdOf(meta) {
  const threshold = meta.parameters && meta.parameters.threshold;
  return typeof threshold === "number" ? threshold : 0.5;
}

function renderResults(meta, answer) {
  const outputs = answer && Array.isArray(answer.outputs) ? answer.outputs : [];
  const summaries = [];
  const blocks = outputs.map((output, index) => {
    const values = isNumberList(output.data) ? output.data : [];
    const view = outputView(meta, index, values);
    summaries.push(outputs.length > 1 ? `${asText(output.name)}: ${view.summary}` : view.summary);
    return element("div", "output", element("h3", "", asText(output.name)), view.element);
  });
  $("prediction").textContent = summaries.join(" · ") || "–";
  $("results").replaceChildren(...blocks);
}

function outputView(meta, index, values) {
  const kind = kindOf(meta, index, values);
  const threshold = thresholdOf(meta);
  if (kind === "binary" && values.length === 1) {
    const labels = classesOf(meta, index, 2);
    const p = values[0];
    return barsView(labels, [1 - p, p], p > threshold ? 1 : 0, "Prediction: ");
  }
  if (kind === "multilabel") {
    const labels = classesOf(meta, index, values.length);
    const chosen = labels.filter((_, i) => values[i] > threshold);
    const view = barsView(labels, values, -1, "");
    view.summary = `Labels: ${chosen.length ? chosen.join(", ") : "none"}`;
    return view;
  }
  if (kind === "probabilities" || kind === "logits") {
    const shown = kind === "logits" ? softmax(values) : values;
    const best = values.indexOf(Math.max(...values));
    return barsView(classesOf(meta, index, values.length), shown, best, "Prediction: ");
  }
  return valuesView(classesOf(meta, index, values.length), values);
}

function softmax(values) {
  const top = Math.max(...values);
  const exps = values.map((v) => Math.exp(v - top));
  const total = exps.reduce((a, b) => a + b, 0);
  return exps.map((e) => e / total);
}

function barsView(labels, shares, best, prefix) {
  const rows = shares.map((share, i) => {
    const fill = element("div", "fill");
    fill.style.width = `${Math.round(BAR_PIXELS * Math.min(1, Math.max(0, share)))}px`;
    const percent = `${(100 * share).toFixed(1)}%`;
    return element("div", i === best ? "bar best" : "bar", element("span", "name", labels[i]), fill, element("span", "share", percent));
  });
  const summary = best >= 0 ? `${prefix}${labels[best]}` : "";
  return { element: element("div", "bars", ...rows), summary };
}

function valuesView(labels, values) {
  const rows = values.map((value, i) => element("tr", "", element("th", "", labels[i]), element("td", "", value.toPrecision(6))));
  const table = element("table", "values", element("tbody", "", ...rows));
  const summary = values.length === 1 ? `Value: ${values[0].toPrecision(6)}` : `${values.length} values`;
  return { element: table, summary };
}

// ---- Wiring ------------------------------------------------------------------------------------

function start() {
  $("pick").addEventListener("submit", (event) => {
    event.preventDefault();
    loadModels();
  });
  $("model").addEventListener("change", () => {
    fillVersions(null);
    showModel();
  });
  $("version").addEventListener("change", () => showModel());
  $("inputs").addEventListener("submit", (event) => {
    event.preventDefault();
    predict();
  });
  $("clear").addEventListener("click", () => {
    state.editors.forEach((editor) => editor.clear());
    clearResults();
  });
  loadModels();
}

start();
