// Comments in the request explorer: the + in a block's gutter points the comment form at that
// block; "comment on the whole request instead" points it back. Wired by delegation (the
// explorer is swapped by htmx), no inline handlers (the CSP forbids them).
(function () {
  "use strict";

  function target(block) {
    var input = document.getElementById("comment-block");
    var label = document.getElementById("comment-target");
    var reset = document.getElementById("comment-on-request");
    var body = document.getElementById("comment-body");
    if (!input || !label || !body) return;
    input.value = block;
    label.textContent = "";
    if (block) {
      label.appendChild(document.createTextNode("block "));
      var link = document.createElement("a");
      link.href = "#" + block;
      link.textContent = block;
      label.appendChild(link);
    } else {
      label.textContent = "the whole request";
    }
    if (reset) reset.hidden = !block;
    document.querySelectorAll("tr.row.commenting").forEach(function (row) { row.classList.remove("commenting"); });
    var row = block ? document.getElementById(block) : null;
    if (row) row.classList.add("commenting");
    body.scrollIntoView({ block: "center" });
    body.focus();
  }

  // a new panel (after a comment) has its form on the whole request again
  document.addEventListener("htmx:afterSwap", function (e) {
    if (e.target && e.target.id === "comments-panel") {
      document.querySelectorAll("tr.row.commenting").forEach(function (row) { row.classList.remove("commenting"); });
    }
  });

  document.addEventListener("click", function (e) {
    var add = e.target.closest ? e.target.closest(".cm-add") : null;
    if (add) {
      e.preventDefault();
      target(add.dataset.block || "");
    } else if (e.target.id === "comment-on-request") {
      target("");
    }
  });
})();
