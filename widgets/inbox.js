// agentnb approvals inbox: the front end (an anywidget ES module; plain JavaScript, no build step).
//
// Theory of operation. The kernel (agentnb/_inbox_widget.py) lists the calls waiting for a person and decides;
// this module only draws. The rows arrive in the synced trait `rows` (one per waiting call, every text made
// visible by the kernel), and are grouped, filtered and selected here. Every button sends
// {kind: "call", method, args} naming a public method of InboxWidget (approve, deny, edit, submit, open,
// refresh, end) with the keys of the rows the person saw; what became of each decision comes back in `outcomes`.
// A run's tags (`r.tags`) are badges on its rows; grouping by tag puts a row under each of its tags.

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c !== null && c !== undefined) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

function duration(s) {
  s = Math.max(0, Math.round(s));
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

const GROUPS = [["", "no grouping"], ["tool", "tool"], ["risk", "risk"], ["kind", "kind"], ["batch", "batch"], ["tag", "tag"], ["run_id", "run"]];

/** The groups a row belongs to: one value, or for tags each of the run's tags ("(none)" without). */
function groupsOf(r, group) {
  if (group === "tag") return (r.tags || []).length ? r.tags : ["(none)"];
  return [r[group] || "(none)"];
}

function render({ model, el }) {
  const state = { group: "", filter: "", tag: "", selected: new Set(), open: new Map() };
  const call = (method, args = {}) => model.send({ kind: "call", method, args });
  const root = h("div", { class: "agentnb-inbox-root" });
  el.append(root);

  const head = h("div", { class: "anbi-head" });
  const groupSel = h("select", { class: "anbi-group", "aria-label": "group by", onchange: () => { state.group = groupSel.value; draw(); } },
    ...GROUPS.map(([v, label]) => h("option", { value: v }, label)));
  const filterBox = h("input", { class: "anbi-filter", type: "search", placeholder: "filter: tool, run, batch, risk, arguments…",
    "aria-label": "filter", oninput: () => { state.filter = filterBox.value.toLowerCase(); draw(); } });
  const tagSel = h("select", { class: "anbi-tag", "aria-label": "only runs with the tag", onchange: () => { state.tag = tagSel.value; draw(); } });
  const note = h("input", { class: "anbi-note", type: "text", placeholder: "note / reason (the model reads a denial's reason)", "aria-label": "note or reason" });
  const allBox = h("input", { type: "checkbox", class: "anbi-all", "aria-label": "select every row shown", onchange: () => {
    for (const r of shown()) allBox.checked ? state.selected.add(r.key) : state.selected.delete(r.key);
    draw();
  } });
  const count = h("span", { class: "anbi-count" });
  const approveSel = h("button", { class: "anbi-btn anbi-approve-selected", onclick: () => decideSelected("approve") }, "Approve selected");
  const denySel = h("button", { class: "anbi-btn anbi-deny-selected", onclick: () => decideSelected("deny") }, "Deny selected");
  const refresh = h("button", { class: "anbi-btn anbi-refresh", title: "list the inbox again", onclick: () => call("refresh") }, "↻");
  const title = h("span", { class: "anbi-title" });
  head.append(h("div", { class: "anbi-line" }, title, refresh),
    h("div", { class: "anbi-line" }, groupSel, tagSel, filterBox),
    h("div", { class: "anbi-line anbi-bar" }, allBox, count, note, approveSel, denySel));
  const message = h("div", { class: "anbi-message", role: "status" });
  const list = h("div", { class: "anbi-list" });
  root.append(head, message, list);

  function shown() {
    let rows = model.get("rows") || [];
    if (state.tag) rows = rows.filter((r) => (r.tags || []).includes(state.tag));
    if (!state.filter) return rows;
    return rows.filter((r) => [r.tool, r.run_id, r.batch, r.risk, r.kind, r.arguments, r.call_id, ...(r.tags || [])].join("\n").toLowerCase().includes(state.filter));
  }

  function drawTags(rows) {
    const tags = [...new Set(rows.flatMap((r) => r.tags || []))].sort();
    if (state.tag && !tags.includes(state.tag)) tags.unshift(state.tag);
    tagSel.replaceChildren(h("option", { value: "" }, "every tag"), ...tags.map((t) => h("option", { value: t }, `tag: ${t}`)));
    tagSel.value = state.tag;
    tagSel.hidden = !tags.length;
  }

  function decideSelected(method) {
    const keys = shown().filter((r) => state.selected.has(r.key)).map((r) => r.key);
    if (!keys.length) { message.textContent = "select rows first"; return; }
    const text = note.value.trim();
    call(method, method === "deny" ? { keys, reason: text } : { keys, note: text });
  }

  function ages() {
    const now = Date.now();
    for (const cell of list.querySelectorAll(".anbi-age")) {
      const asked = Date.parse(cell.dataset.asked);
      let text = `waiting ${duration((now - asked) / 1000)}`;
      if (cell.dataset.expires) {
        const left = (Date.parse(cell.dataset.expires) - now) / 1000;
        text += left > 0 ? ` · expires in ${duration(left)}` : " · expired (it can still be denied)";
        cell.classList.toggle("anbi-expired", left <= 0);
      }
      cell.textContent = text;
    }
  }

  function rowEl(r) {
    const box = h("input", { type: "checkbox", class: "anbi-select", "aria-label": `select ${r.call_id}`, onchange: () => {
      box.checked ? state.selected.add(r.key) : state.selected.delete(r.key);
      count.textContent = `${state.selected.size} selected`;
    } });
    box.checked = state.selected.has(r.key);
    const rowNote = h("input", { type: "text", class: "anbi-row-note", placeholder: "reason / note", "aria-label": "reason or note for this call" });
    const panel = h("div", { class: "anbi-panel" });
    const opened = state.open.get(r.key);
    if (opened) {
      const area = h("textarea", { class: "anbi-edit", rows: 6, spellcheck: "false", "aria-label": opened === "edit" ? "edited arguments (JSON)" : "result to submit" });
      area.value = opened === "edit" ? r.arguments : "";
      const send = h("button", { class: `anbi-btn anbi-send-${opened}`, onclick: () => {
        if (opened === "edit") call("edit", { key: r.key, arguments: area.value });
        else call("submit", { key: r.key, value: area.value });
      } }, opened === "edit" ? "Approve with these arguments" : "Submit this result");
      panel.append(area, send);
    }
    const toggle = (what) => { state.open.get(r.key) === what ? state.open.delete(r.key) : state.open.set(r.key, what); draw(); };
    const client = r.kind === "client_result" || r.kind === "outcome_unknown";
    const buttons = h("div", { class: "anbi-buttons" },
      r.kind === "client_result" ? null : h("button", { class: "anbi-btn anbi-approve", onclick: () => call("approve", { keys: [r.key], note: rowNote.value.trim() }) }, "Approve"),
      h("button", { class: "anbi-btn anbi-deny", onclick: () => call("deny", { keys: [r.key], reason: rowNote.value.trim() }) }, "Deny"),
      r.kind === "client_result" || r.kind === "escalation" ? null : h("button", { class: "anbi-btn anbi-edit-btn", onclick: () => toggle("edit") }, "Edit arguments"),
      client ? h("button", { class: "anbi-btn anbi-submit-btn", onclick: () => toggle("submit") }, "Submit result") : null,
      h("button", { class: "anbi-btn anbi-open", title: "this run's debugger at its pause, below", onclick: () => call("open", { key: r.key }) }, "Open"),
      h("button", { class: "anbi-btn anbi-end", title: "end this run (CANCELLED), with the reason typed beside", onclick: () => {
        const reason = rowNote.value.trim();
        if (!reason) { message.textContent = "End run needs a reason: type it in the row's reason box"; return; }
        call("end", { keys: [r.key], reason });
      } }, "End run"),
      rowNote);
    const refused = (model.get("outcomes") || []).find((o) => o.run_id === r.run_id && o.call_id === r.call_id && !o.applied);
    return h("div", { class: "anbi-row", "data-key": r.key, "data-run": r.run_id, "data-tool": r.tool },
      h("div", { class: "anbi-row-head" }, box,
        h("b", { class: "anbi-tool" }, r.tool),
        h("span", { class: `anbi-badge anbi-risk-${esc(r.risk)}` }, r.risk),
        r.kind !== "approval" ? h("span", { class: "anbi-badge anbi-kind" }, r.kind.replace("_", " ")) : null,
        h("span", { class: "anbi-run" }, r.run_id, r.batch ? h("span", { class: "anbi-batch" }, ` · batch ${r.batch}`) : null),
        ...(r.tags || []).map((t) => h("span", { class: "anbi-badge anbi-tag-badge", "data-tag": t }, t)),
        h("span", { class: "anbi-age", "data-asked": r.asked_at, "data-expires": r.expires_at })),
      r.flag ? h("div", { class: "anbi-flag", role: "note" }, `⚠ ${r.flag}`) : null,
      h("pre", { class: "anbi-args" }, r.arguments),
      r.reasoning ? h("div", { class: "anbi-reasoning" }, h("span", { class: "anbi-label" }, "the model: "), r.reasoning) : null,
      r.note ? h("div", { class: "anbi-reasoning" }, h("span", { class: "anbi-label" }, "why asked: "), r.note) : null,
      refused ? h("div", { class: "anbi-refused" }, `not applied: ${refused.reason}`) : null,
      buttons, panel);
  }

  function draw() {
    const rows = model.get("rows") || [];
    const keys = new Set(rows.map((r) => r.key));
    for (const k of [...state.selected]) if (!keys.has(k)) state.selected.delete(k);
    const by = model.get("by");
    const updated = model.get("updated");
    title.textContent = `Approvals inbox — ${rows.length} waiting · ${by ? `deciding as ${by}` : "no by= (read-only)"}` +
      (updated ? ` · listed ${new Date(updated).toLocaleTimeString()}` : "");
    drawTags(rows);
    const rowsShown = shown();
    count.textContent = `${state.selected.size} selected`;
    allBox.checked = rowsShown.length > 0 && rowsShown.every((r) => state.selected.has(r.key));
    list.replaceChildren();
    if (!rowsShown.length) list.append(h("div", { class: "anbi-empty" }, rows.length ? "no row matches the filter" : "nothing waits for a person"));
    const groups = new Map();
    for (const r of rowsShown) {
      for (const g of state.group ? groupsOf(r, state.group) : [""]) {
        if (!groups.has(g)) groups.set(g, []);
        groups.get(g).push(r);
      }
    }
    for (const [g, members] of groups) {
      if (state.group) {
        const gbox = h("input", { type: "checkbox", class: "anbi-group-select", "aria-label": `select the group ${g}`, onchange: () => {
          for (const r of members) gbox.checked ? state.selected.add(r.key) : state.selected.delete(r.key);
          draw();
        } });
        gbox.checked = members.every((r) => state.selected.has(r.key));
        list.append(h("div", { class: "anbi-group-head", "data-group": g }, gbox, `${GROUPS.find(([v]) => v === state.group)[1]}: ${g}`, h("span", { class: "anbi-muted" }, ` (${members.length})`)));
      }
      for (const r of members) list.append(rowEl(r));
    }
    const problems = Object.entries(model.get("problems") || {});
    if (problems.length) list.append(h("div", { class: "anbi-problems" }, `not listed: ${problems.map(([k, v]) => `${k}: ${v}`).join("; ")}`));
    message.textContent = model.get("message") || "";
    ages();
  }

  for (const name of ["rows", "outcomes", "message", "by", "problems", "updated"]) model.on(`change:${name}`, draw);
  const timer = setInterval(ages, 1000);
  draw();
  return () => clearInterval(timer);
}

export default { render };
