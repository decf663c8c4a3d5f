/* advisor report: draws the step timeline from script#timeline-data into svg#tl-svg, and wires
   the page's small interactions (legend and finding highlights, snippet copy). No libraries and
   no network. Trace text only ever reaches the page through textContent, never as markup. */
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var GUTTER = 210, AXIS = 22, GROUP_H = 19, RIGHT = 6;
  var LANE_H = { step: 15, phase: 14, range: 13, api: 13, idle: 16, gpu: 18 };
  var PREFIX = { gpu: "gpu", api: "api", range: "range" };

  function $(id) { return document.getElementById(id); }
  function el(tag, attrs, parent) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs) { e.setAttribute(k, attrs[k]); }
    if (parent) { parent.appendChild(e); }
    return e;
  }
  function fmtNs(ns) {
    var a = Math.abs(ns);
    if (a >= 1e9) { return (ns / 1e9).toPrecision(4) + " s"; }
    if (a >= 1e6) { return (ns / 1e6).toPrecision(4) + " ms"; }
    if (a >= 1e3) { return (ns / 1e3).toPrecision(3) + " µs"; }
    return Math.round(ns) + " ns";
  }
  /* A label for a demangled kernel name: no return type, parameters or namespaces, and template
     arguments one level deep only (cutlass::Kernel2<cutlass_80_tensorop_...> keeps its config). */
  function shortName(name) {
    if (!/^void |::/.test(name)) { return name; }  /* not a C++ signature: "Memcpy HtoD (Pinned)" */
    var s = name.replace(/\(anonymous namespace\)::/g, "").replace(/^void /, "");
    if (s.charAt(s.length - 1) === ")") {
      for (var i = s.length - 1, depth = 0; i > 0; i--) {
        if (s[i] === ")") { depth++; } else if (s[i] === "(" && --depth === 0) { s = s.slice(0, i); break; }
      }
    }
    var lt = s.indexOf("<"), head = lt < 0 ? s : s.slice(0, lt), tail = lt < 0 ? "" : s.slice(lt);
    var ns = head.lastIndexOf("::");
    if (ns >= 0) { head = head.slice(ns + 2); }
    var out = "", d = 0;
    for (var k = 0; k < tail.length; k++) {
      var c = tail[k];
      if (c === "<") { d++; if (d === 1) { out += c; } else if (d === 2) { out += "…"; } continue; }
      if (c === ">") { d--; if (d === 0) { out += c; } continue; }
      if (d <= 1) { out += c; }
    }
    return (head + out).trim() || name;
  }

  wirePage();
  var dataEl = $("timeline-data"), svg = $("tl-svg");
  if (!dataEl || !svg) { return; }
  var data = JSON.parse(dataEl.textContent);
  if (!data) { return; }

  var box = $("tl"), tip = $("tl-tip"), viewLabel = $("tl-view");
  var span = data.span_ns, v0 = 0, v1 = span;
  var origin = data.step.cpu[0] || 0;  /* the axis counts from the step's start on the host */
  var names = data.names, classes = data.classes, lanes = data.lanes, groups = data.groups;
  var collapsed = new Set();
  var highlight = null;  /* {kind: "cls"|"ids", keys: Set, source: element} */
  var layout = [];       /* per lane: {y, h} or null when folded */
  var frame = 0;

  /* Indexes: node key -> [lane, event]; API call id -> the GPU ops it launched. */
  var byKey = new Map(), launched = new Map();
  lanes.forEach(function (lane, li) {
    var p = PREFIX[lane.kind];
    lane.ev.forEach(function (e, ei) {
      if (p && e[4] >= 0) { byKey.set(p + ":" + e[4], [li, ei]); }
      if (lane.kind === "gpu" && e[5] >= 0) {
        if (!launched.has(e[5])) { launched.set(e[5], []); }
        launched.get(e[5]).push([li, ei]);
      }
    });
  });
  var cpuGroups = groups.map(function (g, i) { return g.title === "CPU" ? i : -1; }).filter(function (i) { return i >= 0; });
  if (cpuGroups.length > 2) { cpuGroups.slice(1).forEach(function (g) { collapsed.add(g); }); }

  function plotW() { return Math.max(50, (box.clientWidth || 900) - GUTTER - RIGHT); }
  function tx(t) { return GUTTER + (t - v0) * plotW() / (v1 - v0); }
  function xt(x) { return v0 + (x - GUTTER) * (v1 - v0) / plotW(); }

  function niceStep(raw) {
    var e = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / e;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * e;
  }

  function firstVisible(ev, t0) {
    var lo = 0, hi = ev.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (ev[mid][0] < t0) { lo = mid + 1; } else { hi = mid; } }
    /* Events on one lane barely overlap: one that started earlier and is still running is close. */
    for (var i = lo - 1, k = 0; i >= 0 && k < 64; i--, k++) { if (ev[i][0] + ev[i][1] > t0) { lo = i; } }
    return lo;
  }

  function isHl(lane, li, e) {
    if (!highlight) { return false; }
    if (highlight.kind === "cls") { return highlight.keys.has(classes[e[3]]); }
    var p = PREFIX[lane.kind];
    return !!p && highlight.keys.has(p + ":" + e[4]);
  }

  function label(lane, e) {
    var n = names[e[2]];
    return lane.kind === "gpu" || lane.kind === "api" ? shortName(n) : n;
  }

  function drawEvent(g, lane, li, ei, x0, x1, y, h, cls, n, occupancy) {
    var e = lane.ev[ei], w = Math.max(1, x1 - x0);
    var c = "ev c-" + cls, hl = isHl(lane, li, e);
    if (e[7] & 1) { c += " dimmed"; }
    if (hl) { c += " hl"; }
    var r = el("rect", { x: x0.toFixed(1), y: y, width: w.toFixed(1), height: h, "class": c }, g);
    /* A mark widened to a pixel is drawn as full as the time it stands for: an idle GPU with a
       thousand 2 µs kernels must not look busy. */
    if (occupancy < 1) { r.setAttribute("fill-opacity", (0.3 + 0.7 * occupancy).toFixed(2)); }
    r.__ev = [li, ei, n];
    if (w >= 26 && n === 1) {
      var text = label(lane, e), room = Math.floor((w - 6) / 5.9);
      if (room >= 2) {
        var t = el("text", { x: (x0 + 3).toFixed(1), y: y + h / 2 + 3.5, "class": "lbl t-" + cls + (hl ? " hl" : "") }, g);
        t.textContent = text.length > room ? text.slice(0, room - 1) + "…" : text;
      }
    }
  }

  function drawLane(g, lane, li, y, h) {
    var ev = lane.ev, W = GUTTER + plotW();
    var pend = null;  /* sub-pixel events merged into one mark, coloured by the longest */
    function flush() {
      if (pend) {
        var covered = Math.max(1, pend.x1 - pend.x0) * (v1 - v0) / plotW();
        drawEvent(g, lane, li, pend.ei, pend.x0, pend.x1, y + 1, h - 2, pend.cls, pend.n, Math.min(1, pend.busy / covered));
        pend = null;
      }
    }
    for (var i = firstVisible(ev, v0); i < ev.length; i++) {
      var e = ev[i];
      if (e[0] > v1) { break; }
      if (e[0] + e[1] < v0) { continue; }
      var x0 = Math.max(GUTTER, tx(e[0])), x1 = Math.min(W, tx(e[0] + e[1]));
      var cls = classes[e[3]];
      if (x1 - x0 < 1.5 && e[6] === 1) {
        if (pend && x0 <= pend.x1 + 1) {
          pend.x1 = Math.max(pend.x1, x1, pend.x0 + 1); pend.n++; pend.busy += e[1];
          if (e[1] > pend.dur) { pend.dur = e[1]; pend.cls = cls; pend.ei = i; }
          continue;
        }
        flush();
        pend = { x0: x0, x1: Math.max(x1, x0 + 1), n: 1, dur: e[1], busy: e[1], cls: cls, ei: i };
        continue;
      }
      flush();
      drawEvent(g, lane, li, i, x0, x1, y + 1, h - 2, cls, 1, 1);
    }
    flush();
  }

  function render() {
    frame = 0;
    var W = GUTTER + plotW() + RIGHT;
    var y = AXIS;
    layout = [];
    var rows = [];
    var gi = -1;
    lanes.forEach(function (lane, li) {
      if (lane.group !== gi) {
        gi = lane.group;
        rows.push({ group: gi, y: y });
        y += GROUP_H;
      }
      if (collapsed.has(gi)) { layout.push(null); return; }
      var h = LANE_H[lane.kind] || 14;
      layout.push({ y: y, h: h });
      rows.push({ lane: li, y: y, h: h });
      y += h;
    });
    var H = y + 4;
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    svg.setAttribute("height", H);
    svg.setAttribute("data-t0", Math.round(v0));
    svg.setAttribute("data-t1", Math.round(v1));
    while (svg.firstChild) { svg.removeChild(svg.firstChild); }
    svg.classList.toggle("has-hl", !!highlight);

    var bg = el("g", {}, svg);
    el("rect", { x: 0, y: 0, width: GUTTER, height: H, "class": "gutter" }, bg);
    el("rect", { x: GUTTER, y: 0, width: W - GUTTER, height: AXIS, "class": "axis-bg" }, bg);
    /* ticks */
    var step = niceStep((v1 - v0) / Math.max(2, plotW() / 110));
    var dec = Math.max(0, Math.ceil(-Math.log10(step / 1e6)));
    for (var k = Math.ceil((v0 - origin) / step); origin + k * step <= v1; k++) {
      var x = tx(origin + k * step);
      el("line", { x1: x, x2: x, y1: AXIS - 5, y2: H, "class": "tick-line" }, bg);
      var tt = el("text", { x: x + 3, y: AXIS - 8, "class": "tick-text" }, bg);
      tt.textContent = (k * step / 1e6).toFixed(dec) + " ms";
    }
    var body = el("g", {}, svg);
    rows.forEach(function (r) {
      if (r.group !== undefined) {
        var gr = groups[r.group];
        el("rect", { x: 0, y: r.y, width: W, height: GROUP_H, "class": "group-bg", "data-group": r.group }, body);
        var title = el("text", { x: 8, y: r.y + 13, "class": "group-title", "data-group": r.group }, body);
        title.textContent = (collapsed.has(r.group) ? "▸ " : "▾ ") + gr.title;
        if (gr.sub) {
          var sub = el("tspan", { "class": "group-sub", dx: 6 }, title);
          sub.textContent = gr.sub;
        }
        return;
      }
      var lane = lanes[r.lane];
      if (lane.title) {
        var lt = el("text", { x: 18, y: r.y + r.h / 2 + 3.5, "class": "lane-title" }, body);
        lt.textContent = lane.title;
      }
      el("line", { x1: GUTTER, x2: W, y1: r.y + r.h - 0.5, y2: r.y + r.h - 0.5, "class": "lane-sep" }, body);
      drawLane(body, lane, r.lane, r.y, r.h);
    });
    el("line", { x1: GUTTER - 0.5, x2: GUTTER - 0.5, y1: 0, y2: H, "class": "gutter-line" }, svg);
    /* step boundaries */
    var s = data.step;
    [s.cpu[0], s.cpu[1], s.gpu[0], s.gpu[1]].forEach(function (m) {
      if (m === null || m < v0 || m > v1) { return; }
      var mx = tx(m);
      el("line", { x1: mx, x2: mx, y1: AXIS, y2: H, "class": "marker" }, svg);
    });
    svg.__overlay = el("g", {}, svg);
    if (viewLabel) {
      viewLabel.textContent = fmtNs(v1 - v0) + " shown, from " + fmtNs(v0 - origin).replace("-", "−");
    }
  }

  function schedule() { if (!frame) { frame = requestAnimationFrame(render); } }

  function setView(a, b) {
    var minSpan = 500, pad = span * 0.05;
    if (b - a < minSpan) { var c = (a + b) / 2; a = c - minSpan / 2; b = c + minSpan / 2; }
    if (b - a > span + 2 * pad) { a = -pad; b = span + pad; }
    if (a < -pad) { b += -pad - a; a = -pad; }
    if (b > span + pad) { a -= b - span - pad; b = span + pad; }
    v0 = a; v1 = b;
    schedule();
  }
  function zoomAt(t, factor) { setView(t - (t - v0) * factor, t + (v1 - t) * factor); }
  function fit() { setView(0, span); }
  function fitGpu() {
    var g = data.step.gpu;
    if (g[0] === null) { fit(); return; }
    var pad = (g[1] - g[0]) * 0.01;
    setView(g[0] - pad, g[1] + pad);
  }

  /* ----- tooltip and launch links ----- */
  function tipRow(parent, k, v) {
    var row = document.createElement("div"); row.className = "tip-row";
    var a = document.createElement("span"); a.textContent = k;
    var b = document.createElement("span"); b.textContent = v;
    row.appendChild(a); row.appendChild(b); parent.appendChild(row);
  }
  var KIND = { step: "step", phase: "phase", range: "host range", api: "CUDA API call", idle: "GPU idle", gpu: "GPU op" };
  function showTip(evt, ref) {
    var lane = lanes[ref[0]], e = lane.ev[ref[1]], n = ref[2];
    while (tip.firstChild) { tip.removeChild(tip.firstChild); }
    var head = document.createElement("div"); head.className = "tip-name";
    head.textContent = lane.kind === "idle" ? "GPU idle: host in " + names[e[2]] : names[e[2]];
    tip.appendChild(head);
    if (n > 1) { tipRow(tip, "merged here", n + " events under a pixel: zoom in"); }
    if (e[6] > 1) { tipRow(tip, "merged", e[6] + " short GPU ops (over the embed cap)"); }
    tipRow(tip, "duration", fmtNs(e[1]));
    tipRow(tip, "start", fmtNs(e[0] - origin) + " after step start");
    var cls = classes[e[3]];
    tipRow(tip, KIND[lane.kind] || lane.kind, cls.replace(/^(k|api|idle|ph)-/, "").replace(/^r\d$/, lane.title || "range"));
    if (lane.kind === "gpu") {
      tipRow(tip, "lane", groups[lane.group].title + " · " + lane.title);
      var call = e[5] >= 0 ? byKey.get("api:" + e[5]) : null;
      if (call) {
        var c = lanes[call[0]].ev[call[1]];
        tipRow(tip, "launched by", names[c[2]] + ", started " + fmtNs(e[0] - c[0]) + " later");
      }
      if (e[7] & 1) { tipRow(tip, "note", "launched outside this step"); }
    }
    if (lane.kind === "api" && launched.has(e[4])) {
      var ops = launched.get(e[4]);
      var first = lanes[ops[0][0]].ev[ops[0][1]];
      tipRow(tip, "launched", ops.length + " GPU op" + (ops.length > 1 ? "s" : "") + ", first ran " + fmtNs(first[0] - e[0]) + " later");
    }
    tip.hidden = false;
    var r = box.getBoundingClientRect();
    var x = evt.clientX - r.left + 14, y = evt.clientY - r.top + 14;
    var tw = tip.offsetWidth, th = tip.offsetHeight;
    if (x + tw > r.width - 4) { x = Math.max(4, evt.clientX - r.left - tw - 10); }
    if (y + th > r.height - 4) { y = Math.max(4, evt.clientY - r.top - th - 10); }
    tip.style.left = x + "px"; tip.style.top = y + "px";
  }
  function drawLink(ref) {
    var ov = svg.__overlay;
    if (!ov) { return; }
    while (ov.firstChild) { ov.removeChild(ov.firstChild); }
    var lane = lanes[ref[0]], e = lane.ev[ref[1]], pairs = [];
    if (lane.kind === "gpu" && e[5] >= 0 && byKey.has("api:" + e[5])) { pairs.push([byKey.get("api:" + e[5]), ref]); }
    if (lane.kind === "api" && launched.has(e[4])) {
      launched.get(e[4]).forEach(function (k) { pairs.push([[ref[0], ref[1]], k]); });
    }
    pairs.forEach(function (p) {
      var a = layout[p[0][0]], b = layout[p[1][0]];
      if (!a || !b) { return; }
      var ea = lanes[p[0][0]].ev[p[0][1]], eb = lanes[p[1][0]].ev[p[1][1]];
      var lo = GUTTER, hi = GUTTER + plotW();
      var xa = Math.min(hi, Math.max(lo, tx(ea[0]))), xb = Math.min(hi, Math.max(lo, tx(eb[0])));
      var ya = a.y + a.h - 1, yb = b.y + 1, my = (ya + yb) / 2;
      el("path", { d: "M" + xa + "," + ya + " C" + xa + "," + my + " " + xb + "," + my + " " + xb + "," + yb, "class": "link" }, ov);
      el("circle", { cx: xb, cy: yb, r: 2.2, fill: "#111" }, ov);
    });
  }
  function clearLink() { var ov = svg.__overlay; if (ov) { while (ov.firstChild) { ov.removeChild(ov.firstChild); } } }

  /* ----- pointer ----- */
  var drag = null;
  function localX(evt) { var r = svg.getBoundingClientRect(); return evt.clientX - r.left; }
  function localY(evt) { var r = svg.getBoundingClientRect(); return evt.clientY - r.top; }

  /* The wheel scrolls the page until the timeline is clicked (or Ctrl/⌘ is held): a page
     that traps the wheel halfway down is worse than one extra click. */
  var hintTimer = 0;
  function hint() {
    var h = $("tl-hint");
    if (!h) { return; }
    h.hidden = false;
    clearTimeout(hintTimer);
    hintTimer = setTimeout(function () { h.hidden = true; }, 1400);
  }
  svg.addEventListener("wheel", function (evt) {
    var sideways = evt.shiftKey || Math.abs(evt.deltaX) > Math.abs(evt.deltaY);
    if (!sideways && !evt.ctrlKey && !evt.metaKey && document.activeElement !== box) { hint(); return; }
    evt.preventDefault();
    var x = localX(evt);
    if (sideways) {
      var d = (evt.deltaX || evt.deltaY) * (v1 - v0) / plotW();
      setView(v0 + d, v1 + d);
      return;
    }
    var t = x > GUTTER ? xt(x) : (v0 + v1) / 2;
    zoomAt(t, Math.exp(evt.deltaY * (evt.deltaMode === 1 ? 0.05 : 0.0022)));
  }, { passive: false });

  svg.addEventListener("mousedown", function (evt) {
    if (evt.button !== 0) { return; }
    var x = localX(evt), y = localY(evt);
    var grp = evt.target.getAttribute && evt.target.getAttribute("data-group");
    if (grp !== null && grp !== undefined && grp !== "") {
      var g = +grp;
      if (collapsed.has(g)) { collapsed.delete(g); } else { collapsed.add(g); }
      schedule();
      return;
    }
    if (x < GUTTER) { return; }
    evt.preventDefault();
    box.focus({ preventScroll: true });
    drag = { brush: y < AXIS, x: x, v0: v0, v1: v1, moved: false, rect: null };
    if (drag.brush) { drag.rect = el("rect", { x: x, y: 0, width: 0, height: svg.getBoundingClientRect().height, "class": "brush" }, svg); }
    else { svg.classList.add("dragging"); }
  });
  window.addEventListener("mousemove", function (evt) {
    if (!drag) { return; }
    var x = localX(evt);
    if (Math.abs(x - drag.x) > 2) { drag.moved = true; }
    if (drag.brush) {
      var a = Math.max(GUTTER, Math.min(drag.x, x)), b = Math.min(GUTTER + plotW(), Math.max(drag.x, x));
      drag.rect.setAttribute("x", a); drag.rect.setAttribute("width", Math.max(0, b - a));
    } else {
      var dt = (x - drag.x) * (drag.v1 - drag.v0) / plotW();
      setView(drag.v0 - dt, drag.v1 - dt);
    }
  });
  window.addEventListener("mouseup", function (evt) {
    if (!drag) { return; }
    var d = drag; drag = null;
    svg.classList.remove("dragging");
    if (d.brush) {
      if (d.rect && d.rect.parentNode) { d.rect.parentNode.removeChild(d.rect); }
      var x = localX(evt);
      if (Math.abs(x - d.x) > 4) {
        var a = Math.max(GUTTER, Math.min(d.x, x)), b = Math.min(GUTTER + plotW(), Math.max(d.x, x));
        setView(xt(a), xt(b));
      }
    }
  });
  svg.addEventListener("dblclick", fit);
  svg.addEventListener("mousemove", function (evt) {
    if (drag) { tip.hidden = true; return; }
    var ref = evt.target.__ev;
    if (ref) { showTip(evt, ref); drawLink(ref); } else { tip.hidden = true; clearLink(); }
  });
  svg.addEventListener("mouseleave", function () { tip.hidden = true; clearLink(); });

  box.addEventListener("keydown", function (evt) {
    var c = (v0 + v1) / 2, w = v1 - v0, k = evt.key.toLowerCase();
    if (k === "w") { zoomAt(c, 0.7); } else if (k === "s") { zoomAt(c, 1 / 0.7); }
    else if (k === "a") { setView(v0 - w * 0.2, v1 - w * 0.2); } else if (k === "d") { setView(v0 + w * 0.2, v1 + w * 0.2); }
    else if (k === "escape") { setHighlight(null); } else { return; }
    evt.preventDefault();
  });

  document.querySelectorAll(".tl-controls button").forEach(function (b) {
    b.addEventListener("click", function () {
      var act = b.getAttribute("data-act"), c = (v0 + v1) / 2;
      if (act === "in") { zoomAt(c, 0.5); } else if (act === "out") { zoomAt(c, 2); }
      else if (act === "fit") { fit(); } else if (act === "gpu") { fitGpu(); }
    });
  });

  /* ----- highlights from the legend and from findings ----- */
  function setHighlight(h) {
    document.querySelectorAll(".legend-item.on, .show-in-tl.on").forEach(function (b) { b.classList.remove("on"); });
    highlight = h;
    if (h && h.source) { h.source.classList.add("on"); }
    schedule();
  }
  document.querySelectorAll(".legend-item").forEach(function (b) {
    b.addEventListener("click", function () {
      var cls = b.getAttribute("data-cls");
      if (highlight && highlight.source === b) { setHighlight(null); return; }
      setHighlight({ kind: "cls", keys: new Set([cls]), source: b });
    });
  });
  document.querySelectorAll(".show-in-tl").forEach(function (b) {
    b.addEventListener("click", function () {
      if (highlight && highlight.source === b) { setHighlight(null); return; }
      var keys = new Set((b.getAttribute("data-ids") || "").split(" ").filter(Boolean));
      setHighlight({ kind: "ids", keys: keys, source: b });
      var lo = Infinity, hi = -Infinity;
      keys.forEach(function (k) {
        var ref = byKey.get(k);
        if (ref) { var e = lanes[ref[0]].ev[ref[1]]; lo = Math.min(lo, e[0]); hi = Math.max(hi, e[0] + e[1]); }
      });
      if (lo < hi) { var pad = Math.max((hi - lo) * 0.05, 2000); setView(lo - pad, hi + pad); }
      box.scrollIntoView({ behavior: "smooth", block: "center" });
    });
  });

  window.addEventListener("resize", schedule);
  render();

  /* ----- page-wide bits that do not need the timeline ----- */
  function wirePage() {
    document.querySelectorAll(".snippet .copy").forEach(function (b) {
      b.addEventListener("click", function () {
        var code = b.parentNode.querySelector("code");
        if (!code) { return; }
        var done = function () { b.textContent = "copied"; setTimeout(function () { b.textContent = "copy"; }, 1200); };
        var fallback = function () {
          var range = document.createRange(); range.selectNodeContents(code);
          var sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(range);
          try { document.execCommand("copy"); done(); } catch (err) { b.textContent = "select + ⌘C"; }
        };
        if (navigator.clipboard && window.isSecureContext) {
          navigator.clipboard.writeText(code.textContent).then(done, fallback);
        } else { fallback(); }
      });
    });
  }
})();
