// Live updates: the server's event stream says *that* something changed; htmx fetches the new panels.
// Plots cost the server a drawing each, so they follow at most every PLOT_INTERVAL_MS, and always after the last change.
(function () {
  const PLOT_INTERVAL_MS = 4000;
  const body = document.body;
  const url = body.dataset.events;
  if (!url || !window.EventSource) return;
  const live = document.getElementById("live");
  const source = new EventSource(url);
  let nLlmCalls = null;
  let plotTimer = null;
  let isPlotPending = false;

  function plotsChanged() {
    if (plotTimer !== null) { isPlotPending = true; return; }
    htmx.trigger(body, "plots-changed");
    plotTimer = setTimeout(() => {
      plotTimer = null;
      if (isPlotPending) { isPlotPending = false; plotsChanged(); }
    }, PLOT_INTERVAL_MS);
  }

  source.onopen = () => live && live.classList.add("on");
  source.onerror = () => live && live.classList.remove("on");
  source.addEventListener("campaigns", () => htmx.trigger(body, "campaigns-changed"));
  source.addEventListener("campaign", (event) => {
    const data = JSON.parse(event.data);
    htmx.trigger(body, "campaign-changed");
    plotsChanged();
    if (data.n_llm_calls !== nLlmCalls) {
      if (nLlmCalls !== null) htmx.trigger(body, "llm-changed");
      nLlmCalls = data.n_llm_calls;
    }
  });
})();

// The name given with an answer ("by", for the audit trail) is remembered in this browser, so a refreshed panel or
// the next batch's form is filled with it; a blank field records the answer as plain "human".
(function () {
  const KEY = "closedloop.by";
  function remembered() { try { return localStorage.getItem(KEY) || ""; } catch (e) { return ""; } }
  function fill() {
    document.querySelectorAll('input[name="by"]').forEach((input) => { if (!input.value) input.value = remembered(); });
  }
  document.addEventListener("input", (event) => {
    if (event.target.name === "by") { try { localStorage.setItem(KEY, event.target.value); } catch (e) { /* none */ } }
  });
  document.addEventListener("htmx:afterSettle", fill);
  fill();
})();

// "Approve all" / "Reject all" set every choice of the approval form; nothing is sent until the person presses Send.
document.addEventListener("click", (event) => {
  const button = event.target.closest("button.choose");
  if (!button) return;
  const form = button.closest("form");
  form.querySelectorAll(`input[type="radio"][value="${button.dataset.choice}"]`).forEach((radio) => { radio.checked = true; });
});

// Sortable tables (table.sortable): a click on a heading sorts the rows by that column (numbers as numbers, blanks
// last), a second click reverses. The choice is kept per table id, so a live refresh of the panel keeps the order.
(function () {
  const sorted = {};  // table id -> {column, descending}
  function key(cell, type) {
    const text = cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent.trim();
    if (type !== "number") return text.toLowerCase();
    const number = parseFloat(text);
    return Number.isNaN(number) ? null : number;
  }
  function apply(table) {
    const state = sorted[table.id];
    if (!state) return;
    const heading = table.tHead.rows[0].cells[state.column];
    const type = heading.dataset.type || "text";
    const body = table.tBodies[0];
    const rows = Array.from(body.rows);
    rows.sort((a, b) => {
      const x = key(a.cells[state.column], type), y = key(b.cells[state.column], type);
      if (x === null || x === "") return (y === null || y === "") ? 0 : 1;
      if (y === null || y === "") return -1;
      const order = x < y ? -1 : x > y ? 1 : 0;
      return state.descending ? -order : order;
    });
    rows.forEach((row) => body.appendChild(row));
    Array.from(table.tHead.rows[0].cells).forEach((th, i) => {
      th.classList.toggle("sorted-up", i === state.column && !state.descending);
      th.classList.toggle("sorted-down", i === state.column && state.descending);
    });
  }
  document.addEventListener("click", (event) => {
    const heading = event.target.closest("table.sortable th");
    if (!heading || heading.classList.contains("nosort")) return;
    const table = heading.closest("table");
    const column = heading.cellIndex;
    const state = sorted[table.id];
    sorted[table.id] = {column, descending: state && state.column === column ? !state.descending : false};
    apply(table);
  });
  document.addEventListener("htmx:afterSettle", () => document.querySelectorAll("table.sortable").forEach(apply));
})();

// A live refresh never throws away what a person is doing: an answer or results form they have started to fill in is
// left alone until they send it, and the receipt of the results they entered stays readable for KEEP_MESSAGE_MS (the
// refresh skipped meanwhile follows then). An approval's note gives way at once: the next question matters more.
(function () {
  const KEEP_MESSAGE_MS = 15000;
  const PANELS = ["approvals", "entry"];
  document.addEventListener("input", (event) => {
    const panel = event.target.closest("section");
    if (panel && PANELS.includes(panel.id)) panel.dataset.dirty = "1";
  });
  document.addEventListener("htmx:afterSettle", () => {
    const panel = document.getElementById("entry");
    if (panel && panel.querySelector(".note, .error") && !panel.dataset.shownAt) panel.dataset.shownAt = String(Date.now());
  });
  // a refresh is a GET of the panel; an answer's own response (a POST) always replaces it
  document.addEventListener("htmx:beforeSwap", (event) => {
    const panel = event.detail.target;
    if (!panel || !PANELS.includes(panel.id) || !event.detail.requestConfig || event.detail.requestConfig.verb !== "get") return;
    if (panel.dataset.dirty === "1") { event.detail.shouldSwap = false; return; }
    const left = panel.dataset.shownAt ? KEEP_MESSAGE_MS - (Date.now() - Number(panel.dataset.shownAt)) : 0;
    if (left > 0) {
      event.detail.shouldSwap = false;
      if (!panel.dataset.refreshLater) {  // the refresh skipped now follows once the message has been read
        panel.dataset.refreshLater = "1";
        setTimeout(() => htmx.trigger(document.body, "campaign-changed"), left + 50);
      }
    }
  });
})();
