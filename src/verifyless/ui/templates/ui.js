// verifyless dashboard: live updates by polling the read-only JSON API.
// Data from the API is written with textContent only; the only HTML inserted is a fragment rendered (and escaped)
// by the server's templates.
(function () {
  "use strict";
  function fmt(x) {
    if (x === null || x === undefined) return "-";
    if (typeof x === "number") return Number.isInteger(x) ? String(x) : String(Number(x.toPrecision(5)));
    return String(x);
  }
  function cell(tr, text, cls) {
    var td = document.createElement("td");
    if (cls) td.className = cls;
    td.textContent = text;
    tr.appendChild(td);
    return td;
  }
  function runsList(table) {
    var body = table.tBodies[0];
    function draw(runs) {
      var ticked = {};
      body.querySelectorAll("input[name=run]:checked").forEach(function (b) { ticked[b.value] = true; });
      var rows = document.createDocumentFragment();
      runs.forEach(function (r) {
        var tr = document.createElement("tr");
        tr.setAttribute("data-run", r.run_id);
        var box = document.createElement("input");
        box.type = "checkbox"; box.name = "run"; box.value = r.run_id; box.checked = !!ticked[r.run_id];
        cell(tr, "").appendChild(box);
        var a = document.createElement("a");
        a.href = "/runs/" + encodeURIComponent(r.run_id); a.textContent = r.run_id;
        cell(tr, "").appendChild(a);
        cell(tr, r.task);
        var st = document.createElement("span");
        st.className = "status " + String(r.status).replace(/[^a-z-]/g, ""); st.textContent = r.status;
        cell(tr, "").appendChild(st);
        cell(tr, r.strategy + " / " + r.screener);
        cell(tr, fmt(r.verifications) + (r.cap ? " / " + fmt(r.cap) : ""), "num");
        cell(tr, fmt(r.best_score), "num");
        cell(tr, r.created, "small");
        rows.appendChild(tr);
      });
      body.replaceChildren(rows);
      var note = document.getElementById("runs-updated");
      if (note) note.textContent = "Updated " + new Date().toLocaleTimeString() + "; refreshes every 1.5 s.";
    }
    function poll() {
      fetch("/api/runs", {cache: "no-store"}).then(function (r) { return r.json(); }).then(draw)
        .catch(function () {}).finally(function () { setTimeout(poll, 1500); });
    }
    setTimeout(poll, 1500);
  }
  function duration(sec) {  // the same words as the server's `duration` filter (report/text.py)
    if (sec === null || sec === undefined) return "-";
    var s = Math.round(sec), m = Math.floor(s / 60), h = Math.floor(m / 60);
    return h ? h + " h " + (m % 60) + " min" : (m ? m + " min " + (s % 60) + " s" : s + " s");
  }
  function runPage(box) {
    var run = box.getAttribute("data-run");
    var seq = Number(box.getAttribute("data-seq"));
    var lastDraw = 0;
    function set(id, text) { var el = document.getElementById(id); if (el) el.textContent = text; }
    function draw(p) {
      set("p-status", p.status); set("p-verifications", fmt(p.verifications)); set("p-best", fmt(p.best_score));
      set("p-best-node", p.best_node || "-"); set("p-rounds", fmt(p.rounds)); set("p-seq", fmt(p.last_seq));
      var eta = document.getElementById("p-eta-box");
      if (eta) { eta.hidden = p.eta_s === null; set("p-eta", duration(p.eta_s)); }
      var ul = document.getElementById("p-recent");
      if (ul) {
        var items = document.createDocumentFragment();
        p.recent.forEach(function (e) {
          var li = document.createElement("li");
          li.textContent = "#" + e[0] + " " + e[1] + (e[2] ? " " + e[2] : "") + (e[3] ? ": " + e[3] : "");
          items.appendChild(li);
        });
        ul.replaceChildren(items);
      }
      // Redraw the views when a new event was committed, at most every 2.5 s (the seq is kept until drawn).
      if (p.last_seq !== seq && Date.now() - lastDraw > 2500) {
        seq = p.last_seq;
        lastDraw = Date.now();
        return fetch("/runs/" + encodeURIComponent(run) + "/fragment", {cache: "no-store"})
          .then(function (r) { return r.text(); })
          .then(function (html) { document.getElementById("views").innerHTML = html; });
      }
    }
    function poll() {
      fetch("/api/runs/" + encodeURIComponent(run) + "/progress", {cache: "no-store"})
        .then(function (r) { return r.json(); }).then(draw)
        .catch(function () {}).finally(function () { setTimeout(poll, 1000); });
    }
    setTimeout(poll, 1000);
  }
  var table = document.getElementById("runs");
  if (table) runsList(table);
  var box = document.getElementById("progress");
  if (box) runPage(box);
})();
