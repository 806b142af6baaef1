// agentnb debugger: the front end (an anywidget ES module; plain JavaScript, no build step).
//
// Theory of operation. The kernel (agentnb/_debugger/widget.py) interprets events; this module only draws.
// It gets two kinds of data:
//   - rows, one per event, in custom messages, kept once per model in a RowStore however many views show it:
//     every row's codes (type, state, turn, tool, status) as binary buffers {kind: "rows"} (typed arrays here,
//     so the filters run in the page over all of them), the tree's nodes likewise {kind: "tree"}, and the
//     texts (a row's summary and time, a node's label) only for what is in sight: paint() asks for the
//     missing ones with a margin ({kind: "texts?"}, answered by {kind: "texts"}) and draws "…" meanwhile.
//     The search box's words match summaries the page may not hold: it asks {kind: "search?"} for the
//     matching seqs ({kind: "found"}). A live run's new rows come with their texts, appended;
//   - the selected moment (card, conversation, meters, diagram, wire view, approvals) as synced traits.
// The timeline is virtualized: only the rows in sight (plus a margin) are in the DOM, so 100,000 events
// scroll like 100. Clicking a row sets `selected`; the kernel answers with that moment (time travel). Once the
// list has stood still for a moment, the page asks for the cards of the rows in sight ({kind: "cards?"},
// answered by {kind: "cards"}, drawn from a log of `n` events): a click on one shows its card at once, and
// the kernel's answer (the same card) leaves it as it is; a card of a shorter log than the page's is not used.
// Every control sends {kind: "call", method, args}, which calls the debugger's public method of that name.
//
// The same module runs without a kernel: `standalone()` (used by the self-contained HTML export) drives the
// views with a StaticModel that answers from data embedded in the page, the same messages a kernel answers.

const ROW_H = 24;
const NARROW = 560; // px: below this the timeline and the card stack (debugger.css: .anb-narrow)
const OVERSCAN = 12;
const KEYS_HELP = [
  ["← → or k j", "previous / next row"],
  ["Home / End", "first / last event"],
  ["Enter", "open / close a tree row"],
  ["t", "tree or every event"],
  ["s", "step"],
  ["n", "next turn"],
  ["c", "continue"],
  ["p", "pause"],
  ["/", "search"],
  ["?", "this help"],
];

const metrics = (globalThis.agentnbMetrics = globalThis.agentnbMetrics || { lags: [], marks: {} });
const PRESS_HOLD_MS = 1000; // the longest a press holds the rows still (a release the list never hears)
metrics.lazyTexts = true; // marks.painted: the first paint with every row's codes and the texts in sight

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

