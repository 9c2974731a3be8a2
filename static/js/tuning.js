// Tuning pages: redraw charts that htmx swaps in (sweep axes), submit the session select.
// No inline scripts (the CSP forbids them); app.js draws the charts present at page load.
(function () {
  "use strict";

  function draw(root) {
    if (!window.Plotly) return;
    root.querySelectorAll("[data-chart]").forEach(function (div) {
      var source = document.getElementById(div.dataset.chart);
      if (!source || div.dataset.drawn === "1") return;
      var fig = JSON.parse(source.textContent);
      div.dataset.drawn = "1";
      window.Plotly.newPlot(div, fig.data, fig.layout, { responsive: true, displaylogo: false });
      div.on("plotly_click", function (ev) {
        var point = ev.points && ev.points[0];
        if (point && typeof point.customdata === "string") window.location.href = point.customdata;
      });
    });
  }

  document.addEventListener("htmx:afterSettle", function (e) {
    var target = e.detail && e.detail.elt;
    if (target && target.id === "sweep-chart") draw(target);
    else if (target && target.querySelector && target.querySelector("#sweep-chart")) draw(target);
  });

  document.addEventListener("change", function (e) {
    if (e.target.classList && e.target.classList.contains("auto-submit")) e.target.form.submit();
  });
})();
