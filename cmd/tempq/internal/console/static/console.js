// tempq console: refreshes the live parts of a page (server-rendered
// fragments) and draws the calls chart. No framework, no build step.
"use strict";

(() => {
  const every = Number(document.body.dataset.refresh) || 2000;
  const conn = document.getElementById("conn");

  // Each element with data-live-url is replaced by the fragment at that
  // URL, every `every` ms, one request at a time; not while the tab is
  // hidden, since each refresh costs API calls.
  async function refresh(el) {
    if (document.hidden) {
      setTimeout(() => refresh(el), every);
      return;
    }
    try {
      const r = await fetch(el.dataset.liveUrl, { cache: "no-store" });
      if (r.ok) {
        el.innerHTML = await r.text();
      }
      conn.hidden = r.ok;
      if (!r.ok) conn.textContent = "error " + r.status + ": retrying";
    } catch (e) {
      conn.textContent = "disconnected: retrying";
      conn.hidden = false;
    }
    setTimeout(() => refresh(el), every);
  }
  for (const el of document.querySelectorAll("[data-live-url]")) {
    setTimeout(() => refresh(el), every);
  }

  const chart = document.getElementById("chart");
  if (chart) calls(chart);

  // calls polls the cumulative counts each second and charts the rate of
  // each operation over the last minute.
  function calls(svg) {
    const keep = 61; // samples: a minute of rates
    const samples = [];
    const palette = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777", "#4b5563", "#65a30d"];
    const colours = new Map();
    const colour = (op) => {
      if (!colours.has(op)) colours.set(op, palette[colours.size % palette.length]);
      return colours.get(op);
    };
    const ns = "http://www.w3.org/2000/svg";

    async function poll() {
      try {
        const r = await fetch("/ui/calls.json", { cache: "no-store" });
        if (!r.ok) throw new Error("status " + r.status);
        const d = await r.json();
        samples.push({ at: d.at, counts: d.served || d.console || {} });
        if (samples.length > keep) samples.shift();
        draw(d.price_per_million);
        conn.hidden = true;
      } catch (e) {
        conn.textContent = "disconnected: retrying";
        conn.hidden = false;
      }
      setTimeout(poll, 1000);
    }

    // rates returns, for each operation, its calls per second between
    // consecutive samples.
    function rates() {
      const ops = new Set();
      for (const s of samples) for (const op of Object.keys(s.counts)) ops.add(op);
      const out = new Map();
      for (const op of [...ops].sort()) {
        const series = [];
        for (let i = 1; i < samples.length; i++) {
          const dt = (samples[i].at - samples[i - 1].at) / 1000;
          const n = (samples[i].counts[op] || 0) - (samples[i - 1].counts[op] || 0);
          series.push(dt > 0 ? Math.max(n, 0) / dt : 0);
        }
        out.set(op, series);
      }
      return out;
    }

    function draw(price) {
      const rs = rates();
      const last = samples[samples.length - 1].counts;
      let top = 1, now = 0, total = 0;
      for (const series of rs.values()) {
        for (const v of series) top = Math.max(top, v);
        if (series.length) now += series[series.length - 1];
      }
      for (const n of Object.values(last)) total += n;
      document.getElementById("rate-total").textContent = now.toFixed(1);
      document.getElementById("cost-hour").textContent = (now * 3600 * price / 1e6).toFixed(4);
      document.getElementById("calls-total").textContent = String(total);

      svg.replaceChildren();
      const w = 600, h = 200, step = w / (keep - 1);
      for (const [op, series] of rs) {
        if (!series.length) continue;
        const pts = series.map((v, i) => {
          const x = w - (series.length - 1 - i) * step;
          return x.toFixed(1) + "," + (h - (v / top) * (h - 10)).toFixed(1);
        });
        const line = document.createElementNS(ns, "polyline");
        line.setAttribute("points", pts.join(" "));
        line.setAttribute("fill", "none");
        line.setAttribute("stroke", colour(op));
        line.setAttribute("stroke-width", "2");
        line.setAttribute("vector-effect", "non-scaling-stroke");
        svg.appendChild(line);
      }
      document.getElementById("chart-top").textContent = top.toFixed(1);

      const rows = document.getElementById("call-rows");
      rows.replaceChildren();
      for (const [op, series] of rs) {
        const tr = document.createElement("tr");
        tr.dataset.op = op;
        const name = document.createElement("td");
        const swatch = document.createElement("span");
        swatch.className = "swatch";
        swatch.style.background = colour(op);
        name.append(swatch, op);
        const rate = document.createElement("td");
        rate.className = "n rate";
        rate.textContent = (series.length ? series[series.length - 1] : 0).toFixed(1);
        const sum = document.createElement("td");
        sum.className = "n total";
        sum.textContent = String(last[op] || 0);
        tr.append(name, rate, sum);
        rows.appendChild(tr);
      }
    }
    poll();
  }
})();
