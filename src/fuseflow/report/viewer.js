// fuseflow report viewer: tabs of Graphviz pictures with pan and zoom, and node details on click.
// The report data (kernels, nodes, statistics) is the JSON in #report-data.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var kernels = {};
  data.kernels.forEach(function (k) { kernels[k.index] = k; });
  var panes = {};
  document.querySelectorAll(".pane").forEach(function (p) { panes[p.dataset.tab] = p; });
  var canvas = document.getElementById("canvas");
  var views = {};
  var LARGE = 80;  // a kernel of more primitives opens on its compact picture, one box per op
  var FOUND_ACROSS = 600;  // what the search finds is shown about this many picture units across
  var current = null;

  function esc(text) {
    return String(text).replace(/[&<>"]/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c];
    });
  }

  // -- pictures: one viewBox per tab ---------------------------------------------------------
  function viewOf(tab) {
    if (!views[tab]) {
      var svg = panes[tab].querySelector("svg");
      var vb = svg.viewBox.baseVal;
      svg.removeAttribute("width");
      svg.removeAttribute("height");
      svg.setAttribute("preserveAspectRatio", "xMidYMid meet");
      views[tab] = {svg: svg, home: [vb.x, vb.y, vb.width, vb.height], box: [vb.x, vb.y, vb.width, vb.height]};
    }
    return views[tab];
  }

  function apply(view) { view.svg.setAttribute("viewBox", view.box.join(" ")); }

  function toUser(view, clientX, clientY, inverse) {
    var point = view.svg.createSVGPoint();
    point.x = clientX;
    point.y = clientY;
    return point.matrixTransform(inverse || view.svg.getScreenCTM().inverse());
  }

  function zoom(view, factor, cx, cy) {
    var b = view.box;
    view.box = [cx - (cx - b[0]) * factor, cy - (cy - b[1]) * factor, b[2] * factor, b[3] * factor];
    apply(view);
  }

  function zoomAtCenter(factor) {
    if (!current) return;
    var view = viewOf(current), b = view.box;
    zoom(view, factor, b[0] + b[2] / 2, b[1] + b[3] / 2);
  }

  // center the view on an element, zoomed in to about `across` units (1400 by default; never
  // wider than 2.5 times the element), never out
  function centerOn(element, across) {
    var view = viewOf(current);
    var rect = element.getBoundingClientRect();
    var c = toUser(view, rect.left + rect.width / 2, rect.top + rect.height / 2);
    var b = view.box;
    var want = across ? Math.max(across, 2.5 * element.getBBox().width) : 1400;
    var scale = Math.min(1, want / b[2]);
    view.box = [c.x - b[2] * scale / 2, c.y - b[3] * scale / 2, b[2] * scale, b[3] * scale];
    apply(view);
  }

  function show(tab) {
    if (!panes[tab]) return;
    current = tab;
    var kernelTab = tab.replace(/ops$/, "");  // a kernel's two pictures share its tab
    Object.keys(panes).forEach(function (t) { panes[t].classList.toggle("active", t === tab); });
    document.querySelectorAll("#tabs button").forEach(function (b) {
      b.classList.toggle("active", b.dataset.tab === kernelTab);
    });
    document.querySelectorAll("#kernel-table tbody tr").forEach(function (r) {
      r.classList.toggle("active", "k" + r.dataset.kernel === kernelTab);
    });
    var toggle = document.getElementById("view-toggle");
    toggle.disabled = !panes[kernelTab + "ops"];
    toggle.textContent = tab === kernelTab ? "ops" : "primitives";
    apply(viewOf(tab));
  }

  // the picture a kernel's tab opens on: the compact one for a large kernel
  function opening(tab) {
    var k = kernels[Number(tab.slice(1))];
    var large = k && k.nodes && Object.keys(k.nodes).length > LARGE;
    return large && panes[tab + "ops"] ? tab + "ops" : tab;
  }

  // the box of op `op` in kernel k's picture of primitives (a wrapped picture: its first column)
  function opCluster(k, op) {
    for (var column = 0; column < 8; column++) {
      var g = document.getElementById("k" + k + "_op_" + op + "_" + column);
      if (g) return g;
    }
    return null;
  }

  function openOp(k, op) {
    show("k" + k);
    document.querySelectorAll("g.selected").forEach(function (g) { g.classList.remove("selected"); });
    var box = opCluster(k, op);
    if (box) {
      box.classList.add("selected");
      centerOn(box, FOUND_ACROSS);
    }
    var statement = kernels[k].statements[op] || op;
    document.getElementById("detail-body").innerHTML = '<div class="title">' + esc(op) + "</div>" +
      '<p>source op: <span class="statement">' + esc(statement) + "</span> · kernel " + k + "</p>" +
      "<p>Its primitives are in the box labelled with its statement; click one for its details.</p>";
    return true;
  }

  // -- node details -----------------------------------------------------------------------------
  function link(k, id) {
    return '<a href="#" class="node-link" data-kernel="' + k + '" data-node="' + id + '">n' + id + "</a>";
  }

  function number(x) { return x === null || x === undefined ? "" : Number(x).toLocaleString("en-US"); }

  function details(k, id) {
    var node = kernels[k].nodes[id];
    var out = ['<div class="title">n' + id + " " + esc(node.title) + "</div>",
               '<div class="sub">' + esc(node.long) + " · kernel " + k + "</div>"];
    if (node.statement) out.push('<p>source op: <span class="statement">' + esc(node.statement) + "</span></p>");
    if (node.drawn_as) {
      out.push("<p>Not drawn (" + esc(node.kind) + "): shown by " +
               node.drawn_as.map(function (n) { return link(k, n); }).join(", ") + ".</p>");
    }
    if (node.steps !== null) out.push("<p>steps (busy cycles): <b>" + number(node.steps) + "</b></p>");
    var params = Object.keys(node.params).map(function (p) {
      return "<tr><td>" + esc(p) + "</td><td>" + esc(JSON.stringify(node.params[p])) + "</td></tr>";
    });
    if (params.length) out.push("<table><tr><th>parameter</th><th>value</th></tr>" + params.join("") + "</table>");
    var simulated = kernels[k].simulated;
    var extra = function (cells) { return simulated ? cells : ""; };
    if (node.inputs.length) {
      out.push("<h4>inputs</h4><table><tr><th>port</th><th>stream</th><th>from</th>" +
               extra("<th>tokens</th><th>max fifo</th>") + "</tr>");
      node.inputs.forEach(function (s) {
        var via = s.via !== null ? " (via " + link(k, s.via) + ")" : "";
        out.push("<tr><td>" + esc(s.port) + '</td><td class="stream-' + s.kind + '">' + esc(s.kind) + " " +
                 esc(s.stream) + "</td><td>" + link(k, s.from) + via + "</td>" +
                 extra("<td>" + number(s.tokens) + "</td><td>" + number(s.occupancy) + "</td>") + "</tr>");
      });
      out.push("</table>");
    }
    if (node.outputs.length) {
      out.push("<h4>outputs</h4><table><tr><th>port</th><th>stream</th>" + extra("<th>tokens</th>") +
               "<th>to</th></tr>");
      node.outputs.forEach(function (s) {
        var to = s.to.map(function (u) { return link(k, u[0]) + "." + esc(u[1]); }).join(", ") || "unused";
        out.push("<tr><td>" + esc(s.port) + '</td><td class="stream-' + s.kind + '">' + esc(s.kind) + "</td>" +
                 extra("<td>" + number(s.tokens) + "</td>") + "<td>" + to + "</td></tr>");
      });
      out.push("</table>");
    }
    document.getElementById("detail-body").innerHTML = out.join("");
  }

  function select(k, id, across) {
    var kernel = kernels[k];
    if (!kernel || !kernel.nodes || !kernel.nodes[id]) return false;
    show("k" + k);
    document.querySelectorAll("g.selected").forEach(function (g) { g.classList.remove("selected"); });
    var drawn = kernel.nodes[id].drawn_as || [Number(id)];
    var first = null;
    drawn.forEach(function (n) {
      var g = document.getElementById("k" + k + "_n" + n);
      if (g) {
        g.classList.add("selected");
        first = first || g;
      }
    });
    if (first) centerOn(first, across);
    details(k, id);
    return true;
  }

  // -- events --------------------------------------------------------------------------------------
  document.querySelectorAll("#tabs button").forEach(function (b) {
    b.addEventListener("click", function () { show(opening(b.dataset.tab)); });
  });
  document.querySelectorAll("#kernel-table tbody tr").forEach(function (r) {
    r.addEventListener("click", function () { show(opening("k" + r.dataset.kernel)); });
  });
  document.addEventListener("click", function (e) {
    var a = e.target.closest ? e.target.closest("a.node-link") : null;
    if (a) {
      e.preventDefault();
      select(Number(a.dataset.kernel), a.dataset.node);
    }
  });
  document.getElementById("zoom-in").addEventListener("click", function () { zoomAtCenter(1 / 1.25); });
  document.getElementById("zoom-out").addEventListener("click", function () { zoomAtCenter(1.25); });
  document.getElementById("zoom-fit").addEventListener("click", function () {
    if (!current) return;
    var view = viewOf(current);
    view.box = view.home.slice();
    apply(view);
  });
  // -- search: a node id (n12, k1 n12), an op (t5), or words of a node's label (intersect k, A) ------
  var found = {query: null, hits: [], at: -1};

  function searchHits(query) {
    var words = query.toLowerCase().split(/\s+/).filter(Boolean);
    var hits = [], ops = [];
    var here = current && current[0] === "k" ? Number(current.replace(/\D/g, "")) : null;
    var order = data.kernels.filter(function (kd) { return kd.nodes; });
    order.sort(function (a, b) { return (b.index === here) - (a.index === here); });  // this kernel first
    order.forEach(function (kd) {
      Object.keys(kd.statements || {}).forEach(function (op) {
        if (op.toLowerCase() === query.toLowerCase()) ops.push({kernel: kd.index, op: op});
      });
      Object.keys(kd.nodes).forEach(function (id) {
        var n = kd.nodes[id];
        if (n.drawn_as) return;  // left out of the picture: found through what stands for it
        var text = (n.title + " " + n.sub + " " + n.op + " " + n.long).toLowerCase();
        if (words.every(function (w) { return text.indexOf(w) >= 0; })) hits.push({kernel: kd.index, node: id});
      });
    });
    return ops.concat(hits);
  }

  function search(query) {
    var m = /^\s*(?:k(\d+)\s*[ .:/-]?\s*)?n(\d+)\s*$/.exec(query) || /^\s*(?:k(\d+)\s+)?(\d+)\s*$/.exec(query);
    var hint = document.getElementById("hint");
    if (m) {
      var k = m[1] !== undefined ? Number(m[1]) : (current && current[0] === "k" ? Number(current.replace(/\D/g, "")) : null);
      if (k === null || !select(k, m[2], FOUND_ACROSS)) {
        data.kernels.some(function (kd) {
          return kd.nodes && kd.nodes[m[2]] && select(kd.index, m[2], FOUND_ACROSS);
        });
      }
      return;
    }
    if (query !== found.query) found = {query: query, hits: searchHits(query.trim()), at: -1};
    if (!found.hits.length) {
      hint.textContent = "nothing matches " + query;
      return;
    }
    found.at = (found.at + 1) % found.hits.length;  // Enter again: the next match
    var hit = found.hits[found.at];
    if (hit.op !== undefined) openOp(hit.kernel, hit.op);
    else select(hit.kernel, hit.node, FOUND_ACROSS);
    hint.textContent = "match " + (found.at + 1) + " of " + found.hits.length + " (Enter: next)";
  }

  document.getElementById("search").addEventListener("keydown", function (e) {
    if (e.key === "Enter") search(e.target.value);
  });
  document.getElementById("view-toggle").addEventListener("click", function () {
    if (!current || current === "overview") return;
    var kernelTab = current.replace(/ops$/, "");
    show(current === kernelTab && panes[kernelTab + "ops"] ? kernelTab + "ops" : kernelTab);
  });

  canvas.addEventListener("wheel", function (e) {
    if (!current) return;
    e.preventDefault();
    var view = viewOf(current), p = toUser(view, e.clientX, e.clientY);
    zoom(view, e.deltaY > 0 ? 1.15 : 1 / 1.15, p.x, p.y);
  }, {passive: false});

  var drag = null;
  canvas.addEventListener("mousedown", function (e) {
    if (!current || e.button !== 0) return;
    var view = viewOf(current);
    drag = {x: e.clientX, y: e.clientY, box: view.box.slice(), inverse: view.svg.getScreenCTM().inverse(),
            moved: false};
  });
  window.addEventListener("mousemove", function (e) {
    if (!drag) return;
    if (Math.abs(e.clientX - drag.x) + Math.abs(e.clientY - drag.y) > 4) {
      drag.moved = true;
      canvas.classList.add("dragging");
    }
    if (!drag.moved) return;
    var view = viewOf(current);
    var a = toUser(view, drag.x, drag.y, drag.inverse), b = toUser(view, e.clientX, e.clientY, drag.inverse);
    view.box = [drag.box[0] - (b.x - a.x), drag.box[1] - (b.y - a.y), drag.box[2], drag.box[3]];
    apply(view);
  });
  window.addEventListener("mouseup", function (e) {
    var was = drag;
    drag = null;
    canvas.classList.remove("dragging");
    if (!was || was.moved) return;
    var g = e.target.closest ? e.target.closest("g.node") : null;
    if (!g) return;
    var m = /^k(\d+)_n(\d+)$/.exec(g.id);
    if (m) {
      select(Number(m[1]), m[2]);
      return;
    }
    m = /^k(\d+)_box_(.+)$/.exec(g.id);  // an op's box: open its primitives
    if (m && kernels[m[1]].boxes[m[2]] !== undefined) {
      openOp(Number(m[1]), kernels[m[1]].boxes[m[2]]);
      return;
    }
    m = /^ov_k(\d+)$/.exec(g.id);
    if (m) show(opening("k" + m[1]));
  });

  // -- start: the kernel a problem names, the only kernel, or the overview --------------------------
  var problem = document.querySelector("#problems a.node-link");
  var pictures = Object.keys(panes).filter(function (t) { return t !== "overview" && !/ops$/.test(t); });
  if (problem) select(Number(problem.dataset.kernel), problem.dataset.node);
  else show(pictures.length === 1 ? opening(pictures[0]) : "overview");
})();
