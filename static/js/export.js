// The HTML export's only script besides plotly.js (both inlined, allowed by hash in the
// file's CSP): draw the charts from the JSON data blocks, and write dates in the reader's
// time zone. Clicking a point jumps to that request's row, when the file holds it.
(function () {
  "use strict";
  function draw() {
    if (!window.Plotly) return;
    document.querySelectorAll("[data-chart]").forEach(function (div) {
      var source = document.getElementById(div.dataset.chart);
      if (!source) return;
      var fig = JSON.parse(source.textContent);
      // as tall as the figure: once the window is resized, plotly sizes its drawing to 100 % of
      // the box, which without a height of its own shrank under the chart (legend cut off)
      if (fig.layout && fig.layout.height) div.style.height = fig.layout.height + "px";
      window.Plotly.newPlot(div, fig.data, fig.layout, { responsive: true, displaylogo: false, staticPlot: false });
      div.on("plotly_click", function (ev) {
        var point = ev.points && ev.points[0];
        if (point && typeof point.customdata === "string") window.location.hash = point.customdata.split("#")[1] || "";
      });
    });
  }
  // dates in the reader's time zone and words, as the pages write them (app.js's localTimes);
  // the file's text without script is the date in UTC
  function localTimes() {
    document.querySelectorAll("time.local-time").forEach(function (el) {
      var when = new Date(el.getAttribute("datetime"));
      if (isNaN(when.getTime())) return;
      var options = { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" };
      if (!el.classList.contains("short")) { options.second = "2-digit"; options.timeZoneName = "short"; }
      el.textContent = when.toLocaleString(undefined, options);
      el.title = el.getAttribute("datetime") + " (UTC)";
    });
  }
  function start() { localTimes(); draw(); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
