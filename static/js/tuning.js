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

  // "Copy settings": the settings.json fragment to the clipboard (a selection as the fallback
  // where the clipboard API is not allowed); the button says it worked.
  document.addEventListener("click", function (e) {
    var button = e.target.closest && e.target.closest(".copy-settings");
    if (!button) return;
    var source = document.getElementById(button.dataset.copy);
    if (!source) return;
    var text = source.textContent;
    function done() { button.textContent = "Copied"; button.dataset.copied = "1"; }
    function fallback() {
      var range = document.createRange();
      range.selectNodeContents(source);
      var selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      if (document.execCommand && document.execCommand("copy")) done();
      else button.textContent = "Selected: press Ctrl+C";
    }
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(done, fallback);
    } else {
      fallback();
    }
  });

  document.addEventListener("change", function (e) {
    if (e.target.classList && e.target.classList.contains("auto-submit")) e.target.form.submit();
  });
})();
