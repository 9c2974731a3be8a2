// ContextLab page glue: uploads with progress, charts, explorer keyboard navigation.
// No inline scripts anywhere (the CSP forbids them); everything is wired from data attributes.
(function () {
  "use strict";

  function csrfToken() {
    var input = document.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function formatBytes(n) {
    var units = ["bytes", "KB", "MB", "GB"];
    var i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n : n.toFixed(1)) + " " + units[i];
  }

  // ---- errors: 422 forms swap in, other 4xx beside the form, 5xx and network in a banner ----
  // A 422 answer is the form again with each error beside its field: htmx 2 drops 4xx bodies
  // by default, so it is swapped in explicitly. Any other 4xx goes to the form's problem slot
  // (.form-problem) when the request came from a form, else to the banner; a 5xx, a network
  // failure or an expired login shows the banner. Messages are set as text, never as HTML.
  var banner = {
    // "htmx" banners clear on the next successful htmx request; the others stay until dismissed
    source: null,
    show: function (message, source) {
      banner.source = source || null;
      var box = document.getElementById("error-banner");
      var text = document.getElementById("error-banner-text");
      if (!box || !text) return;
      text.textContent = message;
      box.hidden = false;
    },
    hide: function () {
      var box = document.getElementById("error-banner");
      if (box) box.hidden = true;
    }
  };
  window.contextlab = window.contextlab || {};
  window.contextlab.showErrorBanner = banner.show;

  function isLoginPage(xhr) {
    return (xhr.responseURL || "").indexOf("/accounts/login/") !== -1;
  }

  // the message of one of our error pages (#error-message), a JSON {"detail"}, or the status line
  function messageOf(xhr) {
    var type = xhr.getResponseHeader("Content-Type") || "";
    var body = xhr.responseText || "";
    try {
      if (type.indexOf("application/json") === 0) {
        var detail = JSON.parse(body).detail;
        if (typeof detail === "string" && detail) return detail;
      } else if (type.indexOf("text/html") === 0 && body) {
        var doc = new DOMParser().parseFromString(body, "text/html");
        var node = doc.getElementById("error-message");
        if (node && node.textContent.trim()) return node.textContent.trim();
      }
    } catch (err) { /* fall through to the status line */ }
    return "The server answered " + xhr.status + (xhr.statusText ? " " + xhr.statusText : "") + ".";
  }

  function problemSlot(elt) {
    var form = elt && elt.closest ? elt.closest("form") : null;
    return form ? form.querySelector(".form-problem") : null;
  }

  function showProblem(elt, message) {
    var slot = problemSlot(elt);
    if (slot) {
      slot.textContent = message;
      slot.hidden = false;
      return;
    }
    banner.show(message);
  }

  function setupErrors() {
    var close = document.getElementById("error-banner-close");
    if (close) close.addEventListener("click", banner.hide);
    document.body.addEventListener("htmx:beforeSwap", function (e) {
      var xhr = e.detail.xhr;
      if (isLoginPage(xhr)) {
        // the login page, after a redirect: the session expired; never swap it into a form
        e.detail.shouldSwap = false;
        e.detail.isError = false;
        banner.show("Your session has expired: log in again (reload the page).");
        return;
      }
      if (xhr.status === 422) {
        e.detail.shouldSwap = true;
        e.detail.isError = false;
      }
    });
    document.body.addEventListener("htmx:beforeRequest", function (e) {
      var slot = problemSlot(e.detail.elt);
      if (slot) { slot.textContent = ""; slot.hidden = true; }
    });
    document.body.addEventListener("htmx:afterRequest", function (e) {
      if (e.detail.successful && banner.source === "htmx") banner.hide();
    });
    document.body.addEventListener("htmx:responseError", function (e) {
      var xhr = e.detail.xhr;
      var message = messageOf(xhr);
      if (xhr.status >= 500) {
        banner.show("Something went wrong on the server (" + xhr.status + "): " + message, "htmx");
      } else {
        showProblem(e.detail.elt, message);
      }
    });
    document.body.addEventListener("htmx:sendError", function () {
      banner.show("The server could not be reached (network error). Check your connection and try again.", "htmx");
    });
  }

  // ---- upload: drag and drop or pick, one XHR per file with an upload progress bar ----------
  function setupUpload() {
    var form = document.getElementById("upload-form");
    if (!form) return;
    var input = document.getElementById("upload-input");
    var list = document.getElementById("upload-list");
    var maxBytes = parseInt(form.dataset.maxBytes, 10);

    function addItem(file) {
      var li = document.createElement("li");
      li.className = "upload-item";
      var name = document.createElement("span");
      name.className = "name";
      name.textContent = file.name + " (" + formatBytes(file.size) + ")";
      var bar = document.createElement("progress");
      bar.max = 100; bar.value = 0;
      bar.setAttribute("aria-label", "upload progress of " + file.name);
      var msg = document.createElement("span");
      msg.className = "upload-msg small";
      li.append(name, bar, msg);
      list.appendChild(li);
      return { li: li, bar: bar, msg: msg };
    }

    function showRun(item, runUrl) {
      // the processing bar: the run-progress partial, polled by htmx until the run ends
      var box = document.createElement("div");
      box.setAttribute("hx-get", runUrl + "?compact=1");
      box.setAttribute("hx-trigger", "load");
      box.setAttribute("hx-swap", "outerHTML");
      box.className = "run-progress";
      item.li.appendChild(box);
      if (window.htmx) window.htmx.process(box);
    }

    function send(file) {
      var item = addItem(file);
      if (file.size > maxBytes) {
        item.li.classList.add("error");
        item.msg.textContent = file.name + " is larger than the upload limit of " + formatBytes(maxBytes) + ".";
        return;
      }
      var data = new FormData();
      data.append("file", file);
      var workspace = form.querySelector("[name=workspace]");
      if (workspace && workspace.value) data.append("workspace", workspace.value);
      data.append("csrfmiddlewaretoken", csrfToken());
      var xhr = new XMLHttpRequest();
      xhr.open("POST", form.action);
      xhr.setRequestHeader("Accept", "application/json");
      xhr.setRequestHeader("X-CSRFToken", csrfToken());
      xhr.upload.addEventListener("progress", function (e) {
        if (e.lengthComputable) item.bar.value = Math.round((e.loaded / e.total) * 100);
      });
      xhr.addEventListener("load", function () {
        var result;
        try { result = JSON.parse(xhr.responseText).results[0]; }
        catch (err) {
          var expired = (xhr.responseURL || "").indexOf("/accounts/login/") !== -1;
          result = { ok: false, message: expired
            ? "Your session has expired: log in again, then upload."
            : messageOf(xhr) };
          if (expired || xhr.status >= 500) banner.show(file.name + ": " + result.message);
        }
        item.bar.value = 100;
        item.msg.textContent = result.message || "";
        if (result.ok) {
          item.li.classList.add("ok");
          refreshSessions();
          var link = document.createElement("a");
          link.href = result.url;
          link.textContent = "open session";
          link.className = "open-session";
          item.li.appendChild(link);
          if (result.run_url) showRun(item, result.run_url);
        } else {
          item.li.classList.add("error");
          (result.problems || []).slice(0, 5).forEach(function (p) {
            var d = document.createElement("div");
            d.className = "small muted";
            d.textContent = (p.file ? p.file + ":" : "line ") + p.line + ": " + p.message;
            item.li.appendChild(d);
          });
        }
      });
      xhr.addEventListener("error", function () {
        item.bar.value = 100;  // a finished (red) bar, not one stuck half way
        item.li.classList.add("error");
        item.msg.textContent = "The upload failed (network error or the server closed the connection).";
        banner.show("The upload of " + file.name + " failed: the server could not be reached (network error).");
      });
      xhr.send(data);
    }

    function sendAll(files) { Array.prototype.forEach.call(files, send); }

    input.addEventListener("change", function () { sendAll(input.files); input.value = ""; });
    ["dragenter", "dragover"].forEach(function (ev) {
      form.addEventListener(ev, function (e) { e.preventDefault(); form.classList.add("over"); });
    });
    ["dragleave", "drop"].forEach(function (ev) {
      form.addEventListener(ev, function (e) { e.preventDefault(); form.classList.remove("over"); });
    });
    form.addEventListener("drop", function (e) { sendAll(e.dataTransfer.files); });
  }

  // ---- sessions list: refreshed after an upload, searched and sorted in the page ------------
  // One refresh at a time: when uploads finish close together, a refresh asked for while one is
  // in flight runs after it (htmx would drop it, and the list would miss the later upload).
  var refreshing = false;
  var refreshAgain = false;
  function refreshSessions() {
    if (!window.htmx || !document.getElementById("sessions")) return;
    if (refreshing) { refreshAgain = true; return; }
    refreshing = true;
    var done = function () {
      refreshing = false;
      if (refreshAgain) { refreshAgain = false; refreshSessions(); }
    };
    window.htmx.ajax("GET", window.location.pathname, { target: "#sessions", select: "#sessions", swap: "outerHTML" })
      .then(done, done);
  }

  function setupSessions() {
    document.addEventListener("input", function (e) {
      if (e.target.id !== "session-search") return;
      var words = e.target.value.toLowerCase().split(/\s+/).filter(Boolean);
      var shown = 0;
      document.querySelectorAll("#session-table tr.session-row").forEach(function (row) {
        var text = row.dataset.search || "";
        var match = words.every(function (w) { return text.indexOf(w) !== -1; });
        row.hidden = !match;
        if (match) shown++;
      });
      var empty = document.getElementById("session-search-empty");
      if (empty) empty.hidden = shown > 0;
    });
    document.addEventListener("click", function (e) {
      var button = e.target.closest ? e.target.closest("table.sortable th button.sort") : null;
      if (!button) return;
      var th = button.closest("th");
      var table = th.closest("table");
      var column = Array.prototype.indexOf.call(th.parentNode.children, th);
      var numeric = th.dataset.sort === "number";
      var ascending = th.getAttribute("aria-sort") !== "ascending";
      table.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[column].dataset.value || "", y = b.cells[column].dataset.value || "";
        var order = numeric ? (parseFloat(x) || 0) - (parseFloat(y) || 0) : x.localeCompare(y);
        return ascending ? order : -order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  }

  // ---- charts: figures come as JSON in <script type="application/json">, never inline JS -----
  // One chart per task, in page order: the page is usable (and the load event fires) before
  // the last chart is drawn, and the first chart shows without waiting for the others.
  function drawChart(div) {
    var source = document.getElementById(div.dataset.chart);
    if (!source || div.dataset.drawn) return;
    div.dataset.drawn = "1";
    var fig = JSON.parse(source.textContent);
    window.Plotly.newPlot(div, fig.data, fig.layout, { responsive: true, displaylogo: false });
    div.on("plotly_click", function (ev) {
      var point = ev.points && ev.points[0];
      if (!point) return;
      if (typeof point.customdata === "string") window.location.href = point.customdata;
      else if (typeof point.customdata === "number" && div.dataset.requestUrl) {
        window.location.href = div.dataset.requestUrl.replace("{i}", String(point.customdata));
      }
    });
  }

  function setupCharts(root) {
    if (!window.Plotly) return;
    var queue = Array.prototype.slice.call((root || document).querySelectorAll("[data-chart]"));
    function next() {
      var div = queue.shift();
      if (!div) return;
      drawChart(div);
      window.setTimeout(next, 0);
    }
    window.setTimeout(next, 0);
  }
  window.contextlab.setupCharts = setupCharts;

  // ---- confirmations ---------------------------------------------------------------------------
  function setupConfirm() {
    document.addEventListener("click", function (e) {
      var button = e.target.closest("[data-confirm]");
      if (button && !window.confirm(button.dataset.confirm)) e.preventDefault();
    });
  }

  // ---- request explorer: slider, keys, fold all ----------------------------------------------
  function go(url) {
    if (window.htmx && document.getElementById("explorer")) {
      window.htmx.ajax("GET", url, { target: "#explorer", swap: "outerHTML" }).then(function () {
        window.history.pushState({ contextlab: true }, "", url);
      });
    } else {
      window.location.href = url;
    }
  }
  // entries pushed by go() are ours to restore (htmx restores the ones it pushed itself)
  window.addEventListener("popstate", function (e) {
    if (e.state && e.state.contextlab) window.location.reload();
  });

  // ---- event navigator: per-kind filters (kept for the tab), n / p jump between events -----
  var FILTER_KEY = "contextlab.hiddenEventKinds";
  function hiddenKinds() {
    try { return JSON.parse(window.sessionStorage.getItem(FILTER_KEY) || "[]"); } catch (err) { return []; }
  }
  function applyFilters() {
    var hidden = hiddenKinds();
    document.querySelectorAll(".event-filter").forEach(function (box) {
      box.checked = hidden.indexOf(box.dataset.kind) === -1;
    });
    document.querySelectorAll(".event-item, .strip-tick").forEach(function (el) {
      el.hidden = hidden.indexOf(el.dataset.kind) !== -1;
    });
    var current = document.querySelector(".event-item.current");
    var list = document.getElementById("event-list");
    if (current && list) list.scrollTop = current.offsetTop - list.offsetTop - list.clientHeight / 2;
  }
  function jumpToEvent(direction) {
    var explorer = document.getElementById("explorer");
    if (!explorer) return;
    var here = parseInt(explorer.dataset.index, 10);
    var items = Array.prototype.filter.call(document.querySelectorAll(".event-item"), function (el) {
      return !el.hidden;
    });
    var target = null;
    items.forEach(function (el) {
      var at = parseInt(el.dataset.request, 10);
      if (direction > 0 && at > here && (!target || at < parseInt(target.dataset.request, 10))) target = el;
      if (direction < 0 && at < here && (!target || at > parseInt(target.dataset.request, 10))) target = el;
    });
    if (target) target.querySelector("a").click();
  }

  // ---- times in the viewer's time zone ----------------------------------------------------
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

  function setupExplorer() {
    document.addEventListener("keydown", function (e) {
      if (!document.getElementById("explorer")) return;
      if (e.altKey || e.ctrlKey || e.metaKey) return;
      var tag = (e.target.tagName || "").toLowerCase();
      // typing in a field is not a key command (sliders, checkboxes and buttons are not typed in)
      if (tag === "textarea" || tag === "select" || (tag === "input" && ["range", "checkbox", "radio", "button", "submit"].indexOf(e.target.type) === -1)) return;
      // on the focused slider the arrows move the slider itself (its change event navigates)
      if (e.target.type === "range" && e.key.indexOf("Arrow") === 0) return;
      if (e.key === "n" || e.key === "p") {
        e.preventDefault();
        jumpToEvent(e.key === "n" ? 1 : -1);
        return;
      }
      var id = null;
      if (e.key === "ArrowLeft" || e.key === "k") id = "prev-link";
      if (e.key === "ArrowRight" || e.key === "j") id = "next-link";
      if (!id) return;
      var link = document.getElementById(id);
      e.preventDefault();
      if (link) link.click();  // htmx swaps the explorer and records the history entry
    });
    // the slider shows request numbers from 1; the URL keeps the 0-based index
    document.addEventListener("change", function (e) {
      if (e.target.id === "req-slider") {
        var s = e.target;
        go(s.dataset.prefix + (parseInt(s.value, 10) - 1) + "/" + (s.dataset.query || "?run=" + s.dataset.run) + (s.dataset.flags || ""));
      } else if (e.target.classList && e.target.classList.contains("event-filter")) {
        var hidden = hiddenKinds();
        var kind = e.target.dataset.kind;
        hidden = hidden.filter(function (k) { return k !== kind; });
        if (!e.target.checked) hidden.push(kind);
        try { window.sessionStorage.setItem(FILTER_KEY, JSON.stringify(hidden)); } catch (err) { /* private mode */ }
        applyFilters();
      }
    });
    document.addEventListener("input", function (e) {
      if (e.target.id !== "req-slider") return;
      var n = document.getElementById("req-number");
      if (n) n.textContent = e.target.value;
    });
    document.addEventListener("click", function (e) {
      var chart = e.target.closest ? e.target.closest("#mini-chart") : null;
      if (!chart) return;
      var box = chart.getBoundingClientRect();
      var count = parseInt(chart.dataset.count, 10);
      var s = document.getElementById("req-slider");
      if (!s || !count || !box.width) return;
      var index = Math.max(0, Math.min(count - 1, Math.round((e.clientX - box.left) / box.width * (count - 1))));
      go(s.dataset.prefix + index + "/?run=" + s.dataset.run + (s.dataset.flags || ""));
    });
    document.body.addEventListener("htmx:afterSettle", function () { applyFilters(); localTimes(); });
    applyFilters();
    localTimes();
    document.addEventListener("click", function (e) {
      if (e.target.id === "fold-all" || e.target.id === "unfold-all") {
        var open = e.target.id === "unfold-all";
        document.querySelectorAll("#explorer details.span").forEach(function (d) { d.open = open; });
      }
    });
    // deep link to a block (#b-<message>-<block>): load more pages until it is there, or
    // show the history hidden behind a compaction summary when that is where it lives
    var wanted = window.location.hash.indexOf("#b-") === 0 ? window.location.hash.slice(1) : null;
    var tries = 0;
    function seek() {
      if (!wanted || !document.getElementById("explorer")) return;
      var row = document.getElementById(wanted);
      if (row) {
        row.classList.add("target");
        row.scrollIntoView();
        wanted = null;
        return;
      }
      var more = document.querySelector("tr.load-more button");
      if (more && tries++ < 100) { more.click(); return; }  // continues on htmx:afterSettle
      var hidden = document.getElementById("show-replaced");
      if (hidden) window.location.href = hidden.getAttribute("href") + "#" + wanted;
      wanted = null;
    }
    document.body.addEventListener("htmx:afterSettle", seek);
    seek();
  }

  document.addEventListener("DOMContentLoaded", function () {
    setupErrors();
    setupUpload();
    setupSessions();
    setupCharts();
    setupConfirm();
    setupExplorer();
  });
})();
