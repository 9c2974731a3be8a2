// Tuning pages: redraw charts that htmx swaps in (sweep axes), submit the session select.
// No inline scripts (the CSP forbids them); app.js draws the charts present at page load.
(function () {
  "use strict";

  // app.js's drawing (the same sizing and click-to-open), for the charts htmx swapped in
  function draw(root) {
    if (window.contextlab && window.contextlab.setupCharts) window.contextlab.setupCharts(root);
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
