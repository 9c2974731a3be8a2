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

  // ---- project folders: Claude Code's sessions grouped with their subagents and tool-results ----
  // A project folder (~/.claude/projects/<project>/) holds <id>.jsonl per session and beside it
  // a folder <id>/ with subagents/ and tool-results/. Each session becomes one upload: its file
  // alone, or a .tar.gz of the file and those two folders, packed here (the server reads such an
  // archive as one session). Paths are relative to what was picked or dropped, "/"-separated.
  var SESSION_PARTS = ["subagents", "tool-results"];

  function sessionSuffix(path) {
    var lower = path.toLowerCase();
    if (/\.jsonl\.gz$/.test(lower)) return ".jsonl.gz";
    if (/\.jsonl\.zst$/.test(lower)) return ".jsonl.zst";  // a cold Codex rollout
    if (/\.jsonl$/.test(lower)) return ".jsonl";
    return null;
  }

  // entries: [{path, file, loose}] (loose: dropped on its own, not found in a dropped folder).
  // Returns {sessions: [{name, stem, file, members: [{path, file}]}], loose: [File], ignored: [path]}.
  function groupSessions(entries) {
    var stems = {};
    entries.forEach(function (e) {
      var parts = e.path.split("/");
      var inPart = parts.slice(0, -1).some(function (p) { return SESSION_PARTS.indexOf(p) !== -1; });
      var suffix = sessionSuffix(e.path);
      if (suffix && !inPart) stems[e.path.slice(0, -suffix.length)] = true;
    });
    // the session whose folder holds a path: the shortest "<stem>/" it starts with
    function owner(parts) {
      for (var k = 1; k < parts.length; k++) {
        var stem = parts.slice(0, k).join("/");
        if (stems[stem]) return { stem: stem, depth: k };
      }
      return null;
    }
    var sessions = {};
    var order = [];
    var members = [];
    var loose = [];
    var ignored = [];
    entries.forEach(function (e) {
      var parts = e.path.split("/");
      var found = owner(parts);
      if (found) {
        // inside <id>/: only subagents/ and tool-results/ belong to the session
        if (SESSION_PARTS.indexOf(parts[found.depth]) !== -1 && parts.length > found.depth + 1) {
          members.push({ stem: found.stem, path: parts.slice(found.depth - 1).join("/"), file: e.file });
        } else {
          ignored.push(e.path);
        }
        return;
      }
      var suffix = sessionSuffix(e.path);
      var inPart = parts.slice(0, -1).some(function (p) { return SESSION_PARTS.indexOf(p) !== -1; });
      if (suffix && !inPart) {
        var stem = e.path.slice(0, -suffix.length);
        var session = { name: parts[parts.length - 1], stem: stem, file: e.file, members: [] };
        // <id>.jsonl and <id>.jsonl.gz side by side: the folder goes with the .jsonl
        if (!sessions[stem] || suffix === ".jsonl") sessions[stem] = session;
        order.push(session);
      } else if (e.loose) {
        loose.push(e.file);  // a file dropped on its own goes as it is, as before
      } else {
        ignored.push(e.path);
      }
    });
    members.forEach(function (m) { sessions[m.stem].members.push({ path: m.path, file: m.file }); });
    var byPath = function (a, b) { return a.path < b.path ? -1 : a.path > b.path ? 1 : 0; };
    order.forEach(function (s) { s.members.sort(byPath); });
    order.sort(function (a, b) { return a.stem < b.stem ? -1 : a.stem > b.stem ? 1 : 0; });
    return { sessions: order, loose: loose, ignored: ignored };
  }

  // ---- a minimal tar writer (POSIX ustar), gzipped by the browser's CompressionStream ----------
  var encoder = new TextEncoder();
  var BLOCK = 512;
  // the largest size a ustar header holds: 11 octal digits
  var TAR_MAX_SIZE = Math.pow(8, 11) - 1;

  function octal(value, width) {
    // width includes the closing NUL
    var text = Math.max(0, Math.floor(value)).toString(8);
    while (text.length < width - 1) text = "0" + text;
    return text + "\0";
  }

  function put(block, offset, value, max) {
    var bytes = typeof value === "string" ? encoder.encode(value) : value;
    block.set(bytes.subarray(0, max), offset);
  }

  // name (100 bytes) and prefix (155 bytes) of a UTF-8 path, split at a "/"; null if impossible
  function splitPath(bytes) {
    if (bytes.length <= 100) return { name: bytes, prefix: new Uint8Array(0) };
    for (var i = Math.min(155, bytes.length - 1); i > 0; i--) {
      if (bytes[i] !== 0x2f) continue;
      if (bytes.length - i - 1 > 100) break;  // shorter prefixes only make the name longer
      if (bytes.length - i - 1 > 0) return { name: bytes.subarray(i + 1), prefix: bytes.subarray(0, i) };
    }
    return null;
  }

  function header(name, prefix, size, mtime, type) {
    var block = new Uint8Array(BLOCK);
    put(block, 0, name, 100);
    put(block, 100, "0000644\0", 8);  // mode
    put(block, 108, "0000000\0", 8);  // uid
    put(block, 116, "0000000\0", 8);  // gid
    put(block, 124, octal(size, 12), 12);
    put(block, 136, octal(mtime, 12), 12);
    put(block, 148, "        ", 8);  // the checksum counts its own field as spaces
    put(block, 156, type, 1);
    put(block, 257, "ustar\0", 6);
    put(block, 263, "00", 2);
    put(block, 345, prefix, 155);
    var sum = 0;
    for (var i = 0; i < BLOCK; i++) sum += block[i];
    put(block, 148, octal(sum, 7) + " ", 8);
    return block;
  }

  function padding(size) {
    return new Uint8Array((BLOCK - (size % BLOCK)) % BLOCK);
  }

  // the header block(s) of one member; a path ustar cannot hold (a part longer than 100 bytes)
  // goes in a POSIX.1-2001 extended header before it
  function memberHeaders(path, size, mtime) {
    var bytes = encoder.encode(path);
    var split = splitPath(bytes);
    if (split) return [header(split.name, split.prefix, size, mtime, "0")];
    var body = " path=" + path + "\n";
    var length = encoder.encode(body).length;
    var digits = String(length).length;
    while (String(length + digits).length !== digits) digits++;
    var record = encoder.encode(String(length + digits) + body);
    return [header("PaxHeader", new Uint8Array(0), record.length, mtime, "x"), record, padding(record.length),
      header(bytes.subarray(0, 100), new Uint8Array(0), size, mtime, "0")];
  }

  // members: [{path, blob, mtime}] -> a stream of the tar's bytes, each file read as it is needed
  function tarStream(members) {
    var queue = members.slice();
    var reader = null;
    var current = null;
    return new ReadableStream({
      pull: function (controller) {
        if (reader) {
          return reader.read().then(function (chunk) {
            if (!chunk.done) { controller.enqueue(chunk.value); return; }
            reader = null;
            var pad = padding(current.blob.size);
            if (pad.length) controller.enqueue(pad);
          });
        }
        current = queue.shift();
        if (!current) {
          controller.enqueue(new Uint8Array(2 * BLOCK));  // the end: two zero blocks
          controller.close();
          return;
        }
        memberHeaders(current.path, current.blob.size, current.mtime).forEach(function (part) {
          if (part.length) controller.enqueue(part);
        });
        reader = current.blob.stream().getReader();
      }
    });
  }

  // a .jsonl.gz session file goes in the archive as the .jsonl the server looks for
  function sessionMember(session) {
    var base = session.stem.split("/").pop();
    var mtime = session.file.lastModified / 1000;
    if (sessionSuffix(session.name) === ".jsonl") {
      return Promise.resolve({ path: base + ".jsonl", blob: session.file, mtime: mtime });
    }
    var plain = session.file.stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(plain).blob().then(function (blob) {
      return { path: base + ".jsonl", blob: blob, mtime: mtime };
    });
  }

  // The session as a gzipped tar Blob; null once it grows past limit bytes (reading stops there).
  function packSession(session, limit) {
    return sessionMember(session).then(function (first) {
      var members = [first].concat(session.members.map(function (m) {
        return { path: m.path, blob: m.file, mtime: m.file.lastModified / 1000 };
      }));
      if (members.some(function (m) { return m.blob.size > TAR_MAX_SIZE; })) return null;
      var reader = tarStream(members).pipeThrough(new CompressionStream("gzip")).getReader();
      var chunks = [];
      var size = 0;
      function next() {
        return reader.read().then(function (chunk) {
          if (chunk.done) return new Blob(chunks, { type: "application/gzip" });
          size += chunk.value.length;
          if (size > limit) { reader.cancel(); return null; }
          chunks.push(chunk.value);
          return next();
        });
      }
      return next();
    });
  }

  // ---- dropped folders: walked with the File and Directory Entries API -----------------------
  function readAllEntries(directory) {
    // readEntries answers in batches (100 in Chromium): ask again until a batch is empty
    var reader = directory.createReader();
    var all = [];
    return new Promise(function (resolve, reject) {
      function next() {
        reader.readEntries(function (batch) {
          if (!batch.length) { resolve(all); return; }
          all = all.concat(Array.prototype.slice.call(batch));
          next();
        }, reject);
      }
      next();
    });
  }

  function walkEntry(entry, loose) {
    var path = entry.fullPath.replace(/^\/+/, "");
    if (entry.isFile) {
      return new Promise(function (resolve, reject) {
        entry.file(function (file) { resolve([{ path: path, file: file, loose: loose }]); }, reject);
      });
    }
    if (!entry.isDirectory) return Promise.resolve([]);
    return readAllEntries(entry).then(function (children) {
      return Promise.all(children.map(function (child) { return walkEntry(child, false); }));
    }).then(function (lists) { return [].concat.apply([], lists); });
  }

  // ---- upload: drag and drop or pick, one XHR per file with an upload progress bar ----------
  function setupUpload() {
    var form = document.getElementById("upload-form");
    if (!form) return;
    var input = document.getElementById("upload-input");
    var folderInput = document.getElementById("upload-folder");
    var list = document.getElementById("upload-list");
    var maxBytes = parseInt(form.dataset.maxBytes, 10);

    function addItem(label, size) {
      var li = document.createElement("li");
      li.className = "upload-item";
      var name = document.createElement("span");
      name.className = "name";
      var bar = document.createElement("progress");
      bar.max = 100; bar.value = 0;
      bar.setAttribute("aria-label", "upload progress of " + label);
      var msg = document.createElement("span");
      msg.className = "upload-msg small";
      li.append(name, bar, msg);
      list.appendChild(li);
      var item = { li: li, name: name, bar: bar, msg: msg, label: label };
      setSize(item, size);
      return item;
    }

    function setSize(item, size) {
      item.name.textContent = item.label + (size === null ? "" : " (" + formatBytes(size) + ")");
    }

    function refuse(item, message) {
      item.bar.value = 100;  // a finished (red) bar
      item.li.classList.add("error");
      item.msg.textContent = message;
    }

    function tooLarge(item) {
      refuse(item, item.label + " is larger than the upload limit of " + formatBytes(maxBytes) + ".");
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
      var item = addItem(file.name, file.size);
      if (file.size > maxBytes) { tooLarge(item); return; }
      transfer(item, file, file.name);
    }

    // Files of RESUMABLE_FROM bytes or more go over tus (tus-js-client, vendored): pieces of
    // CHUNK_BYTES, each stored as it arrives, so a dropped connection resumes at the server's
    // offset (and a reloaded page resumes the same file) instead of sending it all again.
    var RESUMABLE_FROM = 8 * 1024 * 1024;
    var CHUNK_BYTES = 16 * 1024 * 1024;
    function transfer(item, blob, fileName) {
      if (blob.size >= RESUMABLE_FROM && window.tus && window.tus.isSupported && form.dataset.resumableUrl) {
        sendResumable(item, blob, fileName);
      } else {
        post(item, blob, fileName);
      }
    }

    function tusReason(err) {
      var response = err && err.originalResponse;
      if (response) {
        try { return JSON.parse(response.getBody()).detail; } catch (e) { /* not JSON */ }
        return "HTTP " + response.getStatus();
      }
      return "the server could not be reached (network error)";
    }

    function sendResumable(item, blob, fileName) {
      var metadata = { filename: fileName };
      var workspace = form.querySelector("[name=workspace]");
      if (workspace && workspace.value) metadata.workspace_id = workspace.value;
      var upload = new window.tus.Upload(blob, {
        endpoint: form.dataset.resumableUrl,
        chunkSize: CHUNK_BYTES,
        retryDelays: [0, 1000, 3000, 5000, 10000, 20000, 30000, 60000],
        metadata: metadata,
        headers: { "X-CSRFToken": csrfToken() },
        removeFingerprintOnSuccess: true,
        onProgress: function (sent, total) {
          item.bar.value = Math.round((sent / total) * 100);
        },
        onError: function (err) {
          refuse(item, "The upload of " + fileName + " stopped: " + tusReason(err) + ".");
        },
        onSuccess: function () {
          item.bar.removeAttribute("value");  // indeterminate while a worker stores it
          item.msg.textContent = "uploaded; reading the session…";
          waitUntilStored(item, upload.url, fileName);
        }
      });
      upload.findPreviousUploads().then(function (previous) {
        if (previous.length) upload.resumeFromPreviousUpload(previous[0]);
        upload.start();
      });
    }

    function waitUntilStored(item, url, fileName) {
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) { return response.json(); })
        .then(function (state) {
          if (state.state === "stored" && state.session) {
            item.bar.value = 100;
            item.li.classList.add("ok");
            item.msg.textContent = fileName + ": " + (state.outcome === "duplicate"
              ? "already uploaded; showing that session."
              : state.outcome === "grew" ? "the session was updated and is replayed again." : "stored.");
            refreshSessions();
            var link = document.createElement("a");
            link.href = state.session.url;
            link.textContent = "open session";
            link.className = "open-session";
            item.li.appendChild(link);
            if (state.session.run_url) showRun(item, state.session.run_url);
          } else if (state.state === "rejected" || state.detail) {
            refuse(item, state.error || state.detail);
          } else {
            setTimeout(function () { waitUntilStored(item, url, fileName); }, 1000);
          }
        })
        .catch(function () { setTimeout(function () { waitUntilStored(item, url, fileName); }, 3000); });
    }

    function post(item, blob, fileName) {
      var data = new FormData();
      data.append("file", blob, fileName);
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
          if (expired || xhr.status >= 500) banner.show(fileName + ": " + result.message);
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
        refuse(item, "The upload failed (network error or the server closed the connection).");
        banner.show("The upload of " + fileName + " failed: the server could not be reached (network error).");
      });
      xhr.send(data);
    }

    function sendAll(files) { Array.prototype.forEach.call(files, send); }

    // Sessions with a folder are packed one at a time (each holds its archive in memory until
    // sent); their uploads then run side by side like the others.
    var packing = Promise.resolve();
    function sendSession(session) {
      // a .jsonl.zst goes as it is (the server reads zstd; browsers cannot unpack it here):
      // only Codex keeps rollouts so, and a rollout has no folder of subagents or tool-results
      if (!session.members.length || sessionSuffix(session.name) === ".jsonl.zst") {
        send(session.file);
        return;
      }
      var fileName = session.stem.split("/").pop() + ".tar.gz";
      var item = addItem(fileName, null);
      item.bar.removeAttribute("value");  // indeterminate until the upload starts
      item.msg.textContent = "waiting to pack…";
      packing = packing.then(function () {
        item.msg.textContent = "packing… (" + (session.members.length + 1) + " files)";
        return packSession(session, maxBytes);
      }).then(function (blob) {
        if (!blob) { tooLarge(item); return; }
        setSize(item, blob.size);
        item.bar.value = 0;
        item.msg.textContent = "";
        transfer(item, blob, fileName);
      }).catch(function (err) {
        // the chain goes on: the next session is packed all the same
        refuse(item, fileName + " could not be packed (" + (err && err.message || err) + "); nothing was sent.");
      });
    }

    function sendFolder(entries, label) {
      var groups = groupSessions(entries);
      var note = document.createElement("li");
      note.className = "upload-note small";
      var count = groups.sessions.length;
      var text = label + ": " + count + " session" + (count === 1 ? "" : "s");
      if (groups.ignored.length) {
        var shown = groups.ignored.slice(0, 3).map(function (p) { return p.split("/").pop(); });
        text += "; " + groups.ignored.length + " file" + (groups.ignored.length === 1 ? "" : "s") +
          " ignored (" + shown.join(", ") + (groups.ignored.length > 3 ? ", …" : "") + ")";
      }
      if (!count && !groups.loose.length) {
        note.classList.add("error");
        text += ". A project folder holds <session>.jsonl files: pick one in ~/.claude/projects/ " +
          "(Claude Code) or ~/.codex/sessions/ (Codex).";
      }
      note.textContent = text;
      list.appendChild(note);
      groups.sessions.forEach(sendSession);
      sendAll(groups.loose);
    }

    if (folderInput && "webkitdirectory" in folderInput && window.CompressionStream) {
      document.getElementById("upload-folder-control").hidden = false;
      folderInput.addEventListener("change", function () {
        var files = Array.prototype.slice.call(folderInput.files);
        folderInput.value = "";
        if (!files.length) return;
        var entries = files.map(function (f) { return { path: f.webkitRelativePath || f.name, file: f, loose: false }; });
        sendFolder(entries, "Folder “" + entries[0].path.split("/")[0] + "”");
      });
    }

    input.addEventListener("change", function () { sendAll(input.files); input.value = ""; });
    ["dragenter", "dragover"].forEach(function (ev) {
      form.addEventListener(ev, function (e) { e.preventDefault(); form.classList.add("over"); });
    });
    ["dragleave", "drop"].forEach(function (ev) {
      form.addEventListener(ev, function (e) { e.preventDefault(); form.classList.remove("over"); });
    });
    form.addEventListener("drop", function (e) {
      // entries must be taken while the drop event runs: the list is emptied after it
      var entries = Array.prototype.map.call(e.dataTransfer.items || [], function (item) {
        return item.kind === "file" && item.webkitGetAsEntry ? item.webkitGetAsEntry() : null;
      }).filter(Boolean);
      var folders = entries.filter(function (entry) { return entry.isDirectory; });
      if (!folders.length || !window.CompressionStream) { sendAll(e.dataTransfer.files); return; }
      var label = folders.length === 1 ? "Folder “" + folders[0].name + "”" : folders.length + " folders";
      Promise.all(entries.map(function (entry) { return walkEntry(entry, entry.isFile); }))
        .then(function (lists) { sendFolder([].concat.apply([], lists), label); })
        .catch(function (err) {
          banner.show("The dropped folder could not be read (" + (err && err.message || err) + "): choose it with “choose a folder…”.");
        });
    });
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
    // A replay that finishes in the list fills its row in: date, peak context, compactions and
    // cost come from the finished run (only a running replay's cell polls, so this fires once).
    document.body.addEventListener("htmx:afterSwap", function (e) {
      var target = e.detail && e.detail.elt;
      var cell = target && target.closest ? target.closest("#session-table .run-progress") : null;
      if (!cell) {
        var id = e.detail && e.detail.target && e.detail.target.id;
        cell = id && id.indexOf("run-progress-") === 0 ? document.getElementById(id) : null;
        if (cell && !cell.closest("#session-table")) cell = null;
      }
      if (cell && (cell.dataset.status === "done" || cell.dataset.status === "failed")) {
        refreshSessions();
      }
    });
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
    // as tall as the figure: once the window is resized, plotly sizes its drawing to 100 % of
    // the box, which without a height of its own shrank under the chart (legend cut off)
    if (fig.layout && fig.layout.height) div.style.height = fig.layout.height + "px";
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

  // "/" focuses the page's search box (the explorer's, the search page's), else opens search
  function setupSearchKey() {
    document.addEventListener("keydown", function (e) {
      if (e.key !== "/" || e.altKey || e.ctrlKey || e.metaKey) return;
      var tag = (e.target.tagName || "").toLowerCase();
      if (tag === "textarea" || tag === "select" || tag === "input" || e.target.isContentEditable) return;
      e.preventDefault();
      var box = document.querySelector("[data-search-box]");
      if (box) { box.focus(); box.select(); } else { window.location.href = "/search/"; }
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

  // a copy button beside a value to copy (data-copy: the input's selector), e.g. a new link
  function setupCopy() {
    document.addEventListener("click", function (e) {
      var button = e.target.closest ? e.target.closest("button[data-copy]") : null;
      if (!button) return;
      var field = document.querySelector(button.dataset.copy);
      if (!field) return;
      function done(ok) {
        var status = document.getElementById(button.dataset.status || "");
        if (status) status.textContent = ok ? "Copied." : "Select the link and copy it (Ctrl+C).";
      }
      field.select();
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(field.value).then(function () { done(true); }, function () { done(document.execCommand("copy")); });
      } else {
        done(document.execCommand("copy"));
      }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    setupCopy();
    setupErrors();
    setupUpload();
    setupSessions();
    setupCharts();
    setupConfirm();
    setupExplorer();
    setupSearchKey();
    // a search hit's block: in view even when the address lost its #fragment
    var hit = document.querySelector("tr.search-hit");
    if (hit && !window.location.hash) hit.scrollIntoView({ block: "center" });
  });
})();