/** Milliseconds as a row shows them: +850 ms, +12.3 s (`plain`: without the sign, for durations). */
function fmtMs(ms, plain = false) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "";
  const sign = plain ? "" : "+";
  if (ms < 1) return `${sign}${ms.toFixed(2)} ms`;
  if (ms < 1000) return `${sign}${ms.toFixed(0)} ms`;
  if (ms < 60000) return `${sign}${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  return `${sign}${Math.floor(ms / 60000)} min ${((ms % 60000) / 1000).toFixed(0)} s`;
}

function eventsText(n) {
  return `${n.toLocaleString()} ${n === 1 ? "event" : "events"}`;
}

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

// -- rows ------------------------------------------------------------------------------------------------

const ROW_MARGIN = 200; // rows whose texts are asked for beyond those in sight (each way)
const NODE_MARGIN = 60; // tree nodes likewise
const ASK_EVERY_MS = 80; // while scrolling, the texts in sight are asked for at most this often
const ASK_AGAIN_MS = 4000; // a request unanswered this long is made again (a busy kernel, a lost message)
const CARDS_AFTER_MS = 150; // the cards of the rows in sight are asked for once the list is this long still
const CARDS_AT_ONCE = 64; // at most this many in one request (agentnb/_debugger/viewdata.py CARDS_AT_ONCE)
const CARDS_KEPT = 400; // cards kept in the page (the oldest go first; each at most 40,000 characters)
const DTYPES = { u1: Uint8Array, u2: Uint16Array, i4: Int32Array, f8: Float64Array };

/** A binary buffer of a comm message (a DataView) as a typed array of its own (copied: aligned). */
function typed(dtype, buf) {
  const bytes = buf instanceof ArrayBuffer ? new Uint8Array(buf) : new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
  return new DTYPES[dtype](bytes.slice().buffer);
}

/** An Int32Array at least `need` long holding the first `keep` items of `arr` (grown by doubling). */
function grown(arr, need, keep) {
  if (need <= arr.length) return arr;
  const out = new Int32Array(Math.max(need, arr.length * 2, 1024));
  out.set(arr.subarray(0, keep));
  return out;
}

/**
 * Every row's codes (type, state, turn, tool, status: typed arrays, filled for rows 0..n) and the texts
 * (summary m, time w) of the rows the kernel has sent or been asked for (a sparse cache); the tree's nodes
 * (objects; a label `l` undefined until asked for) and each event's group `g`. `want()` asks the kernel for
 * the texts of the rows and nodes in sight that are missing, `search()` for the seqs whose summaries match.
 */
class RowStore {
  constructor() {
    this.listeners = new Set();
    this.ask = () => {}; // sends a request to the kernel (storeOf sets it)
    this.reset();
  }
  reset() {
    for (const col of COLS) this[col] = new Int32Array(0);
    this.m = []; this.w = [];
    this.g = new Int32Array(0); this.gn = 0;
    this.nodes = []; this.treeVersion = 0;
    this.building = ""; // the kernel builds a long run's tree after its rows: "tree", or why it could not
    this.types = []; this.states = []; this.tools = [""]; this.statuses = [""]; this.typeClasses = [];
    this.n = 0;
    this.asked = { rows: new Map(), nodes: new Map(), cards: new Map() };
    this.cards = new Map(); this.cardsN = -1; // seq -> its card, drawn by the kernel from a log of cardsN events
    this.found = null; this.searching = "";
    this.version = (this.version || 0) + 1;
    this.emit({ reset: true });
  }
  apply(msg) {
    if (msg.start > this.n) return false; // a gap (messages sent before this page listened): ask for everything again
    if (msg.start < this.n) { this.n = msg.start; this.m.length = Math.min(this.m.length, msg.start); this.w.length = this.m.length; }
    this.types = msg.types; this.states = msg.states; this.tools = msg.tools; this.statuses = msg.statuses;
    this.typeClasses = msg.type_classes || [];
    const cols = msg.cols, len = cols.k.length, start = msg.start;
    for (const col of COLS) {
      this[col] = grown(this[col], start + len, start);
      this[col].set(cols[col], start);
    }
    if (msg.m) for (let j = 0; j < len; j++) { this.m[start + j] = msg.m[j]; this.w[start + j] = msg.w[j]; }
    const from = start;
    this.n = start + len;
    this.emit({ from, ts_last: msg.ts_last });
    return true;
  }
  /** The tree's nodes (agentnb/_debugger/tree.py: records of FIELDS, or binary columns) and each event's group. */
  applyTree(msg) {
    if (msg.start > this.gn) return;
    const g = msg.g;
    this.g = grown(this.g, msg.start + g.length, msg.start);
    this.g.set(g, msg.start);
    this.gn = msg.start + g.length;
    if (msg.records) {
      for (const r of msg.records) {
        this.nodes[r[0]] = { i: r[0], p: r[1], d: r[2], n: r[3], l: r[4], a: r[5], b: r[6], t0: r[7], t1: r[8], tok: r[9],
          c: r[10], x: r[11], tool: r[12], e: r[13], x0: r[14], x1: r[15], f: r[16] };
      }
    } else {
      const c = msg.cols, v = msg.vocab, count = c.i.length, num = (x) => (Number.isNaN(x) ? null : x);
      for (let j = 0; j < count; j++) {
        const i = c.i[j];
        this.nodes[i] = { i, p: c.p[j], d: c.d[j], n: v.n[c.n[j]], l: msg.l ? msg.l[j] : undefined, a: c.a[j], b: c.b[j],
          t0: c.t0[j], t1: c.t1[j], tok: c.tok[j], c: num(c.c[j]), x: v.x[c.x[j]], tool: v.tool[c.tool[j]], e: v.e[c.e[j]],
          x0: num(c.x0[j]), x1: num(c.x1[j]), f: c.f[j] };
        if (!msg.l) this.asked.nodes.delete(i); // its label may have changed: asked for again when in sight
      }
    }
    if (msg.start === 0) this.nodes.length = msg.count ?? msg.records.length;
    this.building = "";
    this.treeVersion++;
    this.emit({ tree: true });
  }
  /** The kernel's answer to want(): texts of row ranges, labels of node ranges. */
  applyTexts(msg) {
    let j = 0;
    for (const [a, b] of msg.rows || []) {
      for (let i = a; i < b; i++, j++) { this.m[i] = msg.m[j]; this.w[i] = msg.w[j]; this.asked.rows.delete(i); }
    }
    j = 0;
    for (const [a, b] of msg.nodes || []) {
      for (let i = a; i < b; i++, j++) { if (this.nodes[i]) this.nodes[i].l = msg.l[j]; this.asked.nodes.delete(i); }
    }
    this.emit({ texts: true });
  }
  /** The kernel's answer to search(): the seqs whose summary or type holds every word. */
  applyFound(msg, seqs) {
    const key = msg.words.join("\u0000");
    if (key !== this.searching) return; // an older search
    const bits = new Uint8Array(msg.n);
    for (const s of seqs) bits[s] = 1;
    this.found = { key, n: msg.n, bits };
    this.searching = "";
    this.emit({ found: true });
  }
  /** Ask for the texts of these rows and nodes that are neither here nor asked for, with a margin. */
  want(seqs, nodes) {
    const rows = this.missing(seqs, this.asked.rows, this.n, ROW_MARGIN);
    const nds = this.missing(nodes, this.asked.nodes, this.nodes.length, NODE_MARGIN);
    if (rows.length || nds.length) this.ask({ kind: "texts?", rows, nodes: nds });
  }
  missing(ids, asked, n, margin) {
    const now = performance.now();
    const todo = ids.filter((i) => !(now - (asked.get(i) ?? -Infinity) < ASK_AGAIN_MS)).sort((a, b) => a - b);
    const out = [];
    for (const i of todo) {
      const last = out[out.length - 1];
      if (last && i < last[1] + margin) last[1] = Math.min(n, i + margin + 1);
      else out.push([Math.max(0, i - margin), Math.min(n, i + margin + 1)]);
    }
    for (const [a, b] of out) for (let i = a; i < b; i++) asked.set(i, now);
    return out;
  }
  /** The kernel's answer to wantCards(): the cards of rows in sight, drawn from a log of `msg.n` events. */
  applyCards(msg) {
    if (msg.n !== this.cardsN) { this.cards.clear(); this.cardsN = msg.n; }
    msg.seqs.forEach((seq, j) => { this.cards.delete(seq); this.cards.set(seq, msg.html[j]); });
    for (const seq of this.cards.keys()) { if (this.cards.size <= CARDS_KEPT) break; this.cards.delete(seq); }
  }
  /** Ask for the cards of these rows that are neither here nor asked for: a click on one then shows at once. */
  wantCards(seqs, n) {
    const now = performance.now();
    const todo = [...new Set(seqs)].filter((i) => !(this.cardsN === n && this.cards.has(i)) &&
      !(now - (this.asked.cards.get(i) ?? -Infinity) < ASK_AGAIN_MS)).slice(0, CARDS_AT_ONCE);
    for (const i of todo) this.asked.cards.set(i, now);
    if (todo.length) this.ask({ kind: "cards?", seqs: todo });
  }
  /** The card of event `seq` if the kernel drew it from the log as it stands (`n` events), else undefined. */
  cardOf(seq, n) { return this.cardsN === n ? this.cards.get(seq) : undefined; }
  /** Ask which rows match these words (unless that is known or asked); `found` answers. */
  search(words) {
    const key = words.join("\u0000");
    if ((this.found && this.found.key === key) || this.searching === key) return;
    this.searching = key;
    this.ask({ kind: "search?", words });
  }
  emit(change) {
    for (const fn of this.listeners) fn(change);
  }
  type(i) { return this.types[this.k[i]]; }
  state(i) { return this.states[this.s[i]]; }
  tool(i) { return this.tools[this.t[i]]; }
  status(i) { return this.statuses[this.x[i]]; }
}

const COLS = ["k", "s", "u", "t", "x"];
const FRAGMENT_TYPES = new Set(["TextMerged", "ArgumentsMerged"]);
const stores = new WeakMap(); // a model without a key (an export's StaticModel) -> its store
// A kernel's model -> its store, by the key it syncs. anywidget hands `initialize` and each `render` a proxy of
// its own for one model, so a store kept by the object would be one per proxy: a view drawn after the kernel
// answered (a reopened notebook's restored widgets) would find an empty store that never hears a reply.
const keyed = new Map();
/** Stop keeping a kernel model's store: its comm closed, or the model is initialized again. */
function forget(key) {
  const store = keyed.get(key);
  if (store) { clearInterval(store.helloTimer); keyed.delete(key); }
}

/** A kernel message's binary columns ([[name, dtype], ...] and its buffers from `at`) as {name: typed array}. */
function columnsOf(specs, buffers, at = 0) {
  const out = {};
  specs.forEach(([name, dtype], j) => { out[name] = typed(dtype, buffers[at + j]); });
  return out;
}

function storeOf(model) {
  const key = model.get("key");
  let store = key ? keyed.get(key) : stores.get(model);
  if (!store) {
    store = new RowStore();
    if (key) {
      keyed.set(key, store);
      model.on("destroy", () => forget(key)); // its comm closed
    } else stores.set(model, store);
    store.ask = (msg) => model.send(msg);
    let asked = 0;
    model.on("msg:custom", (msg, buffers) => {
      store.heard = true; // a kernel answers
      const at = `${msg.kind}At`; // when each kind of message first came (bench/debugger_browser.py)
      if (!metrics.marks[at]) metrics.marks[at] = performance.now();
      if (msg.kind === "rows") {
        if (Array.isArray(msg.cols)) msg.cols = columnsOf(msg.cols, buffers);
        if (store.apply(msg) === false && performance.now() - asked > 1000) {
          asked = performance.now();
          model.send({ kind: "hello" });
        }
      } else if (msg.kind === "tree") {
        if (msg.ints) { // binary: the groups, then the node fields (tree.py columns())
          msg.g = typed("i4", buffers[0]);
          msg.cols = columnsOf([...msg.ints.map((f) => [f, "i4"]), ...msg.floats.map((f) => [f, "f8"]),
            ...msg.codes.map((f) => [f, "i4"])], buffers, 1);
        } else msg.records = msg.nodes;
        store.applyTree(msg);
      } else if (msg.kind === "texts") store.applyTexts(msg);
      else if (msg.kind === "cards") store.applyCards(msg);
      else if (msg.kind === "found") store.applyFound(msg, msg.seqs || typed("i4", buffers[0]));
      else if (msg.kind === "reset") store.reset();
      else if (msg.kind === "building") { store.building = msg.error ? `error: ${msg.error}` : msg.what; store.emit({ building: true }); }
      else if (msg.kind === "welcome") store.welcomed = true; // the kernel answered a hello: stop saying it
    });
  }
  return store;
}

/** Where each row of the laid-out tree is: events by seq (e >= 0), nodes as e = -(i + 1); typed arrays, as a
 * million events' tree has hundreds of thousands of rows, and opening one lays them out again. */
class TreePos {
  constructor(events, nodes) {
    this.ev = new Int32Array(events).fill(-1);
    this.nd = new Int32Array(nodes).fill(-1);
  }
  set(e, at) { if (e < 0) this.nd[-e - 1] = at; else this.ev[e] = at; }
  get(e) {
    const at = e < 0 ? this.nd[-e - 1] : this.ev[e];
    return at === undefined || at < 0 ? undefined : at;
  }
  has(e) { return this.get(e) !== undefined; }
}

// -- the view ----------------------------------------------------------------------------------------------

class DebuggerView {
  constructor(model, el) {
    this.model = model;
    this.el = el;
    this.store = storeOf(model);
    this.visible = null; // null: every row; else the seqs that pass the filters, ascending
    this.filters = { q: "", type: "", tool: "", turn: "", status: "", typeNot: false, toolNot: false,
      statusNot: false, hideFragments: false };
    this.mode = "tree"; // the timeline's default view: the tree with its waterfall; "flat": every event
    this.flip = new Set(); // tree nodes the person opened or closed (against their kind's default)
    this.selNode = -1; // a tree node the person selected (its row stays selected while its last event is)
    this.layoutDirty = true; // the tree's rows are laid out again before the next paint
    this.sel = model.get("selected");
    this.disposers = [];
    this.build();
    attachIntervene(this); // the box to step into a paused run (below)
    const onStore = (change) => this.onRows(change);
    this.store.listeners.add(onStore);
    this.disposers.push(() => this.store.listeners.delete(onStore));
    const traits = ["header", "count", "selected", "follow", "running", "message", "controls", "meters", "diagram",
      "detail", "conversation", "wire", "plots", "breakpoints", "pending", "error", "tab", "runs", "fork_edit"];
    for (const name of traits) {
      const fn = () => this.update(name);
      model.on(`change:${name}`, fn);
      this.disposers.push(() => model.off(`change:${name}`, fn));
    }
    for (const name of traits) this.update(name);
    this.onRows({ reset: true });
  }

  showSnapshot() {
    const snap = this.model.get("snapshot");
    // not for a run with no event yet: while a kernel is busy (Run All) its page must not flip to "saved"
    if (this.store.heard || !snap || this.static || !this.model.get("count")) return;
    this.snapshotEl.innerHTML = '<div class="agentnb-muted">a saved view: no kernel answers (yet: a cell may still ' +
      "be running; in a reopened notebook, run the cell again to step, select and approve).</div>" + snap;
    this.snapshotEl.hidden = false;
    this.saved = true;
    this.drawHeader();
    this.main.hidden = true;
    this.metersEl.hidden = true;
    this.diagramBox.hidden = true;
    this.toolbar.hidden = true;
    this.bpRow.hidden = true;
  }

  /** The selected event's card (the same text again leaves the pane as it is: its scroll, what is open). */
  showDetail(html) {
    metrics.marks.detailAt = performance.now();
    if (html === this.shownDetail) return;
    this.shownDetail = html;
    this.panes.event.innerHTML = html;
  }

  hideSnapshot() {
    if (this.snapshotEl.hidden) return;
    this.snapshotEl.hidden = true;
    this.snapshotEl.innerHTML = "";
    this.saved = false;
    this.main.hidden = false;
    this.metersEl.hidden = false;
    this.diagramBox.hidden = false;
    this.drawHeader();
  }

  dispose() {
    for (const fn of this.disposers) fn();
    clearTimeout(this.askTimer);
    clearTimeout(this.cardsTimer);
    if (this.resizer) this.resizer.disconnect();
  }

  get static() { return Boolean((this.model.get("header") || {}).static); }

  call(method, args = {}) {
    this.model.send({ kind: "call", method, args });
  }

  // -- layout ----------------------------------------------------------------------------------------------

  build() {
    const el = this.el;
    el.innerHTML = "";
    const root = (this.root = h("div", {
      class: "agentnb-root agentnb-debugger agentnb-app", tabindex: "0", role: "application",
      "aria-label": "agentnb debugger (press ? for keys)", "data-lm-suppress-shortcuts": "true",
    }));
    this.headerEl = h("div", { class: "agentnb-header" });
    this.helpBtn = h("button", { class: "anb-btn anb-help-btn agentnb-btn-help", "aria-label": "keyboard shortcuts",
      "aria-expanded": "false", title: "keyboard shortcuts", onclick: () => this.toggleHelp() }, "?");
    this.helpEl = h("div", { class: "anb-help", role: "tooltip", hidden: true },
      h("b", {}, "Keys (when the debugger has focus)"),
      h("table", {}, ...KEYS_HELP.map(([k, what]) => h("tr", {}, h("td", {}, h("kbd", {}, k)), h("td", {}, what)))));
    this.picker = h("select", { class: "anb-input agentnb-run-picker", "aria-label": "run shown: this run or a fork",
      hidden: true, onchange: () => this.call("show", { run_id: this.picker.value }) });
    const top = h("div", { class: "anb-top" }, this.headerEl, this.picker, this.helpBtn, this.helpEl);
    this.lineageEl = h("div", { class: "anb-lineage agentnb-lineage", hidden: true });

    const button = (name, label, method, tip) =>
      h("button", { class: `anb-btn agentnb-btn-${name}`, title: tip, "aria-label": label,
        onclick: () => this.call(method) }, label);
    this.buttons = {
      step: button("step", "Step", "step", "one event (s)"),
      next_turn: button("next-turn", "Next turn", "next_turn", "run to the next model turn (n)"),
      cont: button("continue", "Continue", "cont", "until a breakpoint, a pause or the end (c)"),
      pause: button("pause", "Pause", "pause", "stop between two events (p)"),
      restart: button("restart", "Restart", "restart", "a new run of the same loop and prompt"),
      fork: button("fork", "Fork here", "fork", "a new run from the selected moment"),
    };
    this.statusEl = h("span", { class: "agentnb-status", "aria-live": "polite" });
    this.toolbar = h("div", { class: "anb-toolbar agentnb-controls" }, ...Object.values(this.buttons), this.statusEl);

    this.metersEl = h("div", { class: "anb-meters-box" });
    this.diagramEl = h("div", { class: "agentnb-diagram" });
    const diagramBox = (this.diagramBox = h("details", { class: "anb-diagram-box" }, h("summary", {}, "state machine"),
      this.diagramEl));
    this.approvalsEl = h("div", { class: "agentnb-approvals" });

    this.bpList = h("span", { class: "agentnb-breakpoints" });
    // one example per kind, so the placeholder fits the field
    const examples = { tool: "a tool: get_weather", event: "an event: ToolFinished", state: "a state: EXECUTING" };
    this.bpKind = h("select", { class: "anb-input agentnb-bp-kind", "aria-label": "breakpoint kind",
      onchange: () => { this.bpValue.placeholder = examples[this.bpKind.value]; } },
      ...["tool", "event", "state"].map((k) => h("option", { value: k }, k)));
    this.bpValue = h("input", { class: "anb-input agentnb-bp-value", "aria-label": "breakpoint value",
      placeholder: examples.tool, onkeydown: (e) => { if (e.key === "Enter") this.addBreakpoint(); } });
    this.bpAdd = h("button", { class: "anb-btn agentnb-btn-add-breakpoint", "aria-label": "add breakpoint",
      onclick: () => this.addBreakpoint() }, "Add breakpoint");
    this.bpRow = h("div", { class: "anb-bp-row" }, h("span", { class: "agentnb-muted" }, "break on "),
      this.bpKind, h("span", {}, " = "), this.bpValue, this.bpAdd, this.bpList);

    // timeline
    const filter = (name, label, extra = {}) => {
      const input = h(extra.tag || "select", { class: `anb-input agentnb-filter-${name}`, "aria-label": label,
        ...(extra.attrs || {}) });
      input.addEventListener("input", () => { this.filters[name] = input.value; this.refilter(); });
      return input;
    };
    this.search = filter("q", "search summaries", { tag: "input", attrs: { type: "search",
      placeholder: "search  /   tool:a,b  status!=ok  -type:TextMerged", title: "words match summaries; " +
      "type: tool: status: turn: take values separated by commas; key!=v or -key:v negates (status!=ok: a status other than ok)" } });
    this.fType = filter("type", "filter by event type");
    this.fTool = filter("tool", "filter by tool");
    this.fStatus = filter("status", "filter by status");
    this.fTurn = filter("turn", "filter by turn", { tag: "input", attrs: { type: "number", min: "0", placeholder: "turn" } });
    const not = (name, label) => {
      const b = h("button", { class: `anb-btn anb-not agentnb-filter-${name}-not`, "aria-pressed": "false",
        title: `${label}: show the events that are not this`, "aria-label": `${label}: negate` }, "≠");
      b.addEventListener("click", () => {
        this.filters[`${name}Not`] = !this.filters[`${name}Not`];
        b.setAttribute("aria-pressed", String(this.filters[`${name}Not`]));
        b.classList.toggle("anb-on", this.filters[`${name}Not`]);
        this.refilter();
      });
      return b;
    };
    this.hideFrag = h("input", { type: "checkbox", class: "agentnb-filter-hide-fragments", "aria-label": "hide fragments" });
    this.hideFrag.addEventListener("change", () => { this.filters.hideFragments = this.hideFrag.checked; this.refilter(); });
    const hideLabel = h("label", { class: "anb-check", title: "hide the streamed text and argument fragments" },
      this.hideFrag, " hide fragments");
    this.search.addEventListener("keydown", (e) => {
      if (e.key === "Escape" || e.key === "Enter") { e.preventDefault(); this.root.focus(); }
    });
    this.countEl = h("span", { class: "anb-count agentnb-muted" });
    const viewBtn = (mode, label, tip) => h("button", { class: `anb-tab anb-view agentnb-view-${mode}`, role: "tab",
      "aria-selected": "false", title: tip, onclick: () => this.setMode(mode) }, label);
    this.viewBtns = { tree: viewBtn("tree", "Tree", "turns, model calls and tool calls with a waterfall (t)"),
      flat: viewBtn("flat", "List", "every event, one row each (t)") };
    const views = h("div", { class: "anb-views", role: "tablist", "aria-label": "timeline view" },
      this.viewBtns.tree, this.viewBtns.flat, this.countEl);
    const filters = h("div", { class: "anb-filters" }, this.search, this.fType, not("type", "event type"), this.fTool,
      not("tool", "tool"), this.fTurn, this.fStatus, not("status", "status"), hideLabel);
    this.rowsEl = h("div", { class: "anb-rows" });
    this.spacer = h("div", { class: "anb-spacer" }, this.rowsEl);
    this.list = h("div", { class: "anb-list agentnb-timeline", role: "listbox", "aria-label": "events" }, this.spacer);
    this.list.addEventListener("scroll", () => this.paint(true));
    this.list.addEventListener("click", (e) => this.onRowClick(e));
    // A press on a row holds the rows still until it is released: redrawn under the pointer (a live run's
    // events, texts arriving), the row pressed would be gone by the release and the click lost. Scrolling
    // still draws (the rows move under the pointer anyway), and a press on the scrollbar holds nothing.
    this.list.addEventListener("pointerdown", (e) => {
      if (e.target.closest(".anb-row")) { this.pressed = true; this.pressedAt = performance.now(); }
    });
    for (const ev of ["pointerup", "pointercancel", "pointerleave"]) {
      this.list.addEventListener(ev, () => {
        if (!this.pressed) return;
        this.pressed = false;
        if (this.paintHeld) { this.paintHeld = false; this.schedulePaint(false); } // after the click, with what waited
      });
    }
    const nav = (name, label, fn) => h("button", { class: `anb-btn anb-nav agentnb-btn-${name}`, "aria-label": label,
      title: label, onclick: fn }, { first: "|◀", prev: "◀", next: "▶", last: "▶|" }[name]);
    const navRow = h("div", { class: "anb-navrow" },
      nav("first", "first event", () => this.move("first")), nav("prev", "previous event", () => this.move(-1)),
      nav("next", "next event", () => this.move(1)), nav("last", "latest event", () => this.move("last")));
    const left = h("div", { class: "anb-left" }, views, filters, this.list, navRow);

    // tabs
    this.tabs = {};
    this.panes = {};
    const tabBar = h("div", { class: "anb-tabs", role: "tablist" });
    for (const [name, label] of [["event", "Event"], ["conversation", "Conversation"], ["wire", "Wire"], ["plots", "Plots"]]) {
      const tab = h("button", { class: `anb-tab agentnb-tab-${name}`, role: "tab", "aria-selected": "false",
        onclick: () => this.setTab(name) }, label);
      tabBar.append(tab);
      this.tabs[name] = tab;
      this.panes[name] = h("div", { class: `anb-pane agentnb-pane-${name}`, role: "tabpanel", hidden: true });
    }
    this.panes.event.classList.add("agentnb-detail");
    this.panes.conversation.classList.add("agentnb-conversation");
    this.panes.plots.classList.add("agentnb-plots");
    this.buildWire();
    this.forkEditEl = h("div", { class: "anb-fork-edit agentnb-fork-edit", hidden: true });
    const right = h("div", { class: "anb-right" }, tabBar, ...Object.values(this.panes), this.forkEditEl);
    this.main = h("div", { class: "anb-main" }, left, right);

    this.snapshotEl = h("div", { class: "anb-snapshot", hidden: true });
    root.append(top, this.lineageEl, this.toolbar, this.metersEl, diagramBox, this.approvalsEl, this.bpRow, this.main, this.snapshotEl);
    buildLabels(this);
    // Without a kernel (a saved notebook opened later) no rows ever come: show the saved snapshot instead.
    // Looked at again every 2.5 s until a kernel answers or it shows: a reopened notebook's restored state can
    // reach the view after its first look (then it found no snapshot, and the page stayed blank).
    this.noKernelTimer = setInterval(() => {
      if (this.store.heard || this.saved) clearInterval(this.noKernelTimer);
      else this.showSnapshot();
    }, 2500);
    this.disposers.push(() => clearInterval(this.noKernelTimer));
    root.addEventListener("keydown", (e) => this.onKey(e));
    el.append(root);
    this.resizer = new ResizeObserver(() => {
      root.classList.toggle("anb-narrow", root.clientWidth < NARROW);
      this.paint();
    });
    this.resizer.observe(root);
    this.setTab(this.model.get("tab") || "event", false);
    this.setMode("tree", false);
  }

  buildWire() {
    const pane = this.panes.wire;
    pane.classList.add("agentnb-wire-view");
    this.wireTabs = h("div", { class: "anb-provider-tabs", role: "tablist", "aria-label": "provider" });
    this.wireNote = h("div", { class: "agentnb-muted anb-wire-note" });
    this.wireWhere = h("table", { class: "agentnb-kv anb-wire-where" });
    const copy = (which) => h("button", { class: `anb-btn anb-copy agentnb-copy-${which}`,
      "aria-label": `copy the ${which}`, onclick: (e) => this.copy(which === "request" ? this.wireReq : this.wireResp, e.target) }, "Copy");
    this.wireReq = h("pre", { class: "agentnb-pre anb-wire-body agentnb-wire-request" });
    this.wireResp = h("pre", { class: "agentnb-pre anb-wire-body agentnb-wire-response" });
    this.wireRespBox = h("div", { class: "anb-wire-response-box" },
      h("div", { class: "anb-wire-head" }, h("b", {}, "raw response"), copy("response")), this.wireResp);
    pane.append(this.wireTabs, this.wireNote, this.wireWhere,
      h("div", { class: "anb-wire-head" }, h("b", {}, "request body, as agentnb renders it for this API"), copy("request")), this.wireReq, this.wireRespBox);
    // what really went over HTTP (an SDK model's capture), beside the rendering above
    this.sentTitle = h("b", { class: "anb-sent-title" });
    this.sentNote = h("div", { class: "agentnb-muted anb-sent-note" });
    this.sentReq = h("pre", { class: "agentnb-pre anb-wire-body agentnb-sent-request" });
    this.sentResp = h("pre", { class: "agentnb-pre anb-wire-body agentnb-sent-response" });
    this.sentCurl = h("pre", { class: "agentnb-sent-curl", hidden: "" });
    const curl = h("button", { class: "anb-btn anb-copy agentnb-copy-curl", "aria-label": "copy the request as a curl command",
      onclick: (e) => this.copy(this.sentCurl, e.target) }, "Copy as curl");
    this.sentBox = h("div", { class: "anb-sent-box" }, h("div", { class: "anb-wire-head" }, this.sentTitle, curl),
      this.sentReq, h("div", { class: "anb-wire-head" }, h("b", {}, "response as received")), this.sentResp, this.sentCurl);
    pane.append(this.sentNote, this.sentBox);
  }

  async copy(pre, button) {
    const text = pre.textContent;
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      const range = document.createRange();
      range.selectNodeContents(pre);
      const sel = getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      document.execCommand("copy");
      sel.removeAllRanges();
    }
    const label = button.textContent === "Copied" ? button.dataset.label : button.textContent;
    button.dataset.label = label;
    button.textContent = "Copied";
    setTimeout(() => (button.textContent = label), 1200);
  }

  setTab(name, send = true) {
    if (this.static && name === "plots") name = "event";
    for (const [n, tab] of Object.entries(this.tabs)) {
      tab.setAttribute("aria-selected", String(n === name));
      tab.classList.toggle("anb-active", n === name);
      this.panes[n].hidden = n !== name;
    }
    this.tab = name;
    if (send && this.model.get("tab") !== name) {
      this.model.set("tab", name);
      this.model.save_changes();
    }
  }

  toggleHelp(force) {
    const open = force ?? this.helpEl.hidden;
    this.helpEl.hidden = !open;
    this.helpBtn.setAttribute("aria-expanded", String(open));
  }

  addBreakpoint() {
    const value = this.bpValue.value.trim();
    if (!value) return;
    this.call("add_breakpoint", { kind: this.bpKind.value, value });
    this.bpValue.value = "";
  }

  // -- traits ----------------------------------------------------------------------------------------------

  update(name) {
    const m = this.model;
    const v = m.get(name);
    switch (name) {
      case "header": this.drawHeader(); break;
      case "selected": // drawn at the next frame: a click's message to the kernel goes first
        this.sel = v;
        this.schedulePaint(false, true);
        this.drawStatus();
        break;
      case "follow": case "message": case "count": this.drawStatus(); break;
      case "controls": case "running": this.drawControls(); break;
      case "meters": this.metersEl.innerHTML = v || ""; break;
      case "diagram": this.diagramEl.innerHTML = v || ""; break;
      case "detail": this.showDetail(v || ""); break;
      case "conversation": this.panes.conversation.innerHTML = v || ""; break;
      case "plots": this.panes.plots.innerHTML = v || '<div class="agentnb-muted">drawing…</div>'; break;
      case "wire": this.drawWire(v || {}); break;
      case "breakpoints": this.drawBreakpoints(v || []); break;
      case "pending": this.drawApprovals(); break;
      case "error":
        this.drawApprovals();
        for (const e of this.forkEditEl.querySelectorAll(".agentnb-fork-error")) e.textContent = v || "";
        break;
      case "tab": if (v && v !== this.tab) this.setTab(v, false); this.drawForkEdit(); break;
      case "runs": this.drawRuns(v || []); break;
      case "fork_edit": this.drawForkEdit(); break;
    }
  }

  drawHeader() {
    const hd = this.model.get("header") || {};
    const reason = hd.reason ? ` — ${esc(hd.reason)}` : "";
    // a saved notebook's widget without a kernel draws its snapshot: the header must not say "live"
    const mode = this.saved ? "saved snapshot · no kernel answers" : hd.mode || "";
    this.headerEl.innerHTML = `<b>${esc(hd.title || "agentnb")}</b> · run <code>${esc(hd.run_id || "-")}</code> · ` +
      `${esc(hd.model || "?")} · <span class="agentnb-mode">${esc(mode)}</span> · <span class="agentnb-badge agentnb-badge-${esc(hd.tone || "live")} ` +
      `agentnb-state-badge">${esc(hd.state || "NEW")}</span>${reason}`;
    this.lineageEl.textContent = hd.lineage || "";
    this.lineageEl.hidden = !hd.lineage;
    const ro = Boolean(hd.static) || Boolean(this.saved); // an export, or a saved snapshot: nothing to press
    this.toolbar.hidden = ro;
    this.bpRow.hidden = ro;
    this.approvalsEl.hidden = ro;
    this.tabs.plots.hidden = ro;
    this.root.classList.toggle("anb-static", ro);
    drawLabels(this);
  }

  drawRuns(runs) {
    this.picker.innerHTML = "";
    for (const r of runs) {
      this.picker.append(h("option", { value: r.run_id, selected: r.active || undefined }, r.label));
    }
    this.picker.hidden = runs.length < 2 || Boolean(this.saved);
  }

  /** Under the event's card: its call's result or arguments, editable, and a button that forks with the edit. */
  drawForkEdit() {
    const fe = this.model.get("fork_edit") || {};
    const box = this.forkEditEl;
    const key = JSON.stringify(fe);
    const show = Boolean(fe.call_id || fe.kind === "request") && !this.static && !this.saved && this.tab === "event";
    box.hidden = !show;
    if (!show || box.dataset.key === key) return;
    box.dataset.key = key;
    box.innerHTML = "";
    if (fe.too_large) { // the kernel did not send a text this large to edit (debugger/replay_edit.py EDIT_CAP)
      const what = fe.kind === "request" ? `the request of ${fe.name}` : `the ${fe.kind} of ${fe.name}`;
      box.append(h("div", { class: "agentnb-muted agentnb-edit-too-large" }, `To edit ${what}: ${fe.too_large}`));
      return;
    }
    if (fe.kind === "request") { drawReplayEdit(this, fe, box); return; } // a model turn: replay it with edits
    const what = fe.kind === "result" ? "result" : "arguments";
    const edit = h("textarea", { class: `anb-input agentnb-fork-${what}`, rows: String(Math.min(10, Math.max(2, String(fe.value).split("\n").length))),
      "aria-label": `the ${what} of ${fe.name} to fork with` });
    edit.value = fe.value;
    const label = fe.kind === "result" ? "Fork with this result" : "Fork with these arguments";
    const args = () => fe.kind === "result" ? { call_id: fe.call_id, result: edit.value } : { call_id: fe.call_id, arguments: edit.value };
    box.append(h("details", { class: "anb-edit" },
      h("summary", {}, fe.kind === "result" ? `What if ${fe.name} had answered…` : `What if the model had called ${fe.name} with…`),
      edit, h("div", {}, h("button", { class: `anb-btn agentnb-btn-fork-${what}`, "aria-label": label,
        onclick: () => this.call("fork", args()) }, label),
        h("span", { class: "agentnb-err agentnb-fork-error", role: "alert" }, this.model.get("error") || ""))));
  }

  drawStatus() {
    const m = this.model;
    const n = m.get("count");
    const away = !m.get("follow") && n ? ` · viewing event ${this.sel} of ${n - 1}` : "";
    this.statusEl.innerHTML = `${esc(m.get("message") || "")}<span class="agentnb-muted">${esc(away)}</span>`;
  }

  drawControls() {
    const c = this.model.get("controls") || {};
    for (const [name, btn] of Object.entries(this.buttons)) btn.disabled = !c[name];
  }

  drawWire(w) {
    const providers = w.providers || [];
    this.wireTabs.innerHTML = "";
    for (const p of providers) {
      this.wireTabs.append(h("button", { class: `anb-tab anb-provider${p === w.provider ? " anb-active" : ""}`,
        role: "tab", "aria-selected": String(p === w.provider), "data-provider": p,
        onclick: () => { this.model.set("wire_provider", p); this.model.save_changes(); } }, p));
    }
    this.panes.wire.setAttribute("data-seq", w.seq ?? -1);
    this.panes.wire.setAttribute("data-provider", w.provider || "");
    this.wireNote.textContent = w.note || "";
    this.wireWhere.innerHTML = (w.where || []).map(([what, where]) =>
      `<tr><td>${esc(what)}</td><td><code>${esc(where)}</code></td></tr>`).join("");
    this.wireReq.textContent = w.request || "";
    this.wireResp.textContent = w.response || "";
    this.wireRespBox.hidden = !w.response;
    const sent = w.sent || {};
    this.sentNote.textContent = [sent.note, sent.truncated].filter(Boolean).join(" · ");
    this.sentTitle.textContent = sent.title || "";
    this.sentReq.textContent = sent.request || "";
    this.sentResp.textContent = sent.response || "";
    this.sentCurl.textContent = sent.curl || "";
    this.sentBox.hidden = !sent.request;
  }

  drawBreakpoints(bps) {
    this.bpList.innerHTML = "";
    for (const bp of bps) {
      this.bpList.append(h("button", { class: "anb-chip agentnb-breakpoint", "aria-label": `remove breakpoint ${bp.label}`,
        title: "remove", onclick: () => this.call("remove_breakpoint", { id: bp.id }) }, `✕ ${bp.label}`));
    }
    this.paint();
  }

  drawApprovals() {
    const pending = this.model.get("pending") || [];
    const error = this.model.get("error") || "";
    const box = this.approvalsEl;
    const key = JSON.stringify(pending.map((p) => p.call_id));
    if (box.dataset.key === key) {
      for (const e of box.querySelectorAll(".agentnb-edit-error")) e.textContent = error;
      return;
    }
    box.dataset.key = key;
    box.innerHTML = "";
    for (const p of pending) {
      const reason = h("input", { class: "anb-input agentnb-deny-reason", placeholder: "reason (sent to the model)",
        "aria-label": `reason to deny ${p.name}` });
      const err = h("span", { class: "agentnb-err agentnb-edit-error", role: "alert" }, error);
      const buttons = h("div", { class: "anb-row-buttons" });
      if (p.kind !== "client_result") {
        const label = { outcome_unknown: "Retry with the same key", escalation: "Grant more" }[p.kind] || "Approve";
        buttons.append(h("button", { class: "anb-btn anb-good agentnb-btn-approve", "aria-label": `${label} ${p.name}`,
          onclick: () => this.call("approve", { call_id: p.call_id }) }, label));
      }
      buttons.append(h("button", { class: "anb-btn anb-bad agentnb-btn-deny", "aria-label": `Deny ${p.name}`,
        onclick: () => this.call("deny", { call_id: p.call_id, reason: reason.value }) }, "Deny"), reason);
      const card = h("div", { class: "anb-approval", "data-call-id": p.call_id },
        h("div", {}, h("b", {}, p.name), ` ${p.ask} `, h("span", { class: "agentnb-badge agentnb-badge-wait" }, `risk ${p.risk}`),
          " ", h("code", {}, p.shown_id ?? p.call_id)), buttons);
      // the kernel wrote hidden characters out (shown_id, arguments as \u escapes) and says so in p.flag
      if (p.flag) card.insertBefore(h("div", { class: "agentnb-hidden-flag", role: "alert" },
        h("span", { class: "agentnb-badge agentnb-badge-bad" }, "⚠"), ` ${p.flag}: shown as JSON escapes (\\u…)`), buttons);
      if (p.arguments !== undefined && p.kind !== "escalation") {
        // what runs if approved, readable at a glance (the kernel wrote it as indented JSON, hidden characters escaped)
        card.insertBefore(h("div", { class: "anb-approval-args" }, h("div", { class: "agentnb-muted" }, "arguments"),
          h("pre", { class: "agentnb-pre agentnb-approval-arguments", "aria-label": `arguments of ${p.name}` }, p.arguments)),
        buttons);
      }
      if (p.kind === "approval") {
        const lines = String(p.arguments).split("\n").length;
        const edit = h("textarea", { class: "anb-input agentnb-edit-arguments", rows: String(Math.min(16, Math.max(3, lines))),
          "aria-label": `edit the arguments of ${p.name}` });
        edit.value = p.arguments;
        card.append(h("details", { class: "anb-edit" }, h("summary", {}, "Edit the arguments (checked against the schema)"),
          edit, h("div", {}, h("button", { class: "anb-btn agentnb-btn-approve-edited", "aria-label": `approve ${p.name} with edited arguments`,
            onclick: () => this.call("approve", { call_id: p.call_id, arguments: edit.value }) }, "Approve edited arguments"))), err);
      } else if (p.kind !== "escalation") {
        const value = h("textarea", { class: "anb-input agentnb-submit-value", rows: "3",
          placeholder: "the result, as JSON (or plain text)", "aria-label": `result of ${p.name}` });
        card.append(value, h("div", {}, h("button", { class: "anb-btn agentnb-btn-submit-result",
          onclick: () => this.call("submit_result", { call_id: p.call_id, value: value.value }) }, "Submit result"), err));
      } else {
        card.append(err);
      }
      box.append(card);
    }
  }

  // -- rows ------------------------------------------------------------------------------------------------

  onRows(change) {
    const st = this.store;
    if (st.heard) this.hideSnapshot();
    if (change.reset) {
      this.hadTree = false;
      this.visible = null;
      this.optionsFor = "";
      this.flip.clear();
      this.selNode = -1;
    }
    if (change.tree) {
      this.layoutDirty = true;
      if (!this.hadTree && this.tree) { this.hadTree = true; requestAnimationFrame(() => this.reveal(this.sel)); } // the list becomes the tree
      this.schedulePaint(true);
      return;
    }
    if (change.building) { this.schedulePaint(false); return; }
    if (change.texts) { // summaries and labels in sight came: paint them (the filters may read them too)
      if (this.compiled && this.compiled.words.length && !st.found) this.refilter(false);
      this.schedulePaint(false);
      return;
    }
    if (change.found) { this.refilter(); return; }
    if (st.found && change.from !== undefined && st.n && st.m[st.n - 1] === undefined) {
      st.found = null; // many new rows came without their texts: the search is asked again, over them too
      this.compiled = null;
    }
    if (this.hasFilter()) {
      if (change.reset || !this.visible || !this.compiled) this.refilter(false);
      else for (let i = change.from; i < st.n; i++) if (this.passes(i)) this.visible.push(i);
    }
    this.layoutDirty = true;
    this.fillOptions();
    this.schedulePaint(true);
    if (change.ts_last) {
      requestAnimationFrame(() => {
        metrics.lags.push(Date.now() - change.ts_last);
        if (metrics.lags.length > 10000) metrics.lags.splice(0, 5000); // a long session stays bounded
      });
    }
    if (st.n && !metrics.marks.firstRows) metrics.marks.firstRows = performance.now();
    metrics.marks.rows = st.n;
    metrics.marks.lastRows = performance.now();
  }

  fillOptions() {
    const st = this.store;
    const key = `${st.types.length}/${st.tools.length}/${st.statuses.length}`;
    if (key === this.optionsFor) return;
    this.optionsFor = key;
    const fill = (select, all, values) => {
      const cur = select.value;
      select.innerHTML = "";
      select.append(h("option", { value: "" }, all));
      for (const v of [...values].filter(Boolean).sort()) select.append(h("option", { value: v }, v));
      select.value = cur;
    };
    fill(this.fType, "all events", st.types);
    fill(this.fTool, "all tools", st.tools);
    fill(this.fStatus, "any status", st.statuses);
    this.compiled = null; // the vocabularies grew: the filter's lookup tables too
  }

  hasFilter() {
    const f = this.filters;
    return Boolean(f.q.trim() || f.type || f.tool || f.turn !== "" || f.status || f.hideFragments);
  }

  /** The filters as clauses that all must hold: the selects (each may be negated), "hide fragments", and the
   * search box's words and key:value terms (type: tool: status: turn:, values separated by commas; key!=v or
   * -key:v negates; a negated status asks for a status other than those). */
  compileFilter() {
    const f = this.filters, st = this.store;
    const clauses = [], words = [];
    const add = (key, values, neg) => {
      const vals = new Set([...values].map((v) => String(v).toLowerCase()));
      if (key === "turn") { clauses.push({ key, vals, neg }); return; }
      const vocab = { type: st.types, tool: st.tools, status: st.statuses }[key];
      clauses.push({ key, neg, ok: vocab.map((v) => vals.has(String(v).toLowerCase())) });
    };
    for (const tok of f.q.trim().split(/\s+/).filter(Boolean)) {
      const m = tok.match(/^(-?)(type|tool|status|turn)(!=|:|=)(.*)$/i);
      if (m && m[4]) add(m[2].toLowerCase(), m[4].split(",").filter(Boolean), m[1] === "-" || m[3] === "!=");
      else words.push(tok.toLowerCase());
    }
    if (f.type) add("type", [f.type], f.typeNot);
    if (f.tool) add("tool", [f.tool], f.toolNot);
    if (f.status) add("status", [f.status], f.statusNot);
    if (f.turn !== "") add("turn", [f.turn], false);
    if (f.hideFragments) add("type", FRAGMENT_TYPES, true);
    return { clauses, words, key: words.join("\u0000") };
  }

  passes(i) {
    const st = this.store;
    if (!this.compiled) this.compiled = this.compileFilter();
    for (const c of this.compiled.clauses) {
      let hit;
      if (c.key === "turn") hit = c.vals.has(String(st.u[i]));
      else {
        const code = c.key === "type" ? st.k[i] : c.key === "tool" ? st.t[i] : st.x[i];
        hit = c.ok[code];
        if (c.neg && c.key === "status" && !st.status(i)) return false; // status != x: a status, and not x
        if (c.neg && c.key === "tool" && !st.tool(i)) return false; // tool != x: another tool's events
      }
      if (hit === c.neg) return false;
    }
    const words = this.compiled.words;
    if (!words.length) return true;
    const found = st.found;
    if (found && found.key === this.compiled.key && i < found.n) return found.bits[i] === 1; // the kernel's answer
    const m = st.m[i]; // a row the answer does not cover (newer, or the answer is on its way): its own text
    if (m === undefined) return false;
    for (const w of words) if (!m.toLowerCase().includes(w) && !st.type(i).toLowerCase().includes(w)) return false;
    return true;
  }

  refilter(paint = true) {
    const st = this.store;
    this.compiled = this.compileFilter();
    if (this.compiled.words.length) st.search(this.compiled.words); // the summaries are in the kernel
    if (!this.hasFilter()) {
      this.visible = null;
    } else {
      const out = [];
      for (let i = 0; i < st.n; i++) if (this.passes(i)) out.push(i);
      this.visible = out;
    }
    this.layoutDirty = true;
    if (paint) {
      this.schedulePaint(false);
      this.reveal(this.sel);
    }
  }

  setMode(mode, focus = true) {
    this.mode = mode === "flat" ? "flat" : "tree";
    for (const [m, b] of Object.entries(this.viewBtns)) {
      b.setAttribute("aria-selected", String(m === this.mode));
      b.classList.toggle("anb-active", m === this.mode);
    }
    this.root.classList.toggle("anb-tree-mode", this.mode === "tree");
    this.list.setAttribute("aria-label", this.mode === "tree" ? "tree of turns and calls" : "events");
    this.layoutDirty = true;
    this.paint();
    this.reveal(this.sel);
    if (focus) this.root.focus({ preventScroll: true });
  }

  // -- the tree ----------------------------------------------------------------------------------------------

  /** What the count says while the tree view shows the list: the kernel is building the tree (or failed to). */
  treeNote() {
    const what = this.store.building;
    if (!what || this.mode !== "tree" || this.store.nodes.length) return "";
    return what === "tree" ? " · building the tree…" : ` · no tree (${what})`;
  }

  isOpen(i) {
    const node = this.store.nodes[i];
    const byDefault = node.n === "run" || node.n === "turn";
    return this.flip.has(i) ? !byDefault : byDefault;
  }

  toggle(i) {
    const t0 = performance.now();
    if (this.flip.has(i)) this.flip.delete(i); else this.flip.add(i);
    this.layoutDirty = true;
    this.paint();
    metrics.marks.toggleMs = performance.now() - t0;
    (metrics.toggles = metrics.toggles || []).push(metrics.marks.toggleMs);
  }

  /** The tree's rows in order: -(i + 1) for node i, a seq for an event; with the filters, only the events that
   * pass and the nodes that hold one (opened). Built from the nodes and each event's group in one pass. */
  layout() {
    metrics.layouts = (metrics.layouts || 0) + 1;
    const st = this.store, nodes = st.nodes;
    const n = Math.min(st.n, st.gn);
    const key = `${st.version}/${st.treeVersion}/${n}`;
    let kids = this.tKids;
    if (this.tKidsFor !== key) { // the children lists change with the data only: opening a row reuses them
      kids = new Array(nodes.length);
      for (let i = 0; i < nodes.length; i++) kids[i] = [];
      let j = 1; // node 0 is the root
      for (let seq = 0; seq < n; seq++) {
        while (j < nodes.length && nodes[j] && nodes[j].a <= seq) { if (nodes[j].p >= 0) kids[nodes[j].p].push(-(j + 1)); j++; }
        kids[st.g[seq]].push(seq);
      }
      this.tKidsFor = key;
    }
    let keep = null;
    const filtered = this.visible !== null;
    if (filtered) {
      keep = new Uint8Array(nodes.length);
      for (const seq of this.visible) {
        for (let g = st.g[seq]; g !== undefined && g >= 0 && !keep[g]; g = nodes[g].p) keep[g] = 1;
      }
    }
    const pass = filtered ? new Uint8Array(st.n) : null;
    if (filtered) for (const seq of this.visible) pass[seq] = 1;
    const out = [], pos = new TreePos(st.n, nodes.length);
    if (!nodes.length || !n) { this.tRows = out; this.tPos = pos; this.tKids = kids; return; }
    const stack = [-1];
    while (stack.length) {
      const e = stack.pop();
      if (e < 0) {
        const i = -e - 1;
        if (filtered && !keep[i]) continue;
        pos.set(e, out.length);
        out.push(e);
        if (filtered || this.isOpen(i)) {
          const ks = kids[i];
          for (let k = ks.length - 1; k >= 0; k--) stack.push(ks[k]);
        }
      } else {
        if (filtered && !pass[e]) continue;
        pos.set(e, out.length);
        out.push(e);
      }
    }
    this.tRows = out;
    this.tPos = pos;
    this.tKids = kids;
    this.layoutDirty = false;
  }

  /** The row that shows event `seq` in the tree: the event's own, or the closed node that holds it. */
  treeEntry(seq) {
    const st = this.store;
    if (this.selNode >= 0 && st.nodes[this.selNode] && st.nodes[this.selNode].b === seq && this.tPos.has(-(this.selNode + 1))) {
      return -(this.selNode + 1);
    }
    if (this.tPos.has(seq)) return seq;
    const chain = [];
    for (let g = st.g[seq]; g !== undefined && g >= 0; g = st.nodes[g].p) chain.push(g);
    for (let k = chain.length - 1; k >= 0; k--) {
      const e = -(chain[k] + 1);
      if (this.tPos.has(e) && !this.isOpen(chain[k])) return e;
    }
    for (const g of chain) if (this.tPos.has(-(g + 1))) return -(g + 1);
    return null;
  }

  get tree() { return this.mode === "tree" && this.store.nodes.length > 0; }

  get shown() {
    if (this.tree) { if (this.layoutDirty) this.layout(); return this.tRows.length; }
    return this.visible ? this.visible.length : this.store.n;
  }

  seqAt(pos) {
    if (this.tree) {
      const e = this.tRows[pos];
      return e < 0 ? this.store.nodes[-e - 1].b : e;
    }
    return this.visible ? this.visible[pos] : pos;
  }

  posOf(seq) {
    if (this.tree) {
      if (this.layoutDirty) this.layout();
      const e = this.treeEntry(seq);
      return e === null ? -1 : this.tPos.get(e);
    }
    if (!this.visible) return seq < this.store.n ? seq : -1;
    let lo = 0, hi = this.visible.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const v = this.visible[mid];
      if (v === seq) return mid;
      if (v < seq) lo = mid + 1; else hi = mid - 1;
    }
    return -lo - 1; // not shown: -(insertion point) - 1
  }

  /** Paint at the next frame (once however often asked), then scroll the selected row into sight when `reveal`
   * or, with `follow`, when the view follows the run. */
  schedulePaint(follow, reveal = false) {
    this.revealQueued = this.revealQueued || reveal;
    this.followQueued = this.followQueued || follow;
    if (this.paintQueued) return;
    this.paintQueued = true;
    requestAnimationFrame(() => {
      this.paintQueued = false;
      if (this.holding()) { this.paintHeld = true; return; } // a queued reveal (following the run) waits too
      const show = this.revealQueued || (this.followQueued && this.model.get("follow"));
      this.revealQueued = this.followQueued = false;
      this.paint();
      if (show) this.reveal(this.sel);
    });
  }

  reveal(seq) {
    const pos = this.posOf(seq);
    if (pos < 0) return;
    const top = pos * ROW_H, list = this.list;
    if (top < list.scrollTop) list.scrollTop = top;
    else if (top + ROW_H > list.scrollTop + list.clientHeight) list.scrollTop = top + ROW_H - list.clientHeight;
    this.paint();
  }

  /** A press on a row holds the rows still (see the list), for PRESS_HOLD_MS at most. */
  holding() { return this.pressed && performance.now() - this.pressedAt < PRESS_HOLD_MS; }

  paint(scrolled = false) {
    if (!scrolled && this.holding()) { this.paintHeld = true; return; } // drawn once the press is released
    const st = this.store, list = this.list;
    const total = this.shown;
    this.spacer.style.height = `${total * ROW_H}px`;
    this.countEl.textContent = (this.visible ? `${this.visible.length.toLocaleString()} of ${st.n.toLocaleString()}` :
      eventsText(st.n)) + (st.searching ? " · searching…" : "") + this.treeNote();
    const height = list.clientHeight || 400;
    const first = Math.max(0, Math.floor(list.scrollTop / ROW_H) - OVERSCAN);
    const last = Math.min(total, Math.ceil((list.scrollTop + height) / ROW_H) + OVERSCAN);
    const bps = this.model.get("breakpoints") || [];
    const bpTools = new Set(bps.filter((b) => b.kind === "tool").map((b) => b.value));
    const bpTypes = new Set(bps.filter((b) => b.kind === "event").map((b) => b.value));
    const tree = this.tree;
    const selEntry = tree ? this.treeEntry(this.sel) : this.sel;
    const span = tree && st.nodes[0] ? Math.max(1, st.nodes[0].t1) : 1;
    const parts = [], lack = [], lackNodes = [];
    for (let pos = first; pos < last; pos++) {
      const e = tree ? this.tRows[pos] : this.seqAt(pos);
      const selected = e === selEntry;
      if (e < 0) {
        const node = st.nodes[-e - 1];
        if (node.l === undefined) lackNodes.push(node.i);
        parts.push(this.nodeRow(node, pos, selected, span, bpTools));
        continue;
      }
      const i = e;
      if (st.m[i] === undefined) lack.push(i);
      const type = st.type(i), tool = st.tool(i);
      const hasBp = tool ? bpTools.has(tool) : bpTypes.has(type);
      const cls = st.typeClasses[st.k[i]] || "";
      const status = st.status(i);
      const depth = tree ? (st.nodes[st.g[i]] ? st.nodes[st.g[i]].d + 1 : 0) : 0;
      parts.push(
        `<div class="anb-row agentnb-row${selected ? " anb-selected agentnb-selected" : ""} agentnb-ev-${esc(type)}" ` +
        `role="option" aria-selected="${selected}" data-seq="${i}" style="top:${pos * ROW_H}px">` +
        (tree ? `<span class="anb-indent" style="width:${depth * 14 + 16}px"></span>` : "") +
        `<button class="anb-bp${hasBp ? " anb-bp-on" : ""}" data-bp="${i}" tabindex="-1" ` +
        `title="${hasBp ? "remove the breakpoint" : "break on events like this"}" aria-label="toggle breakpoint">●</button>` +
        `<span class="agentnb-seq">${i}</span><span class="agentnb-kind ${cls}">${esc(type)}</span>` +
        `<span class="anb-summary">${st.m[i] === undefined ? "…" : esc(st.m[i])}</span>` +
        (status ? `<span class="anb-status anb-status-${esc(status)}">${esc(status)}</span>` : "") +
        `<span class="anb-time" title="since the run began">${fmtMs(st.w[i])}</span>` +
        (tree ? this.tick(st.w[i], span) : `<span class="agentnb-state">${esc(st.state(i))}</span>`) + "</div>");
    }
    this.rowsEl.innerHTML = parts.join("");
    if (lack.length || lackNodes.length) this.ask(lack, lackNodes);
    else if (parts.length && st.n >= (this.model.get("count") || 0)) { // every row's codes, those in sight with texts
      if (!metrics.marks.painted) metrics.marks.painted = performance.now();
      if (tree && st.gn >= st.n && !metrics.marks.treePainted) metrics.marks.treePainted = performance.now();
      this.askCards(first, last);
    }
  }

  /** Once the list stands still, ask for the cards of the events in sight (not while a run moves: they would
   * be stale at its next event), so a click shows its card without waiting for the kernel. */
  askCards(first, last) {
    clearTimeout(this.cardsTimer);
    if (this.static || this.saved || this.model.get("running")) return;
    this.cardsTimer = setTimeout(() => {
      const seqs = [];
      for (let pos = first; pos < last; pos++) {
        const e = this.tree ? this.tRows[pos] : this.seqAt(pos);
        const seq = e >= 0 ? e : (this.store.nodes[-e - 1] || {}).b; // a node's row selects its last event
        if (seq !== undefined) seqs.push(seq);
      }
      this.store.wantCards(seqs, this.model.get("count"));
    }, CARDS_AFTER_MS);
  }

  /** Ask the kernel for the texts in sight: at once after a quiet spell, else once the scrolling settles
   * (a fast scroll through a long run asks for where it stops, not for every frame on the way). */
  ask(lack, lackNodes) {
    const now = performance.now();
    clearTimeout(this.askTimer);
    if (now - (this.askedAt || 0) > ASK_EVERY_MS) {
      this.askedAt = now;
      this.store.want(lack, lackNodes);
    } else this.askTimer = setTimeout(() => this.paint(), ASK_EVERY_MS);
  }

  tick(at, span) {
    const left = Math.min(100, (100 * (at || 0)) / span);
    return `<span class="anb-wf"><span class="anb-wf-tick" style="left:${left.toFixed(2)}%"></span></span>`;
  }

  nodeRow(node, pos, selected, span, bpTools) {
    const open = this.visible !== null || this.isOpen(node.i);
    const dur = node.t1 - node.t0;
    const left = (100 * node.t0) / span, width = Math.max(0.4, (100 * dur) / span);
    let ran = "";
    if (node.x0 !== null && node.x0 !== undefined) {
      const x1 = node.x1 ?? node.t1;
      ran = `<span class="anb-wf-ran" style="left:${((100 * node.x0) / span).toFixed(2)}%;` +
        `width:${Math.max(0.4, (100 * (x1 - node.x0)) / span).toFixed(2)}%" title="ran ${fmtMs(x1 - node.x0, true)}"></span>`;
    }
    const meta = [fmtMs(dur, true)];
    if (node.tok) meta.push(`${node.tok.toLocaleString()} tok`);
    if (node.tok && node.c !== null && node.c !== undefined) meta.push(`$${node.c.toFixed(4)}`);
    if (node.f) meta.push(`${node.f.toLocaleString()} fragments`);
    const hasBp = node.n === "call" && bpTools.has(node.tool);
    const kindCls = { run: "agentnb-k-end", turn: "agentnb-k-end", model: "agentnb-k-model", call: "agentnb-k-call" }[node.n];
    return `<div class="anb-row agentnb-row anb-node agentnb-node-${node.n}${selected ? " anb-selected agentnb-selected" : ""}" ` +
      `role="treeitem" aria-level="${node.d + 1}" aria-expanded="${open}" aria-selected="${selected}" data-node="${node.i}" ` +
      `data-seq="${node.b}" style="top:${pos * ROW_H}px">` +
      `<span class="anb-indent" style="width:${node.d * 14}px"></span>` +
      `<button class="anb-twisty" data-toggle="${node.i}" tabindex="-1" aria-label="${open ? "collapse" : "expand"}">${open ? "▾" : "▸"}</button>` +
      (node.n === "call" ? `<button class="anb-bp${hasBp ? " anb-bp-on" : ""}" data-bp="${node.a}" tabindex="-1" ` +
        `title="${hasBp ? "remove the breakpoint" : "break before this tool runs"}" aria-label="toggle breakpoint">●</button>` :
        '<span class="anb-bp-slot"></span>') +
      `<span class="anb-summary anb-tlabel"><span class="agentnb-kind ${kindCls}">${node.l === undefined ? "…" : esc(node.l)}</span></span>` +
      (node.e ? `<span class="anb-effect agentnb-effect-${esc(node.e)}" title="effect mark">${esc(node.e)}</span>` : "") +
      (node.x ? `<span class="anb-status anb-status-${esc(node.x)}">${esc(node.x)}</span>` : "") +
      `<span class="anb-meta">${esc(meta.join(" · "))}</span>` +
      `<span class="anb-wf" title="${esc(`${fmtMs(node.t0)} → ${fmtMs(node.t1)}`)}"><span class="anb-wf-bar anb-wf-${node.n}" ` +
      `style="left:${left.toFixed(2)}%;width:${width.toFixed(2)}%"></span>${ran}</span></div>`;
  }

  onRowClick(e) {
    const tog = e.target.closest("[data-toggle]");
    if (tog) {
      e.stopPropagation();
      this.toggle(Number(tog.dataset.toggle));
      return;
    }
    const bp = e.target.closest("[data-bp]");
    if (bp) {
      e.stopPropagation();
      this.call("toggle_breakpoint", { seq: Number(bp.dataset.bp) });
      return;
    }
    const row = e.target.closest(".anb-row");
    if (row) {
      if (row.dataset.node !== undefined) this.selNode = Number(row.dataset.node);
      else this.selNode = -1;
      this.select(Number(row.dataset.seq), false);
      this.root.focus({ preventScroll: true });
    }
  }

  select(seq, clearNode = true) {
    if (seq < 0 || seq >= this.store.n) return;
    if (clearNode) this.selNode = -1;
    metrics.marks.clickAt = performance.now();
    this.sel = seq;
    this.model.set("selected", seq);
    this.model.save_changes(); // to the kernel first (the card comes from there); the rows are drawn at the next frame
    const card = this.store.cardOf(seq, this.model.get("count"));
    if (card !== undefined) this.showDetail(card); // drawn by the kernel already: its answer will be the same
    this.schedulePaint(false, true);
  }

  move(how) {
    const total = this.shown;
    if (!total) return;
    let pos;
    if (how === "first") pos = 0;
    else if (how === "last") pos = total - 1;
    else {
      const at = this.posOf(this.sel);
      pos = at >= 0 ? at + how : (how > 0 ? -at - 1 : -at - 2);
    }
    pos = Math.max(0, Math.min(total - 1, pos));
    if (this.tree) {
      const e = this.tRows[pos];
      this.selNode = e < 0 ? -e - 1 : -1;
      this.select(this.seqAt(pos), false);
      return;
    }
    this.select(this.seqAt(pos));
  }

  /** Enter on a tree row: open or close the node it is (or the node that holds the event). */
  toggleSelected() {
    if (!this.tree) return;
    const e = this.treeEntry(this.sel);
    if (e !== null && e < 0) this.toggle(-e - 1);
  }

  onKey(e) {
    const tag = (e.target.tagName || "").toLowerCase();
    if (tag === "input" || tag === "textarea" || tag === "select" || e.ctrlKey || e.metaKey || e.altKey) return;
    const ro = this.static;
    const actions = {
      ArrowLeft: () => this.move(-1), ArrowUp: () => this.move(-1), k: () => this.move(-1),
      ArrowRight: () => this.move(1), ArrowDown: () => this.move(1), j: () => this.move(1),
      Home: () => this.move("first"), End: () => this.move("last"), Enter: () => this.toggleSelected(),
      t: () => this.setMode(this.mode === "tree" ? "flat" : "tree"),
      "/": () => this.search.focus(), "?": () => this.toggleHelp(), Escape: () => this.toggleHelp(false),
    };
    if (!ro) Object.assign(actions, {
      s: () => this.call("step"), n: () => this.call("next_turn"), c: () => this.call("cont"), p: () => this.call("pause"),
    });
    const fn = actions[e.key];
    if (!fn) return;
    e.preventDefault();
    e.stopPropagation(); // the notebook must not also act on it (j/k/c... are notebook commands)
    fn();
  }
}

