// python -m parity view: the page's script (inlined by parity/view/page.py). It only draws: every item's place in
// the fully unfolded list, its depth and each edge's lane come from Python (parity/view/layout.py).
(function () {
  "use strict";
  const DATA = JSON.parse(document.getElementById("data").textContent);
  const items = DATA.items, edges = DATA.edges, meta = DATA.meta;
  const ROW_H = 24, INDENT = 18, GUTTER = 150, ROW_W = 520;
  const $ = (id) => document.getElementById(id);
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  const num = (x) => (x === null || x === undefined ? "–" : Math.abs(x) >= 1e4 || (x !== 0 && Math.abs(x) < 1e-3) ? x.toExponential(3) : String(+x.toPrecision(4)));

  // Folded by default: only the step and the model are open, so their top-level modules show.
  const folded = new Uint8Array(items.length);
  items.forEach((it, i) => { if (it.k === "g" && it.d >= 2) folded[i] = 1; });
  let matches = new Set(), matchList = [], matchAt = -1, selected = -1;

  // One colour scale for every check: r = error / tolerance, green below 1, orange to red above.
  function colour(r) {
    if (r === null || r === undefined) return "#c9ced6";
    if (r <= 1) { const t = Math.min(1, Math.max(0, (Math.log10(Math.max(r, 1e-12)) + 6) / 6)); return `hsl(${140 - 75 * t},60%,45%)`; }
    const t = Math.min(1, Math.log10(r) / 3);
    return `hsl(${30 - 30 * t},85%,${50 - 8 * t}%)`;
  }

  function openTo(i) { for (let p = items[i].p; p >= 0; p = items[p].p) folded[p] = 0; }
  function rep(i) { let r = i; for (let p = items[i].p; p >= 0; p = items[p].p) if (folded[p]) r = p; return r; }
  function visible() {
    const rows = [];
    for (let i = 0; i < items.length; ) { rows.push(i); i = items[i].k === "g" && folded[i] ? items[i].end : i + 1; }
    return rows;
  }

  function label(it, i) {
    const chip = `<span class="chip" style="background:${colour(it.r)}"></span>`;
    if (it.k === "g") {
      const caret = it.end > i + 1 ? (folded[i] ? "▸" : "▾") : "·";
      return `${caret} ${chip}${esc(it.key)} <span class="dim">${esc(it.type)} · ${it.nn} node${it.nn === 1 ? "" : "s"}</span>`;
    }
    if (it.k === "p") return `${chip}${esc(it.name)} <span class="dim">parameter ${esc(JSON.stringify(it.shape))}</span>`;
    const g = it.g && it.g.norm !== undefined ? ` |grad| ${num(it.g.norm)}` : "";
    return `<b>${esc(it.op)}</b> <span class="dim">#${it.i} ${esc(JSON.stringify(it.out[0]))}${g}</span>`;
  }

  const world = $("world"), rowsEl = $("rows"), svg = $("edges");
  let view = { x: 10, y: 10, s: 1 };
  function place() { world.style.transform = `translate(${view.x}px,${view.y}px) scale(${view.s})`; }

  let yOf = new Int32Array(items.length);
  function render() {
    const rows = visible();
    yOf.fill(-1);
    const parts = [];
    rows.forEach((i, y) => {
      yOf[i] = y;
      const it = items[i];
      const cls = ["row", it.k];
      if (it.culprit) cls.push("culprit");
      if (it.pl) cls.push("planted");
      if (matches.has(i)) cls.push("match");
      if (i === selected) cls.push("sel");
      parts.push(`<div class="${cls.join(" ")}" data-i="${i}" style="top:${y * ROW_H}px;left:${GUTTER + it.d * INDENT}px">${label(it, i)}</div>`);
    });
    rowsEl.innerHTML = parts.join("");
    const seen = new Set(), paths = [];
    for (const [a, b, lane] of edges) {
      const ra = rep(a), rb = rep(b);
      if (ra === rb) continue;
      const key = ra * items.length + rb;
      if (seen.has(key)) continue;
      seen.add(key);
      const ya = yOf[ra] * ROW_H + 10, yb = yOf[rb] * ROW_H + 10;
      const xa = GUTTER + items[ra].d * INDENT, xb = GUTTER + items[rb].d * INDENT;
      const bx = Math.min(xa, xb) - 8 - lane * 5;
      paths.push(`M${xa} ${ya}C${bx} ${ya} ${bx} ${yb} ${xb} ${yb}`);
    }
    svg.innerHTML = `<path d="${paths.join("")}"/>`;
    svg.setAttribute("width", GUTTER + ROW_W + 400);
    svg.setAttribute("height", rows.length * ROW_H + 20);
    $("shown").textContent = `${rows.length} rows shown`;
  }

  function hist(h) {
    if (!h || !h.hist) return "";
    const m = Math.max(...h.hist, 1), w = 8;
    const bars = h.hist.map((c, k) => `<rect x="${k * w}" y="${30 - (30 * c) / m}" width="${w - 1}" height="${(30 * c) / m}"/>`).join("");
    return `<svg class="hist" width="${h.hist.length * w}" height="30">${bars}</svg>`;
  }
  function stats(title, h) {
    if (!h) return `<p>${title}: none (no gradient reached it)</p>`;
    const nf = h.nonfinite ? `, ${h.nonfinite} non-finite` : "";
    return `<p><b>${title}</b> (${h.n} entries${nf})</p><table><tr><th>min</th><th>max</th><th>mean</th><th>norm</th></tr>` +
      `<tr><td>${num(h.min)}</td><td>${num(h.max)}</td><td>${num(h.mean)}</td><td>${num(h.norm)}</td></tr></table>${hist(h)}`;
  }
  function checks(list) {
    if (!list || !list.length) return "<p>No comparison here: inside a module the two graphs differ, so nodes show statistics only.</p>";
    const rows = list.map((c) => `<tr><td><span class="chip" style="background:${colour(c.r)}"></span>${esc(c.w)}</td><td>${num(c.rel)}</td>` +
      `<td>${c.ulp === null ? "–" : num(c.ulp)}</td><td>${num(c.v)} / ${num(c.lim)}</td><td>${c.ok ? "ok" : "<b>over</b>"}</td></tr>`).join("");
    return `<table><tr><th>tensor</th><th>rel. error</th><th>ULPs</th><th>judged / limit (${esc(list[0].rule)})</th><th></th></tr>${rows}</table>`;
  }
  function details(i) {
    const it = items[i];
    let h = "";
    if (it.k === "g") {
      h = `<h2>${esc(it.key)}</h2><p>${esc(it.type)} · ${it.nn} node${it.nn === 1 ? "" : "s"}${it.culprit ? " · <b>the first divergence along the backward</b>" : ""}</p>` + checks(it.checks);
    } else if (it.k === "p") {
      h = `<h2>${esc(it.name)}</h2><p>parameter ${esc(JSON.stringify(it.shape))} ${esc(it.dtype)}</p>` + checks(it.checks);
    } else {
      const saved = it.s.map((s) => `<tr><td>${esc(s[0])}</td><td>${esc(JSON.stringify(s[1]))} ${esc(s[2])}</td><td>${s[3]} B</td></tr>`).join("");
      const total = it.s.reduce((a, s) => a + s[3], 0);
      h = `<h2>${esc(it.op)}Backward <span class="dim">node #${it.i}</span></h2>` +
        (it.pl ? `<p><b>planted fault:</b> its backward's gradients are multiplied by ${esc(meta.plant_factor)}</p>` : "") +
        `<p>formula: <a href="${esc(meta.doc)}#${esc(it.a)}" target="_blank">docs/backprop.md#${esc(it.a)}</a></p>` +
        `<table><tr><th>inputs</th><td>${it.in.map((s) => esc(JSON.stringify(s[0]) + " " + s[1])).join("<br>")}</td></tr>` +
        `<tr><th>output</th><td>${esc(JSON.stringify(it.out[0]) + " " + it.out[1])}</td></tr>` +
        `<tr><th>time</th><td>forward ${num(it.tf * 1e3)} ms, backward ${it.tb === null || it.tb === undefined ? "–" : num(it.tb * 1e3) + " ms"}</td></tr></table>` +
        stats("forward value", it.v) + stats("gradient at its output", it.g) +
        `<p><b>saved for the backward</b>: ${it.s.length} arrays, ${total} bytes</p><table>${saved}</table>`;
    }
    $("panel").innerHTML = h;
  }

  function toggle(i) { if (items[i].k === "g" && items[i].end > i + 1) folded[i] ^= 1; }
  rowsEl.addEventListener("click", (e) => {
    const el = e.target.closest(".row");
    if (!el || moved) return;
    const i = +el.dataset.i;
    toggle(i);
    selected = i;
    details(i);
    render();
  });

  function reveal(i) {
    openTo(i);
    render();
    const vp = $("viewport").getBoundingClientRect();
    view.y = vp.height / 3 - yOf[i] * ROW_H * view.s;
    view.x = 10;
    place();
  }
  function search(q) {
    q = q.trim().toLowerCase();
    matches = new Set();
    if (q) items.forEach((it, i) => {
      const text = it.k === "n" ? it.op : it.k === "g" ? it.key + " " + it.type : it.name;
      if (text.toLowerCase().includes(q)) { matches.add(i); openTo(i); }
    });
    matchList = [...matches];
    matchAt = matchList.length ? 0 : -1;
    $("search-count").textContent = q ? `${matchList.length} matches` : "";
    if (matchAt >= 0) reveal(matchList[0]); else render();
  }
  let timer = null;
  $("search").addEventListener("input", (e) => { clearTimeout(timer); timer = setTimeout(() => search(e.target.value), 120); });
  $("search").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && matchList.length) { matchAt = (matchAt + 1) % matchList.length; reveal(matchList[matchAt]); }
  });
  $("expand-all").addEventListener("click", () => { folded.fill(0); render(); });
  $("collapse-all").addEventListener("click", () => { items.forEach((it, i) => { folded[i] = it.k === "g" && it.d >= 2 ? 1 : 0; }); render(); });
  $("fit").addEventListener("click", () => { view = { x: 10, y: 10, s: 1 }; place(); });

  // Pan by dragging, zoom with the wheel around the pointer.
  const vpEl = $("viewport");
  let drag = null, moved = false;
  vpEl.addEventListener("mousedown", (e) => { drag = { x: e.clientX, y: e.clientY, vx: view.x, vy: view.y }; moved = false; vpEl.classList.add("dragging"); });
  window.addEventListener("mousemove", (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) moved = true;
    view.x = drag.vx + dx; view.y = drag.vy + dy; place();
  });
  window.addEventListener("mouseup", () => { drag = null; vpEl.classList.remove("dragging"); setTimeout(() => { moved = false; }, 0); });
  vpEl.addEventListener("wheel", (e) => {
    e.preventDefault();
    const r = vpEl.getBoundingClientRect(), px = e.clientX - r.left, py = e.clientY - r.top;
    const s = Math.min(4, Math.max(0.05, view.s * Math.exp(-e.deltaY * 0.0015)));
    view.x = px - ((px - view.x) * s) / view.s; view.y = py - ((py - view.y) * s) / view.s; view.s = s; place();
  }, { passive: false });

  // The header: counts, the first divergence, the planted fault.
  $("node-count").textContent = String(meta.nodes);
  const div = $("divergence");
  if (meta.divergence !== null && meta.divergence !== undefined) {
    const it = items[meta.divergence];
    const bad = it.checks.filter((c) => !c.ok).map((c) => `${esc(c.w)} ${num(c.rel)}`).join(", ");
    div.className = "bad";
    div.innerHTML = `First divergence along the backward: <a id="culprit-link">${esc(it.key)}</a> <span class="dim">(${esc(it.type)})</span>: ` +
      `its output gradient agrees with ${esc(meta.reference)}, what it sends back does not${bad ? " (" + bad + ")" : " (its parameters' gradients)"}. ${meta.failing} checks over the tolerance in all.`;
    $("culprit-link").addEventListener("click", () => { selected = meta.divergence; details(selected); reveal(selected); });
    openTo(meta.divergence);
    folded[meta.divergence] = 0; // what it holds: where the error enters
  } else if (meta.divergence_key) {
    div.className = "bad";
    div.textContent = `First divergence along the backward: ${meta.divergence_key}, outside the part drawn (--modules ${meta.modules}). ` +
      `${meta.failing} checks over the tolerance in all.`;
  } else {
    div.className = meta.failing ? "bad" : "good";
    div.textContent = meta.failing ? `${meta.failing} checks over the tolerance, with no module where the error enters (a forward difference?)` :
      `Every module boundary and parameter gradient agrees with ${meta.reference} within the tolerance.`;
  }
  render();
  if (meta.divergence !== null && meta.divergence !== undefined) { selected = meta.divergence; details(selected); reveal(selected); }
  place();
  performance.mark("ready");
  document.documentElement.setAttribute("data-ready", String(Math.round(performance.now())));
})();
