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