// -- labels: what a person says about the run or an event (agentnb/_debugger/labelling.py) --------------------
//
// The kernel syncs a `labels` trait: the run's labels (items), what the selected event can be labelled as
// (targets), who labels, and the last answer to a form (done / error, with the form it answers). The header
// shows the run's labels and every labelled event (a chip that selects it), the card the labels of its event
// and of its call. An export's page has no kernel: its labels come from the page's own block (loadPageLabels),
// shown the same way, with no form.

const HIDDEN_CHARS = /[\u00AD\u061C\u180E\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\uFEFF]/g;

/** Text with invisible and direction-changing characters written out (as the kernel's visible() does). */
function shownText(s) {
  return String(s ?? "").replace(HIDDEN_CHARS, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

function labelText(lb) {
  const parts = [];
  if (lb.tag) parts.push(shownText(lb.tag));
  if (lb.score !== null && lb.score !== undefined) parts.push(`score ${lb.score}`);
  if (lb.note) parts.push(shownText(lb.note).slice(0, 80));
  return parts.join(" · ");
}

function labelChip(lb, onclick) {
  const where = lb.seq === null || lb.seq === undefined ? "" : lb.call_id ? `call ${shownText(lb.call_id)}: ` : `event ${lb.seq}: `;
  const title = [lb.note ? shownText(lb.note) : "", lb.by ? `by ${shownText(lb.by)}` : "", lb.at || ""].filter(Boolean).join("\n");
  return h(onclick ? "button" : "span", { class: `anb-chip anb-label-chip agentnb-label${onclick ? " agentnb-label-event" : ""}`,
    title, "data-seq": lb.seq ?? "", "data-label-id": lb.label_id, onclick }, `${where}${labelText(lb)}`);
}

/** A tag, note and score form; `send(values)` is called on Save. */
function labelForm(view, form, extra, send) {
  const tag = h("input", { class: "anb-input agentnb-label-tag", placeholder: "tag", "aria-label": `tag (${form})` });
  const note = h("input", { class: "anb-input agentnb-label-note", placeholder: "note", "aria-label": `note (${form})` });
  const score = h("input", { class: "anb-input agentnb-label-score", placeholder: "score", inputmode: "decimal",
    "aria-label": `score (${form})`, size: "5" });
  const save = h("button", { class: `anb-btn anb-good agentnb-btn-label-save`, "aria-label": `save the label (${form})`,
    onclick: () => send({ tag: tag.value, note: note.value, score: score.value }) }, "Save label");
  const who = h("span", { class: "agentnb-muted agentnb-label-who" });
  const err = h("span", { class: "agentnb-err agentnb-label-error", role: "alert" });
  const done = h("span", { class: "agentnb-muted agentnb-label-done", role: "status" });
  const box = h("div", { class: `anb-label-form agentnb-label-form-${form}`, hidden: true }, ...extra, tag, note, score, save, who, err, done);
  for (const input of [tag, note, score]) input.addEventListener("keydown", (e) => { if (e.key === "Enter") save.click(); });
  return { box, tag, note, score, who, err, done, clear: () => { tag.value = ""; note.value = ""; score.value = ""; } };
}

/** Build the labels' bar under the header and the box under the event's card (called once from build()). */
function buildLabels(view) {
  view.labelBar = h("div", { class: "anb-labels-bar agentnb-run-labels" });
  view.labelChips = h("span", { class: "anb-label-chips agentnb-run-label-chips" });
  view.labelRunBtn = h("button", { class: "anb-btn agentnb-btn-label-run", "aria-label": "label this run",
    onclick: () => { view.runForm.box.hidden = !view.runForm.box.hidden; if (!view.runForm.box.hidden) view.runForm.tag.focus(); } }, "Label run");
  view.datasetBtn = h("button", { class: "anb-btn agentnb-btn-add-to-dataset", "aria-label": "add this run to the dataset",
    hidden: true, onclick: () => { view.datasetForm.box.hidden = !view.datasetForm.box.hidden; } }, "Add to dataset");
  view.runForm = labelForm(view, "run", [], (v) => view.call("label", { form: "run", about: "run", ...v }));
  // add to a dataset: its case id, the expected output (the run's own; cleared: none) and its calls
  const caseId = h("input", { class: "anb-input agentnb-dataset-id", "aria-label": "the case's id", placeholder: "case id" });
  const expected = h("textarea", { class: "anb-input agentnb-dataset-expected", rows: "2",
    "aria-label": "the expected output (optional)", placeholder: "expected output (optional: empty for none)" });
  const calls = h("input", { type: "checkbox", class: "agentnb-dataset-calls", checked: true, "aria-label": "expect its calls" });
  const add = h("button", { class: "anb-btn anb-good agentnb-btn-dataset-add", "aria-label": "add the case",
    onclick: () => view.call("add_to_dataset", { id: caseId.value, expected: expected.value, calls: calls.checked }) }, "Add case");
  const where = h("span", { class: "agentnb-muted agentnb-dataset-where" });
  const err = h("span", { class: "agentnb-err agentnb-label-error", role: "alert" });
  const done = h("span", { class: "agentnb-muted agentnb-label-done", role: "status" });
  view.datasetForm = { box: h("div", { class: "anb-label-form agentnb-dataset-form", hidden: true }, caseId,
    h("label", { class: "anb-check" }, calls, " expect its calls"), expected, add, where, err, done), caseId, expected, where, err, done };
  view.labelBar.append(h("span", { class: "agentnb-muted" }, "labels "), view.labelChips, view.labelRunBtn, view.datasetBtn,
    view.runForm.box, view.datasetForm.box);
  view.lineageEl.after(view.labelBar);

  view.cardLabels = h("div", { class: "anb-card-labels agentnb-card-labels" });
  view.cardChips = h("span", { class: "anb-label-chips agentnb-card-label-chips" });
  view.labelEventBtn = h("button", { class: "anb-btn agentnb-btn-label-event", "aria-label": "label this event",
    onclick: () => { view.eventForm.box.hidden = !view.eventForm.box.hidden; if (!view.eventForm.box.hidden) view.eventForm.tag.focus(); } }, "Label…");
  view.labelAbout = h("select", { class: "anb-input agentnb-label-about", "aria-label": "what the label is about" });
  view.eventForm = labelForm(view, "event", [view.labelAbout], (v) => {
    const lb = view.model.get("labels") || {};
    const target = (lb.targets || [])[Number(view.labelAbout.value) || 0] || {};
    view.call("label", { form: "event", about: target.about || "event", seq: target.seq, call_id: target.call_id, turn: target.turn, ...v });
  });
  view.cardLabels.append(view.cardChips, view.labelEventBtn, view.eventForm.box);
  view.panes.event.after(view.cardLabels);
  for (const name of ["labels", "selected", "detail"]) { // detail: a static page says nothing else on a click
    const fn = () => drawLabels(view);
    view.model.on(`change:${name}`, fn);
    view.disposers.push(() => view.model.off(`change:${name}`, fn));
  }
  const onTree = (change) => { if (change.tree || change.reset) drawLabels(view); };
  view.store.listeners.add(onTree);
  view.disposers.push(() => view.store.listeners.delete(onTree));
  view.labelStamp = -1;
  drawLabels(view);
}

/** The labels of the selected event's card: its own, and its call's (the tree's call node that holds it). */
function labelsHere(view, items, seq) {
  const st = view.store;
  const node = st.nodes[st.g[seq]];
  const call = node && node.n === "call" ? node : null;
  return items.filter((lb) => lb.seq === seq || (call && lb.call_id && lb.seq >= call.a && lb.seq <= call.b));
}

function drawLabels(view) {
  if (!view.labelBar) return;
  const lb = view.model.get("labels") || {};
  const items = lb.items || [];
  const ro = view.static || Boolean(view.saved) || !lb.can && !lb.why; // nothing to press without a kernel
  const seq = view.model.get("selected");
  view.labelChips.replaceChildren(...items.filter((x) => x.seq === null || x.seq === undefined).map((x) => labelChip(x)),
    ...items.filter((x) => x.seq !== null && x.seq !== undefined).map((x) => labelChip(x, () => view.select(x.seq))));
  view.labelBar.hidden = ro && !items.length;
  view.labelRunBtn.hidden = ro;
  view.datasetBtn.hidden = ro || !lb.dataset;
  const here = labelsHere(view, items, seq);
  view.cardChips.replaceChildren(...here.map((x) => labelChip(x)));
  view.cardLabels.hidden = ro && !here.length;
  view.labelEventBtn.hidden = ro;
  if (ro) { view.runForm.box.hidden = view.eventForm.box.hidden = view.datasetForm.box.hidden = true; return; }
  const targets = lb.targets || [];
  const key = JSON.stringify(targets);
  if (view.labelAbout.dataset.key !== key) {
    view.labelAbout.dataset.key = key;
    view.labelAbout.replaceChildren(...targets.map((t, i) => h("option", { value: String(i) }, shownText(t.text))));
  }
  const who = lb.can ? `as ${lb.by || "?"} → ${lb.book}` : lb.why || "";
  view.runForm.who.textContent = who;
  view.eventForm.who.textContent = who;
  const ds = lb.dataset;
  if (ds && view.datasetForm.key !== `${ds.id}/${ds.expected}`) { // a new run or output: the form starts from it
    view.datasetForm.key = `${ds.id}/${ds.expected}`;
    view.datasetForm.caseId.value = ds.id;
    view.datasetForm.expected.value = ds.expected;
  }
  if (ds) view.datasetForm.where.textContent = `→ ${ds.where}`;
  const forms = { run: view.runForm, event: view.eventForm, dataset: view.datasetForm };
  for (const [name, f] of Object.entries(forms)) {
    f.err.textContent = lb.form === name ? lb.error || "" : "";
    f.done.textContent = lb.form === name ? lb.done || "" : "";
  }
  if (lb.stamp !== view.labelStamp) { // a new answer: a form that was saved starts empty again
    if (view.labelStamp >= 0 && lb.done && forms[lb.form] && forms[lb.form].clear) forms[lb.form].clear();
    view.labelStamp = lb.stamp ?? -1;
  }
}

/** An export's labels (agentnb/_label_books.py HtmlPage): its inert block, JSON Lines in gzip and base64. */
async function loadPageLabels(model) {
  const script = document.getElementById("agentnb-labels");
  const items = [];
  if (script && script.textContent.trim()) {
    try {
      const packed = await fetch(`data:application/octet-stream;base64,${script.textContent.trim()}`);
      const text = await new Response(packed.body.pipeThrough(new DecompressionStream("gzip"))).text();
      const runId = (model.state.header || {}).run_id; // the kernel wrote its hidden characters out
      for (const line of text.split("\n")) {
        if (!line.trim()) continue;
        const lb = JSON.parse(line);
        if (runId === undefined || lb.run_id === runId || shownText(lb.run_id) === runId) items.push(lb);
      }
    } catch (e) {
      model.state.labels = { can: false, items: [], error: `the labels in this page are damaged (${e})`, form: "run" };
      return;
    }
  }
  model.state.labels = { can: false, items, targets: [] };
}

// -- stepping into a paused run (agentnb/_debugger/intervene.py) -------------------------------------------

/**
 * The box under the approvals where a person steps into a paused run: a message the model reads on its next
 * request, Cancel (with a reason) on each running or queued call, End run (with a reason). It reads the
 * `intervene` trait; each button sends {kind: "call", method: "intervene", args: {what, ...}}, and the kernel's
 * answer (the event appended, or why it was refused) comes back in the same trait.
 */
function attachIntervene(view) {
  const model = view.model;
  const who = h("code", { class: "agentnb-intervene-by" });
  const why = h("span", { class: "agentnb-muted agentnb-intervene-why" });
  const text = h("textarea", { class: "anb-input agentnb-interject-text", rows: "2",
    placeholder: "a message the model reads on its next request (after this turn's results)",
    "aria-label": "a message for the model" });
  const send = (what, args) => model.send({ kind: "call", method: "intervene", args: { what, ...args } });
  const tell = h("button", { class: "anb-btn agentnb-btn-interject", "aria-label": "tell the model",
    onclick: () => send("interject", { text: text.value }) }, "Tell the model");
  const calls = h("div", { class: "anb-intervene-calls agentnb-intervene-calls" });
  const endReason = h("input", { class: "anb-input agentnb-end-reason", placeholder: "why end the run (recorded)",
    "aria-label": "reason to end the run" });
  const end = h("button", { class: "anb-btn anb-bad agentnb-btn-end-run", "aria-label": "end the run",
    onclick: () => send("end", { reason: endReason.value }) }, "End run");
  const error = h("div", { class: "agentnb-err agentnb-intervene-error", role: "alert" });
  const said = h("div", { class: "agentnb-muted agentnb-intervene-said", role: "status" });
  const box = h("details", { class: "anb-intervene agentnb-intervene" },
    h("summary", {}, h("b", {}, "Step in"), " as ", who, " ", why),
    h("div", { class: "anb-row-buttons" }, text, tell), calls,
    h("div", { class: "anb-row-buttons" }, endReason, end), error, said);
  view.approvalsEl.after(box);
  let callsKey = "";
  let saidKey = "";
  let could = null; // open while the run can be stepped into; folded (one line) while it cannot: new, going, over
  const draw = () => {
    const st = model.get("intervene") || {};
    box.hidden = !st.by || view.static || Boolean(view.saved);
    if (box.hidden) return;
    const can = !st.why;
    if (can !== could) { box.open = can; could = can; } // only when that changes: a person's own fold stays
    who.textContent = st.by;
    why.textContent = st.why ? `· ${st.why}` : "· the run stands still: what you do here is recorded";
    error.textContent = st.error || "";
    said.textContent = st.said || "";
    if (st.said && st.said !== saidKey && !st.error) { // it worked: clear what was typed for it
      if (st.said.includes("told the model")) text.value = "";
      if (st.said.includes("ended the run")) endReason.value = "";
    }
    saidKey = st.said || "";
    const key = JSON.stringify(st.calls || []);
    if (key === callsKey) return;
    callsKey = key;
    calls.replaceChildren(...(st.calls || []).map((c) => {
      const reason = h("input", { class: "anb-input agentnb-cancel-reason", placeholder: "reason (the model reads it)",
        "aria-label": `reason to cancel ${c.name}` });
      return h("div", { class: "anb-row-buttons anb-intervene-call", "data-call-id": c.call_id },
        h("b", {}, c.name), " ", h("code", {}, c.shown_id), " ", h("span", { class: "agentnb-badge" }, c.status), reason,
        h("button", { class: "anb-btn agentnb-btn-cancel-call", "aria-label": `cancel ${c.name}`,
          onclick: () => send("cancel_call", { call_id: c.call_id, reason: reason.value }) }, "Cancel call"));
    }));
  };
  for (const name of ["intervene", "header"]) {
    model.on(`change:${name}`, draw);
    view.disposers.push(() => model.off(`change:${name}`, draw));
  }
  draw();
}

/**
 * Under a model turn's card: its request as sent (system prompt, messages' text, tool choice, tools offered),
 * editable as JSON, and "Replay this turn with edits", which forks from just before the request with the edit
 * (agentnb/_debugger/replay_edit.py); the fork shows in this widget, its lineage says "request edited".
 */
function drawReplayEdit(view, fe, box) {
  const lines = String(fe.value).split("\n").length;
  const edit = h("textarea", { class: "anb-input agentnb-replay-request", rows: String(Math.min(16, Math.max(4, lines))),
    spellcheck: "false", "aria-label": `the request of ${fe.name} to replay with edits` });
  edit.value = fe.value;
  const label = "Replay this turn with edits";
  box.append(h("details", { class: "anb-edit agentnb-replay" },
    h("summary", {}, `Replay ${fe.name} with an edited request…`),
    h("div", { class: "agentnb-muted" }, "edit the system prompt, a message's text, the tool choice or the tools; " +
      "a fork starts from just before this request"),
    edit, h("div", {}, h("button", { class: "anb-btn agentnb-btn-replay", "aria-label": label,
      onclick: () => view.call("replay", { seq: fe.seq, request: edit.value }) }, label),
      h("span", { class: "agentnb-err agentnb-fork-error", role: "alert" }, view.model.get("error") || ""))));
}

// -- anywidget entry points --------------------------------------------------------------------------------

function initialize({ model }) {
  // anywidget drops the listeners an earlier initialize added (a reloaded module): start a store that listens
  const key = model.get("key");
  if (key) forget(key);
  storeOf(model);
  sayHello(model);
}

const HELLO_EVERY_MS = 1500;
const HELLO_TRIES = 40; // a minute: the kernel may be busy running the cell that displayed the widget

/**
 * Say hello until the kernel answers it. A hello sent while the page's comms come up can be lost (a reopened
 * notebook's widget then waits for rows forever), so it is said again every 1.5 s, for a minute at most, until
 * a "welcome" comes back. Each hello names this page; the kernel answers a repeat of one it answered less
 * than 5 s before with nothing (agentnb/_debugger/hello.py), so hellos queued behind a busy cell send the rows
 * once, and a page whose answer was lost on the way is answered again.
 */
function sayHello(model) {
  const store = storeOf(model);
  if (store.helloTimer) return;
  if (model instanceof StaticModel) { model.send({ kind: "hello" }); return; } // answers at once, in this page
  store.page = store.page || `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
  let tries = 0;
  const said = (metrics.hellos = metrics.hellos || { sent: 0, errors: [] }); // read by a failing browser test
  const hello = () => {
    try { model.send({ kind: "hello", page: store.page, retry: tries > 0 }); said.sent += 1; }
    catch (err) { said.errors.push(String(err)); }
  };
  if (!metrics.marks.helloAt) metrics.marks.helloAt = performance.now();
  hello();
  store.helloTimer = setInterval(() => {
    if (store.welcomed || ++tries > HELLO_TRIES) { clearInterval(store.helloTimer); return; }
    hello();
  }, HELLO_EVERY_MS);
}

function render({ model, el }) {
  metrics.marks.renderAt = performance.now();
  const view = new DebuggerView(model, el);
  return () => view.dispose();
}

// -- without a kernel --------------------------------------------------------------------------------------

/** A model that answers from the data an export embedded: the same traits the kernel would sync. */
class StaticModel {
  constructor(data) {
    this.d = data;
    this.handlers = {};
    this.dirty = new Set();
    const n = data.count;
    this.state = {
      header: data.header, count: n, selected: Math.max(0, n - 1), follow: true, running: false, message: "",
      controls: {}, meters: "", diagram: "", detail: "", conversation: "", tab: "event",
      wire_provider: data.wire_titles[0], wire: {}, plots: "", breakpoints: [], pending: [], error: "",
    };
    this.derive();
  }
  get(k) { return this.state[k]; }
  set(k, v) { this.state[k] = v; this.dirty.add(k); }
  on(ev, fn) { (this.handlers[ev] = this.handlers[ev] || []).push(fn); }
  off(ev, fn) { this.handlers[ev] = (this.handlers[ev] || []).filter((f) => f !== fn); }
  fire(ev, arg) { for (const fn of this.handlers[ev] || []) fn(arg); }
  save_changes() {
    if (this.dirty.has("selected")) this.state.follow = this.state.selected === this.d.count - 1;
    this.dirty.clear();
    const before = { ...this.state };
    this.derive();
    for (const k of Object.keys(this.state)) if (this.state[k] !== before[k]) this.fire(`change:${k}`);
    this.fire("change:follow");
  }
  /** The page's requests, answered from the embedded data as the kernel answers them (widget.py _answer). */
  send(msg) {
    const r = this.d.rows;
    if (msg.kind === "hello") queueMicrotask(() => {
      this.fire("msg:custom", { ...r, cols: { k: r.k, s: r.s, u: r.u, t: r.t, x: r.x } }); // every text too
      if (this.d.tree) this.fire("msg:custom", this.d.tree);
    });
    else if (msg.kind === "texts?") queueMicrotask(() => {
      const clip = (asked, n) => (asked || []).map(([a, b]) => [Math.max(0, a), Math.min(n, b)]).filter(([a, b]) => b > a);
      const rows = clip(msg.rows, this.d.count), nodes = clip(msg.nodes, this.d.tree ? this.d.tree.nodes.length : 0);
      const m = [], w = [], l = [];
      for (const [a, b] of rows) for (let i = a; i < b; i++) { m.push(r.m[i]); w.push(r.w[i]); }
      for (const [a, b] of nodes) for (let i = a; i < b; i++) l.push(this.d.tree.nodes[i][4]);
      this.fire("msg:custom", { kind: "texts", rows, m, w, nodes, l });
    });
    else if (msg.kind === "search?") queueMicrotask(() => {
      const words = msg.words.map((x) => String(x).toLowerCase()), types = r.types.map((x) => x.toLowerCase()), seqs = [];
      for (let i = 0; i < this.d.count; i++) {
        const low = r.m[i].toLowerCase();
        if (words.every((x) => low.includes(x) || types[r.k[i]].includes(x))) seqs.push(i);
      }
      this.fire("msg:custom", { kind: "found", words: msg.words, n: this.d.count, seqs });
    });
    else if (msg.kind === "call" && msg.method === "select") { this.set("selected", msg.args.seq); this.save_changes(); }
  }
  /** The cards and wire bodies arrive after the first paint: redraw the selected moment with them. */
  later(extra) {
    Object.assign(this.d, extra);
    const before = { ...this.state };
    this.derive();
    for (const k of Object.keys(this.state)) if (this.state[k] !== before[k]) this.fire(`change:${k}`);
  }
  /** An event whose card the export left out (past its budget): its row's summary and the event as recorded. */
  recorded(seq) {
    const book = this.book || (this.book = transcriptPages(document.getElementById("agentnb-transcript")));
    const at = Math.floor(seq / book.size), page = book.got.get(at);
    if (page === undefined) {
      book.got.set(at, null);  // inflate only this event's page, once; then draw it
      const [a, b] = book.bounds[at] || [0, 0];
      // kept as bytes, each line decoded when shown: a page's text is not held as strings
      inflate(book.text.slice(a, b)).then((r) => r.arrayBuffer()).then((buffer) => {
        const bytes = new Uint8Array(buffer), starts = [0];
        for (let i = bytes.indexOf(10); i !== -1; i = bytes.indexOf(10, i + 1)) starts.push(i + 1);
        for (const old of book.got.keys()) if (book.got.size >= PAGES_KEPT && old !== at) book.got.delete(old);
        book.got.set(at, { bytes, starts });
        this.later({});
      });
    }
    if (!page) return '<div class="agentnb-muted">loading…</div>';
    const { bytes, starts } = page, i = at ? seq - at * book.size : seq;
    const line = i + 1 < starts.length ? new TextDecoder().decode(bytes.subarray(starts[i], starts[i + 1] - 1)) : "";
    const rows = this.d.rows, k = rows.k[seq];
    return `<div class="agentnb-detail-card" data-seq="${seq}"><div class="agentnb-detail-summary">` +
      `<span class="agentnb-seq">${seq}</span><span class="agentnb-kind ${rows.type_classes[k]}">${esc(rows.types[k])}` +
      `</span>${esc(rows.m[seq])}<span class="agentnb-state">→ ${esc(rows.states[rows.s[seq]])}</span></div>` +
      `<div class="agentnb-muted">this export renders ${this.d.card_budget.toLocaleString("en")} cards (the first ` +
      `event's, then the latest): here is the event as recorded</div>` +
      `<div class="agentnb-pre agentnb-recorded">${esc(line)}</div></div>`;
  }
  derive() {
    const d = this.d, s = this.state, n = d.count;
    if (!n) return;
    const seq = Math.max(0, Math.min(n - 1, s.selected));
    const rows = d.rows;
    s.detail = !d.detail ? '<div class="agentnb-muted">loading…</div>' : d.detail[seq] ?? this.recorded(seq);
    s.meters = d.meters[d.meter_at[seq]];
    s.diagram = d.diagrams[rows.states[rows.s[seq]]] || "";
    const [v, count] = d.where[seq];
    const ids = d.versions[v].slice(0, count);
    const skipped = Math.max(0, ids.length - 60);
    s.conversation = `<div class="agentnb-time-travel" data-seq="${seq}"><div class="agentnb-muted">the conversation ` +
      `after event ${seq} (${esc(rows.types[rows.k[seq]])}): ${ids.length} messages</div>` +
      (skipped ? `<div class="agentnb-muted">… ${skipped} earlier messages</div>` : "") +
      ids.slice(skipped).map((i) => d.messages[i]).join("") + "</div>";
    if (s.tab === "wire" && d.wire) {
      let req = -1;
      for (const r of d.requests) { if (r <= seq) req = r; else break; }
      const kept = d.wire[String(req)];
      const provider = s.wire_provider;
      s.wire = kept ? kept[provider] : {
        seq: req, provider, providers: d.wire_titles, where: [], request: "", response: "", sent: {},
        note: req < 0 ? "no model request yet at this event" : "this request's wire view was left out of the export (size limit)",
      };
    }
  }
}

async function decode(text, encoding) {
  if (encoding !== "gzip+base64") return JSON.parse(text);
  return JSON.parse(await (await inflate(text)).text());
}

const PAGES_KEPT = 8;
/** The pages of an export's embedded transcript (agentnb/_embedded.py): one base64 gzip member per line of the
 * element, each of `data-page-lines` events (an export made before the pages has one, of them all). */
function transcriptPages(script) {
  const text = script ? script.textContent : "", bounds = [];
  let a = 0;
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) { bounds.push([a, i]); a = i + 1; }
  bounds.push([a, text.length]);
  return { text, bounds, size: Number(script && script.dataset.pageLines) || Infinity, got: new Map() };
}

/** Base64 of gzip, inflated with the browser's own decoders (a data: URL read with fetch, a DecompressionStream). */
async function inflate(text) {
  const packed = await fetch(`data:application/octet-stream;base64,${text.trim()}`);
  return new Response(packed.body.pipeThrough(new DecompressionStream("gzip")));
}

/** Boot the read-only debugger of an exported page (agentnb/_debugger/export.py). */
async function standalone(el) {
  const t0 = performance.now();
  const read = (id) => {
    const script = document.getElementById(id);
    return decode(script.textContent, script.dataset.encoding);
  };
  const model = new StaticModel(await read("agentnb-data"));
  await loadPageLabels(model);
  metrics.marks.decoded = performance.now() - t0;
  initialize({ model });
  render({ model, el });
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  metrics.marks.standaloneFirstPaint = performance.now();
  model.later(await read("agentnb-data-later"));
  await new Promise((r) => requestAnimationFrame(r));
  metrics.marks.standaloneReady = performance.now();
  el.dataset.ready = "true";
}

export { standalone, StaticModel, RowStore };
export default { initialize, render };
