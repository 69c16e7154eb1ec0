// verifyless dashboard views drawn from the JSON API: lineage graph (zoom, pan, click for a side panel), every
// candidate's score against verification index (metric picker) and LLM usage over verifications.
// API data reaches the page only through textContent and setAttribute; no HTML is built from it.
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var root = document.getElementById("dash");
  if (!root) return;
  var run = root.getAttribute("data-run");
  var base = "/runs/" + encodeURIComponent(run);

  function el(name, attrs, parent, text) {
    var node = document.createElementNS(NS, name);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, String(attrs[k])); });
    if (text !== undefined) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  }
  function html(name, parent, text, cls) {
    var node = document.createElement(name);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  }
  function fmt(x) {
    if (x === null || x === undefined) return "-";
    if (typeof x === "number") return Number.isInteger(x) ? String(x) : String(Number(x.toPrecision(5)));
    return String(x);
  }
  function getJSON(url) { return fetch(url, {cache: "no-store"}).then(function (r) { return r.json(); }); }

  // ------------------------------------------------------------------ lineage graph
  var graph = document.getElementById("lineage");
  var side = document.getElementById("side");
  var view = null;  // current viewBox [x, y, w, h]; kept across redraws so zoom survives live updates

  function setView() { graph.setAttribute("viewBox", view.join(" ")); }

  function showNode(n, g) {
    graph.querySelectorAll("circle.selected").forEach(function (c) { c.classList.remove("selected"); });
    var circle = graph.querySelector('circle[data-id="' + CSS.escape(n.id) + '"]');
    if (circle) circle.classList.add("selected");
    side.replaceChildren();
    html("h3", side, "Node " + n.id);
    var t = html("table", side, undefined, "kv");
    var rows = [["status", n.status], ["operator", n.operator], ["parent", n.parent_id || "-"], ["round / island", n.round + " / " + n.island],
     ["validation score", fmt(n.score)], ["on the returned path", n.on_path ? "yes" : "no"]];
    var u = lastSeries && lastSeries.nodes[n.id];
    if (u) rows.push(["LLM calls", u.calls + " · " + (u.prompt_tokens + u.completion_tokens) + " tokens · cost " + fmt(u.cost)]);
    rows.forEach(function (row) {
      var tr = html("tr", t); html("td", tr, row[0]); html("td", tr, row[1]);
    });
    html("pre", side, n.idea || "(no idea text)", "idea");
    var links = html("p", side);
    var a = html("a", links, "node page"); a.href = base + "/nodes/" + encodeURIComponent(n.id); a.id = "side-node";
    links.appendChild(document.createTextNode(" · "));
    var c = html("a", links, "LLM calls"); c.href = base + "/nodes/" + encodeURIComponent(n.id) + "/calls"; c.id = "side-calls";
    if (n.parent_id) {
      links.appendChild(document.createTextNode(" · "));
      var d = html("a", links, "diff vs parent");
      d.href = base + "/diff?a=" + encodeURIComponent(n.parent_id) + "&b=" + encodeURIComponent(n.id);
    }
    if (g.final_id && g.final_id !== n.id) {
      links.appendChild(document.createTextNode(" · "));
      var f = html("a", links, "diff vs returned");
      f.href = base + "/diff?a=" + encodeURIComponent(n.id) + "&b=" + encodeURIComponent(g.final_id);
    }
  }

  function drawGraph(g) {
    if (!view) {
      // Fit the whole graph; the box's height follows the graph's aspect (CSSOM style, allowed by the CSP).
      view = [0, 0, Math.max(g.width, 200), Math.max(g.height, 150)];
      var h = graph.clientWidth * view[3] / view[2];
      graph.style.height = Math.round(Math.min(520, Math.max(240, h))) + "px";
    }
    setView();
    var selected = graph.querySelector("circle.selected");
    var keep = selected ? selected.getAttribute("data-id") : null;
    graph.replaceChildren();
    var layer = el("g", {}, graph);
    g.islands.forEach(function (b) {
      if (g.islands.length < 2) return;
      el("rect", {x: b.x0, y: 4, width: b.x1 - b.x0, height: g.height - 8, rx: 6, "class": "island"}, layer);
      el("text", {x: b.x0 + 4, y: 16, "class": "island-label"}, layer, "island " + b.island);
    });
    var at = {};
    g.nodes.forEach(function (n) { at[n.id] = n; });
    g.edges.forEach(function (e) {
      var s = at[e.source], t = at[e.target];
      if (!s || !t) return;
      var cls = "edge " + (e.kind === "reference" ? "reference" : "primary") + (e.on_path ? " path" : "");
      if (e.kind === "reference") {
        var mx = (s.x + t.x) / 2, my = Math.min(s.y, t.y) - 30;
        el("path", {d: "M" + s.x + "," + s.y + " Q" + mx + "," + my + " " + t.x + "," + t.y, "class": cls}, layer);
      } else {
        el("line", {x1: s.x, y1: s.y, x2: t.x, y2: t.y, "class": cls}, layer);
      }
    });
    g.nodes.forEach(function (n) {
      var cls = "node" + (n.on_path ? " path" : "") + (n.final ? " final" : "");
      var c = el("circle", {cx: n.x, cy: n.y, r: n.r, fill: n.color, "class": cls, "data-id": n.id}, layer);
      el("title", {}, c, n.id + " · " + n.status + " · score " + fmt(n.score));
      c.addEventListener("click", function (ev) { ev.stopPropagation(); showNode(n, g); });
      el("text", {x: n.x, y: n.y + n.r + 10, "text-anchor": "middle", "class": "label"}, layer, n.id);
    });
    if (keep && at[keep]) showNode(at[keep], g);
  }

  function svgPoint(ev) {
    var box = graph.getBoundingClientRect();
    return [view[0] + (ev.clientX - box.left) / box.width * view[2], view[1] + (ev.clientY - box.top) / box.height * view[3]];
  }
  graph.addEventListener("wheel", function (ev) {
    if (!view) return;
    ev.preventDefault();
    var p = svgPoint(ev), k = ev.deltaY < 0 ? 0.85 : 1 / 0.85;
    view = [p[0] - (p[0] - view[0]) * k, p[1] - (p[1] - view[1]) * k, view[2] * k, view[3] * k];
    setView();
  }, {passive: false});
  var drag = null;
  graph.addEventListener("pointerdown", function (ev) {
    if (!view || ev.target.tagName === "circle") return;
    drag = {x: ev.clientX, y: ev.clientY, view: view.slice()};
    graph.classList.add("dragging");
  });
  window.addEventListener("pointermove", function (ev) {
    if (!drag) return;
    var box = graph.getBoundingClientRect();
    view = [drag.view[0] - (ev.clientX - drag.x) / box.width * view[2],
            drag.view[1] - (ev.clientY - drag.y) / box.height * view[3], view[2], view[3]];
    setView();
  });
  window.addEventListener("pointerup", function () { drag = null; graph.classList.remove("dragging"); });

  // ------------------------------------------------------------------ charts
  function ticks(lo, hi, n) {
    if (hi === lo) return [lo];
    var step = Math.pow(10, Math.floor(Math.log10((hi - lo) / n)));
    [1, 2, 5, 10].some(function (m) { if ((hi - lo) / (step * m) <= n) { step *= m; return true; } return false; });
    var out = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
    return out;
  }
  // A frame with axes; returns scale functions. opts: {xmin, xmax, ymin, ymax, xlabel, ylabel, right: {min, max, label}}
  function frame(svg, o) {
    svg.replaceChildren();
    var W = 560, H = 280, L = 62, R = o.right ? 62 : 16, T = 14, B = 40;
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    function pad(lo, hi) { return lo === hi ? [lo - 1, hi + 1] : [lo - (hi - lo) * 0.05, hi + (hi - lo) * 0.05]; }
    var xr = [o.xmin, Math.max(o.xmax, o.xmin + 1)], yr = pad(o.ymin, o.ymax);
    var sx = function (x) { return L + (x - xr[0]) / (xr[1] - xr[0]) * (W - L - R); };
    var sy = function (y) { return H - B - (y - yr[0]) / (yr[1] - yr[0]) * (H - T - B); };
    ticks(yr[0], yr[1], 5).forEach(function (v) {
      el("line", {x1: L, x2: W - R, y1: sy(v), y2: sy(v), "class": "grid"}, svg);
      el("text", {x: L - 4, y: sy(v) + 3, "text-anchor": "end", "class": "tick"}, svg, fmt(v));
    });
    ticks(xr[0], xr[1], 8).filter(function (v) { return Number.isInteger(v); }).forEach(function (v) {
      el("text", {x: sx(v), y: H - B + 14, "text-anchor": "middle", "class": "tick"}, svg, fmt(v));
    });
    el("line", {x1: L, x2: W - R, y1: H - B, y2: H - B, "class": "axis"}, svg);
    el("line", {x1: L, x2: L, y1: T, y2: H - B, "class": "axis"}, svg);
    el("text", {x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle", "class": "tick"}, svg, o.xlabel);
    el("text", {x: 12, y: (T + H - B) / 2, "text-anchor": "middle", "class": "tick",
                transform: "rotate(-90 12 " + (T + H - B) / 2 + ")"}, svg, o.ylabel);
    var out = {sx: sx, sy: sy, bottom: H - B, top: T, W: W, L: L, R: R};
    if (o.right) {
      var rr = pad(o.right.min, o.right.max);
      out.sr = function (y) { return H - B - (y - rr[0]) / (rr[1] - rr[0]) * (H - T - B); };
      el("line", {x1: W - R, x2: W - R, y1: T, y2: H - B, "class": "axis"}, svg);
      ticks(rr[0], rr[1], 5).forEach(function (v) {
        el("text", {x: W - R + 4, y: out.sr(v) + 3, "class": "tick"}, svg, fmt(v));
      });
      el("text", {x: W - 10, y: (T + H - B) / 2, "text-anchor": "middle", "class": "tick",
                  transform: "rotate(90 " + (W - 10) + " " + (T + H - B) / 2 + ")"}, svg, o.right.label);
    }
    return out;
  }
  function polyline(svg, pts, cls) {
    if (!pts.length) return;
    el("polyline", {points: pts.map(function (p) { return p[0].toFixed(1) + "," + p[1].toFixed(1); }).join(" "),
                    "class": "line " + cls}, svg);
  }

  var scatter = document.getElementById("scatter"), picker = document.getElementById("metric");
  var lastSeries = null;

  function drawScatter(s) {
    var metric = picker.value;
    var value = function (p) { return metric ? (p.metrics[metric] === undefined ? null : p.metrics[metric]) : p.score; };
    var ys = s.points.map(value).filter(function (v) { return v !== null; });
    var f = frame(scatter, {xmin: 0, xmax: Math.max(1, s.points.length), ymin: ys.length ? Math.min.apply(null, ys) : 0,
                            ymax: ys.length ? Math.max.apply(null, ys) : 1, xlabel: "verification",
                            ylabel: metric || "score"});
    s.points.forEach(function (p) {
      var v = value(p), ok = p.status === "ok" && v !== null;
      var c = el("circle", {cx: f.sx(p.x), cy: v === null ? f.bottom - 4 : f.sy(v), r: ok ? 4 : 3,
                            "class": "dot " + (ok ? "ok" : "other") + (p.node_id === s.final_id ? " best" : "")}, scatter);
      el("title", {}, c, "#" + p.x + " " + p.node_id + " · " + p.status + " · " + (metric || "score") + " " + fmt(v));
    });
  }
  picker.addEventListener("change", function () { if (lastSeries) drawScatter(lastSeries.scatter); });

  function fillPicker(names) {
    var have = {};
    Array.prototype.forEach.call(picker.options, function (o) { have[o.value] = true; });
    names.forEach(function (n) {
      if (have[n]) return;
      var o = document.createElement("option"); o.value = n; o.textContent = n; picker.appendChild(o);
    });
  }

  function drawUsage(u) {
    var usage = document.getElementById("usage");
    var pts = u.points;
    var tmax = Math.max.apply(null, pts.map(function (p) { return Math.max(p.prompt_tokens, p.completion_tokens); }).concat([1]));
    var cmax = Math.max.apply(null, pts.map(function (p) { return p.cost; }).concat([0]));
    var f = frame(usage, {xmin: 0, xmax: Math.max(1, pts.length - 1), ymin: 0, ymax: tmax, xlabel: "verification",
                          ylabel: "tokens so far", right: {min: 0, max: cmax || 1, label: "cost so far"}});
    polyline(usage, pts.map(function (p) { return [f.sx(p.x), f.sy(p.prompt_tokens)]; }), "tokens-in");
    polyline(usage, pts.map(function (p) { return [f.sx(p.x), f.sy(p.completion_tokens)]; }), "tokens-out");
    polyline(usage, pts.map(function (p) { return [f.sx(p.x), f.sr(p.cost)]; }), "cost");
    [["prompt tokens", "tokens-in"], ["completion tokens", "tokens-out"], ["cost", "cost"]].forEach(function (k, i) {
      var x = f.L + 10 + i * 130;
      el("line", {x1: x, x2: x + 18, y1: f.top + 6, y2: f.top + 6, "class": "line " + k[1]}, usage);
      el("text", {x: x + 22, y: f.top + 10, "class": "key"}, usage, k[0]);
    });
    var t = u.total;
    document.getElementById("usage-total").textContent = t.calls + " calls · " + t.prompt_tokens + " prompt + " +
      t.completion_tokens + " completion tokens · cost " + fmt(t.cost) + " (cache hits charge nothing)";
  }

  function refresh() {
    getJSON("/api" + base + "/lineage").then(drawGraph).catch(function () {});
    getJSON("/api" + base + "/series").then(function (s) {
      lastSeries = s; fillPicker(s.scatter.metrics); drawScatter(s.scatter); drawUsage(s.usage);
    }).catch(function () {});
  }
  refresh();
  // Redraw when the live page redraws its views (ui.js replaces #views after a new event).
  var views = document.getElementById("views");
  if (views && window.MutationObserver) new MutationObserver(refresh).observe(views, {childList: true});
})();
