/* simhash-filter report: decodes the embedded data and draws the report.
 *
 * The data sits in inert script elements (type application/octet-stream) as base64 of gzip-compressed JSON:
 * the summary in #simhash-data, decoded on load; the pairs' details in #simhash-chunk-N, each decoded on first
 * use and cached. Lists are paged: only the rows of the page on screen exist in the DOM.
 *
 * Everything that comes from the crawl (URLs, hosts, texts, feature names) reaches the DOM as text nodes,
 * never as markup. Links get an href only for http(s) URLs.
 */
(function () {
  "use strict";

  const PAGE_SIZE = 50;          // rows (or clusters) per page of every list
  const MEMBERS_STEP = 200;      // members of an expanded cluster drawn at once ("show more" for the rest)
  const FEATURES_SHOWN = 60;     // feature rows drawn before "show all"
  const FILTER_DELAY = 150;      // ms after the last key press before a filter runs
  const SAME = 0, DEL = 1, INS = 2;

  /* ------------------------------------------------------------------ DOM and formatting helpers */

  function $(id) {
    return document.getElementById(id);
  }

  // An element with attributes (class, title, data-*, ...) and children (strings become text nodes).
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    if (attrs) {
      for (const [key, value] of Object.entries(attrs)) {
        if (value === null || value === undefined || value === false) continue;
        if (key === "class") node.className = value;
        else if (key === "text") node.textContent = value;
        else node.setAttribute(key, value === true ? "" : String(value));
      }
    }
    append(node, children);
    return node;
  }

  // Appends children to node: nodes as they are, strings and numbers as text, null and arrays handled.
  function append(node, children) {
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      if (Array.isArray(child)) append(node, child);
      else if (child instanceof Node) node.appendChild(child);
      else node.appendChild(document.createTextNode(String(child)));
    }
    return node;
  }

  const NUMBER = new Intl.NumberFormat("en-US");

  function fmtInt(n) {
    return typeof n === "number" && isFinite(n) ? NUMBER.format(n) : "—";
  }

  function fmtFloat(x, digits) {
    return typeof x === "number" && isFinite(x) ? x.toFixed(digits === undefined ? 3 : digits) : "—";
  }

  function fmtShare(x) {
    if (typeof x !== "number" || !isFinite(x)) return "—";
    const pct = x * 100;
    return (pct !== 0 && Math.abs(pct) < 1 ? pct.toFixed(2) : pct.toFixed(1)) + "%";
  }

  // A byte count in decimal units: 999 B, 12.3 kB, 4.56 MB, ...
  function fmtBytes(n) {
    if (typeof n !== "number" || !isFinite(n)) return "—";
    const units = ["B", "kB", "MB", "GB", "TB", "PB"];
    let value = n, unit = 0;
    while (Math.abs(value) >= 1000 && unit < units.length - 1) {
      value /= 1000;
      unit += 1;
    }
    if (unit === 0) return NUMBER.format(value) + " B";
    return (Math.abs(value) < 10 ? value.toFixed(2) : Math.abs(value) < 100 ? value.toFixed(1) : value.toFixed(0)) +
      " " + units[unit];
  }

  function fmtWeight(w) {
    if (typeof w !== "number" || !isFinite(w)) return "—";
    return w === 0 ? "0" : String(Number(w.toPrecision(4)));
  }

  function ratio(part, whole) {
    return whole ? part / whole : NaN;
  }

  // A page's URL as a link when it is http(s), else as plain text; the full URL in the tooltip.
  function urlNode(url, className) {
    const text = String(url);
    const cls = "url" + (className ? " " + className : "");
    if (/^https?:\/\//i.test(text)) {
      return el("a", {class: cls, href: text, rel: "noopener noreferrer", target: "_blank", title: text}, text);
    }
    return el("span", {class: cls + " not-link", title: text}, text);
  }

  /* ------------------------------------------------------------------ decoding the embedded data */

  // The bytes of base64 text (native decoder when the browser has one).
  function base64Bytes(text) {
    const clean = text.replace(/\s+/g, "");
    if (typeof Uint8Array.fromBase64 === "function") return Uint8Array.fromBase64(clean);
    const binary = atob(clean);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    return bytes;
  }

  // The JSON value held by the data block with this id (base64 of gzip).
  async function decodeBlock(id) {
    const node = $(id);
    if (!node) throw new Error("the report has no data block " + id);
    const stream = new Blob([base64Bytes(node.textContent)]).stream()
      .pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }

  const chunkCache = new Map();

  // Chunk i of the pairs' details, decoded once (the promise is cached).
  function loadChunk(i) {
    let promise = chunkCache.get(i);
    if (!promise) {
      promise = decodeBlock("simhash-chunk-" + i);
      chunkCache.set(i, promise);
    }
    return promise;
  }

  /* ------------------------------------------------------------------ the data, with lookups */

  let S = null;           // the summary's parts, normalised (see init)
  let haystack = null;    // lower-case "url host" of each page, built on the first filter

  function pageUrl(id) {
    const page = S.pages[id];
    return page ? String(page[0]) : "(unknown page " + id + ")";
  }

  function pageHost(id) {
    const page = S.pages[id];
    const host = page ? S.hosts[page[1]] : undefined;
    return host === undefined || host === null ? "" : String(host);
  }

  function pageBytes(id) {
    const page = S.pages[id];
    return page ? page[2] : null;
  }

  function searchText(id) {
    if (!haystack) {
      haystack = new Array(S.pages.length);
      for (let i = 0; i < S.pages.length; i++) haystack[i] = (pageUrl(i) + "\u0001" + pageHost(i)).toLowerCase();
    }
    return haystack[id] || "";
  }

  /* ------------------------------------------------------------------ pager */

  // Paging controls drawn into each of `nodes`; draw(start, end) draws the rows of the current page.
  function makePager(nodes, draw) {
    const pager = {page: 0, count: 0};
    pager.pages = function () {
      return Math.max(1, Math.ceil(pager.count / PAGE_SIZE));
    };
    pager.go = function (page) {
      pager.page = Math.min(Math.max(0, page), pager.pages() - 1);
      pager.refresh();
    };
    pager.reset = function (count) {
      pager.count = count;
      pager.go(0);
    };
    pager.refresh = function () {
      const start = pager.page * PAGE_SIZE;
      draw(start, Math.min(pager.count, start + PAGE_SIZE));
      for (const node of nodes) drawControls(node);
    };
    function button(cls, label, title, target, disabled) {
      const b = el("button", {type: "button", class: cls, title: title, disabled: disabled}, label);
      b.addEventListener("click", () => pager.go(target));
      return b;
    }
    function drawControls(node) {
      const last = pager.pages() - 1, page = pager.page;
      node.hidden = pager.count <= PAGE_SIZE;
      node.replaceChildren(
        button("first", "«", "First page", 0, page === 0),
        button("prev", "‹ prev", "Previous page", page - 1, page === 0),
        el("span", {class: "page-info"}, "page " + fmtInt(page + 1) + " of " + fmtInt(last + 1)),
        button("next", "next ›", "Next page", page + 1, page >= last),
        button("last", "»", "Last page", last, page >= last),
      );
    }
    return pager;
  }

  /* ------------------------------------------------------------------ labels (calibration) */

  const labels = new Map();   // pair id -> {url_a, url_b, duplicate}
  let foreignLabels = {};     // saved entries that do not match this report's pairs: kept, not shown
  let storageKey = "";
  let storageWorks = true;

  // The labels saved for this report (same source and time), if the browser keeps storage for this file.
  // An entry counts only when its URLs are those of the pair with its id here (another report may share the key).
  function loadLabels() {
    storageKey = "simhash-filter-labels:" + String(S.meta.source) + "|" + String(S.meta.generated);
    try {
      const saved = JSON.parse(window.localStorage.getItem(storageKey) || "{}");
      for (const [id, label] of Object.entries(saved && typeof saved === "object" ? saved : {})) {
        const info = pairInfo.get(Number(id));
        if (info && label && label.url_a === pageUrl(info.a) && label.url_b === pageUrl(info.b) &&
            typeof label.duplicate === "boolean") {
          labels.set(Number(id), {url_a: label.url_a, url_b: label.url_b, duplicate: label.duplicate});
        } else {
          foreignLabels[id] = label;
        }
      }
    } catch (err) {
      storageWorks = false;
      foreignLabels = {};
    }
  }

  function saveLabels() {
    if (!storageWorks) return;
    try {
      const all = Object.assign({}, foreignLabels, Object.fromEntries(labels));
      window.localStorage.setItem(storageKey, JSON.stringify(all));
    } catch (err) {
      storageWorks = false;   // refused or full: the labels stay in memory until the page closes
    }
  }

  // Marks pair `id` (true: near-duplicate, false: distinct, null: no label) and redraws what shows it.
  function setLabel(id, pair, duplicate) {
    if (duplicate === null) labels.delete(id);
    else labels.set(id, {url_a: pageUrl(pair.a), url_b: pageUrl(pair.b), duplicate: duplicate});
    saveLabels();
    drawLabelsBar();
    drawPairLabel(id);
    clustersPager.refresh();
    nearPager.refresh();
  }

  function drawLabelsBar() {
    let dup = 0;
    for (const label of labels.values()) if (label.duplicate) dup += 1;
    const n = labels.size;
    $("labels-count").textContent = fmtInt(n) + (n === 1 ? " labelled pair" : " labelled pairs") +
      (n ? " (" + fmtInt(dup) + " near-duplicate, " + fmtInt(n - dup) + " distinct)" : "") +
      (storageWorks ? "" : " · kept in memory only: this browser does not store data for this file");
    $("labels-export").disabled = n === 0;
    $("pair-labels-count").textContent = fmtInt(n) + " labelled";
    $("pair-labels-export").disabled = n === 0;
  }

  // A small badge showing the label of pair `id`, or null.
  function labelBadge(id) {
    const label = id >= 0 ? labels.get(id) : undefined;
    if (!label) return null;
    return label.duplicate
      ? el("span", {class: "badge dup", title: "You labelled this pair a near-duplicate"}, "✓ near-duplicate")
      : el("span", {class: "badge distinct", title: "You labelled this pair distinct"}, "≠ distinct");
  }

  // Downloads the labels as JSON Lines, one {"url_a", "url_b", "duplicate"} object a line, by pair id.
  function exportLabels() {
    const ids = Array.from(labels.keys()).sort((x, y) => x - y);
    const text = ids.map((id) => {
      const label = labels.get(id);
      return JSON.stringify({url_a: label.url_a, url_b: label.url_b, duplicate: label.duplicate}) + "\n";
    }).join("");
    const url = URL.createObjectURL(new Blob([text], {type: "application/x-ndjson"}));
    const link = el("a", {href: url, download: "labels.jsonl", hidden: true});
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  /* ------------------------------------------------------------------ header and overview */

  function drawHeader() {
    const m = S.meta;
    const items = [
      ["Source", m.source],
      ["Generated", m.generated],
      ["Version", m.version],
      ["Model", m.model],
      ["k", m.k],
      ["Min. similarity", typeof m.min_similarity === "number" ? fmtFloat(m.min_similarity, 2) : m.min_similarity],
    ];
    const dl = $("meta");
    for (const [name, value] of items) {
      if (value === null || value === undefined || value === "") continue;
      dl.appendChild(el("div", {class: "meta-item"}, el("dt", null, name), el("dd", null, String(value))));
    }
  }

  function card(key, label, value, sub) {
    return el("div", {class: "card", "data-key": key},
      el("div", {class: "value"}, value), el("div", {class: "label"}, label),
      sub ? el("div", {class: "sub"}, sub) : null);
  }

  function drawOverview() {
    const m = S.meta;
    const kind = m.bytes_kind ? " of " + m.bytes_kind : "";
    $("summary-numbers").replaceChildren(
      card("pages", "pages", fmtInt(m.pages)),
      card("kept", "kept", fmtInt(m.kept), fmtShare(ratio(m.kept, m.pages)) + " of pages"),
      card("near_duplicates", "near-duplicates", fmtInt(m.near_duplicates),
        fmtShare(ratio(m.near_duplicates, m.pages)) + " of pages"),
      card("skipped", "skipped", fmtInt(m.skipped), fmtShare(ratio(m.skipped, m.pages)) + " of pages"),
      card("malformed", "malformed", fmtInt(m.malformed)),
      card("bytes_saved", "saved" + kind, fmtBytes(m.bytes_saved),
        fmtShare(ratio(m.bytes_saved, m.bytes_total)) + " of " + fmtBytes(m.bytes_total)),
      card("clusters", "clusters", fmtInt(S.clusters.length)),
      card("near_misses", "near misses", fmtInt(S.nearMisses.length)),
      card("pairs", "pairs compared", fmtInt(m.pairs),
        typeof m.pairs_with_detail === "number" ? fmtInt(m.pairs_with_detail) + " with detail" : null),
    );
    const notes = Array.isArray(m.notes) ? m.notes : [];
    $("notes").replaceChildren(...notes.map((note) => el("li", null, String(note))));
    $("notes").hidden = notes.length === 0;
    for (const chart of document.querySelectorAll(".chart")) chart.hidden = !chart.firstElementChild;
  }

  /* ------------------------------------------------------------------ clusters */

  let clusterOrder = [];   // cluster indices, largest first
  let clusterView = [];    // the ones passing the filter
  let clusterQuery = "";
  const expanded = new Map();   // cluster index -> members drawn
  let clustersPager = null;

  function clusterMembers(ci) {
    return S.clusters[ci][1];
  }

  function clusterSaved(ci) {
    let total = 0;
    for (const member of clusterMembers(ci)) total += pageBytes(member[0]) || 0;
    return total;
  }

  function matches(id) {
    return clusterQuery !== "" && searchText(id).includes(clusterQuery);
  }

  function clusterMatches(ci) {
    if (matches(S.clusters[ci][0])) return true;
    for (const member of clusterMembers(ci)) if (matches(member[0])) return true;
    return false;
  }

  function filterClusters() {
    clusterView = clusterQuery ? clusterOrder.filter(clusterMatches) : clusterOrder;
    const total = clusterOrder.length;
    $("clusters-count").textContent = clusterQuery
      ? fmtInt(clusterView.length) + " of " + fmtInt(total) + " clusters match"
      : fmtInt(total) + (total === 1 ? " cluster" : " clusters");
    clustersPager.reset(clusterView.length);
  }

  function compareButton(pairId) {
    if (!(pairId >= 0)) {
      return el("span", {class: "no-detail", title: "The report holds no texts for this pair (beyond its cap)"},
        "no detail");
    }
    return el("button", {type: "button", class: "compare", "data-pair": pairId, title: "Compare the two pages"},
      "compare");
  }

  function clusterRow(ci) {
    const [root, members] = S.clusters[ci];
    const open = expanded.has(ci);
    let labelled = 0;
    for (const member of members) if (labels.has(member[4])) labelled += 1;
    const head = el("div", {class: "cluster-head"},
      el("button", {type: "button", class: "toggle", "aria-expanded": open ? "true" : "false",
        title: open ? "Hide the members" : "Show the members"}, open ? "▾" : "▸"),
      el("span", {class: "root"}, urlNode(pageUrl(root), matches(root) ? "match" : null)),
      el("span", {class: "labelled"}, labelled ? el("span", {class: "badge", title: "pairs of this cluster you labelled"},
        fmtInt(labelled) + " labelled") : null),
      el("span", {class: "host", title: pageHost(root)}, pageHost(root)),
      el("span", {class: "size", title: "the kept page and its near-duplicates"},
        fmtInt(members.length + 1) + " pages"),
      el("span", {class: "saved", title: "bytes of the near-duplicates"}, fmtBytes(clusterSaved(ci)) + " saved"),
    );
    const row = el("div", {class: "cluster" + (open ? " open" : ""), "data-cluster": ci}, head);
    if (open) row.appendChild(membersTable(ci));
    return row;
  }

  function membersTable(ci) {
    const [root, members] = S.clusters[ci];
    const shown = Math.min(members.length, expanded.get(ci));
    const body = el("tbody");
    for (let i = 0; i < shown; i++) {
      const [id, target, distance, similarity, pairId] = members[i];
      body.appendChild(el("tr", {class: "member" + (matches(id) ? " match" : "")},
        el("td", {class: "url-cell"}, urlNode(pageUrl(id))),
        el("td", {class: "host"}, pageHost(id)),
        el("td", {class: "num"}, fmtInt(distance)),
        el("td", {class: "num"}, fmtFloat(similarity)),
        el("td", {class: "url-cell"}, target === root ? el("span", {class: "muted"}, "the kept page")
          : urlNode(pageUrl(target), "target")),
        el("td", {class: "label-cell"}, labelBadge(pairId)),
        el("td", null, compareButton(pairId)),
      ));
    }
    const table = el("table", {class: "data members"},
      el("thead", null, el("tr", null, el("th", null, "Near-duplicate"), el("th", null, "Host"),
        el("th", {class: "num"}, "Distance"), el("th", {class: "num"}, "Similarity"),
        el("th", null, "Duplicate of"), el("th", null, "Label"), el("th"))),
      body);
    const wrap = el("div", {class: "members-wrap"}, table);
    if (shown < members.length) {
      wrap.appendChild(el("button", {type: "button", class: "more", "data-more": ci},
        "show " + fmtInt(Math.min(MEMBERS_STEP, members.length - shown)) + " more of " +
        fmtInt(members.length - shown)));
    }
    return wrap;
  }

  function drawClusters(start, end) {
    const rows = [];
    for (let i = start; i < end; i++) rows.push(clusterRow(clusterView[i]));
    if (!rows.length) {
      rows.push(el("p", {class: "empty"}, clusterQuery ? "No cluster has a page matching the filter."
        : "No near-duplicates were found."));
    }
    $("clusters-list").replaceChildren(...rows);
  }

  // Redraws one cluster row in place (after expanding or collapsing it).
  function redrawCluster(ci) {
    const old = $("clusters-list").querySelector('.cluster[data-cluster="' + ci + '"]');
    if (old) old.replaceWith(clusterRow(ci));
  }

  function setupClusters() {
    clustersPager = makePager([$("clusters-pager-top"), $("clusters-pager")], drawClusters);
    const list = $("clusters-list");
    list.addEventListener("click", (event) => {
      const target = event.target;
      if (!(target instanceof Element)) return;
      const more = target.closest("button.more");
      if (more) {
        const ci = Number(more.dataset.more);
        expanded.set(ci, expanded.get(ci) + MEMBERS_STEP);
        redrawCluster(ci);
        return;
      }
      if (target.closest("a, button.compare, .members-wrap")) return;
      const row = target.closest(".cluster");
      if (!row || !target.closest(".cluster-head")) return;
      const ci = Number(row.dataset.cluster);
      if (expanded.has(ci)) expanded.delete(ci);
      else expanded.set(ci, MEMBERS_STEP);
      redrawCluster(ci);
      const toggle = list.querySelector('.cluster[data-cluster="' + ci + '"] .toggle');
      if (toggle && target.closest(".toggle")) toggle.focus();
    });
    onFilterInput("clusters-filter", (value) => {
      clusterQuery = value;
      filterClusters();
    });
    filterClusters();
  }

  /* ------------------------------------------------------------------ near misses */

  let nearPager = null;

  function drawNearMisses(start, end) {
    const rows = [];
    for (let i = start; i < end; i++) {
      const [id, nearest, distance, similarity, pairId] = S.nearMisses[i];
      rows.push(el("tr", null,
        el("td", {class: "url-cell"}, urlNode(pageUrl(id))),
        el("td", {class: "host"}, pageHost(id)),
        el("td", {class: "url-cell"}, urlNode(pageUrl(nearest))),
        el("td", {class: "num"}, fmtInt(distance)),
        el("td", {class: "num"}, fmtFloat(similarity)),
        el("td", {class: "label-cell"}, labelBadge(pairId)),
        el("td", null, compareButton(pairId)),
      ));
    }
    $("near-misses-table").tBodies[0].replaceChildren(...rows);
  }

  function setupNearMisses() {
    const n = S.nearMisses.length;
    $("near-misses").hidden = n === 0;
    $("nav-near-misses").hidden = n === 0;
    $("near-misses-count").textContent = fmtInt(n) + (n === 1 ? " near miss" : " near misses");
    nearPager = makePager([$("near-misses-pager")], drawNearMisses);
    nearPager.reset(n);
  }

  /* ------------------------------------------------------------------ hosts */

  const HOST_COLUMNS = [
    {label: "Host", text: true, get: (r) => (S.hosts[r[0]] === undefined ? "" : String(S.hosts[r[0]]))},
    {label: "Pages", get: (r) => r[1]},
    {label: "Kept", get: (r) => r[2]},
    {label: "Near-duplicates", get: (r) => r[3]},
    {label: "Share near-duplicates", get: (r) => (r[1] ? r[3] / r[1] : 0), fmt: fmtShare},
    {label: "Skipped", get: (r) => r[4]},
    {label: "Bytes saved", get: (r) => r[5], fmt: fmtBytes},
  ];
  let hostSort = {column: 3, descending: true};
  let hostView = [];
  let hostQuery = "";
  let hostsPager = null;

  function sortHosts() {
    const column = HOST_COLUMNS[hostSort.column], sign = hostSort.descending ? -1 : 1;
    const rows = S.hostStats.filter((r) => !hostQuery || HOST_COLUMNS[0].get(r).toLowerCase().includes(hostQuery));
    rows.sort((x, y) => {
      const a = column.get(x), b = column.get(y);
      const order = column.text ? String(a).localeCompare(String(b)) : (a || 0) - (b || 0);
      return sign * order || x[0] - y[0];
    });
    hostView = rows;
    $("hosts-count").textContent = hostQuery
      ? fmtInt(rows.length) + " of " + fmtInt(S.hostStats.length) + " hosts"
      : fmtInt(rows.length) + (rows.length === 1 ? " host" : " hosts");
    drawHostHeader();
    hostsPager.reset(rows.length);
  }

  function drawHostHeader() {
    const cells = HOST_COLUMNS.map((column, i) => {
      const active = i === hostSort.column;
      const sort = active ? (hostSort.descending ? "descending" : "ascending") : "none";
      const arrow = active ? (hostSort.descending ? " ▼" : " ▲") : "";
      return el("th", {class: column.text ? null : "num", "aria-sort": sort},
        el("button", {type: "button", class: "sort", "data-column": i, title: "Sort by " + column.label},
          column.label + arrow));
    });
    $("hosts-table").tHead.rows[0].replaceChildren(...cells);
  }

  function drawHosts(start, end) {
    const rows = [];
    for (let i = start; i < end; i++) {
      const r = hostView[i];
      const cells = HOST_COLUMNS.map((column, c) => {
        const value = column.get(r);
        if (c === 0) {
          return el("td", {class: "host"}, value, r[3] > 0
            ? el("button", {type: "button", class: "link show-clusters", "data-host": value,
              title: "Show the clusters with a page of this host"}, "clusters") : null);
        }
        return el("td", {class: "num"}, (column.fmt || fmtInt)(value));
      });
      rows.push(el("tr", null, cells));
    }
    $("hosts-table").tBodies[0].replaceChildren(...rows);
  }

  function setupHosts() {
    hostsPager = makePager([$("hosts-pager")], drawHosts);
    $("hosts-table").tHead.addEventListener("click", (event) => {
      const button = event.target instanceof Element ? event.target.closest("button.sort") : null;
      if (!button) return;
      const column = Number(button.dataset.column);
      if (column === hostSort.column) hostSort.descending = !hostSort.descending;
      else hostSort = {column: column, descending: !HOST_COLUMNS[column].text};
      sortHosts();
      const again = $("hosts-table").tHead.querySelector('button[data-column="' + column + '"]');
      if (again) again.focus();
    });
    $("hosts-table").tBodies[0].addEventListener("click", (event) => {
      const button = event.target instanceof Element ? event.target.closest("button.show-clusters") : null;
      if (!button) return;
      const input = $("clusters-filter");
      input.value = button.dataset.host;
      clusterQuery = input.value.trim().toLowerCase();
      filterClusters();
      $("clusters").scrollIntoView();
    });
    onFilterInput("hosts-filter", (value) => {
      hostQuery = value;
      sortHosts();
    });
    $("hosts").hidden = S.hostStats.length === 0;
    sortHosts();
  }

  /* ------------------------------------------------------------------ skipped pages */

  let skippedView = [];
  let skippedPager = null;

  function drawSkipped(start, end) {
    const rows = [];
    for (let i = start; i < end; i++) {
      const [id, reason] = skippedView[i];
      rows.push(el("tr", null, el("td", {class: "url-cell"}, urlNode(pageUrl(id))),
        el("td", {class: "host"}, pageHost(id)), el("td", null, String(reason))));
    }
    $("skipped-table").tBodies[0].replaceChildren(...rows);
  }

  function filterSkipped() {
    const reason = $("skipped-reason").value;
    skippedView = reason ? S.skipped.filter((row) => String(row[1]) === reason) : S.skipped;
    $("skipped-count").textContent = fmtInt(skippedView.length) + (skippedView.length === 1 ? " page" : " pages");
    skippedPager.reset(skippedView.length);
  }

  function setupSkipped() {
    const counts = new Map();
    for (const row of S.skipped) counts.set(String(row[1]), (counts.get(String(row[1])) || 0) + 1);
    const reasons = Array.from(counts.entries()).sort((x, y) => y[1] - x[1] || x[0].localeCompare(y[0]));
    $("skipped-reasons").tBodies[0].replaceChildren(...reasons.map(([reason, n]) => el("tr", null,
      el("td", null, reason), el("td", {class: "num"}, fmtInt(n)),
      el("td", {class: "num"}, fmtShare(ratio(n, S.skipped.length))))));
    const select = $("skipped-reason");
    for (const [reason] of reasons) select.appendChild(el("option", {value: reason}, reason));
    select.addEventListener("change", filterSkipped);
    skippedPager = makePager([$("skipped-pager")], drawSkipped);
    $("skipped").hidden = S.skipped.length === 0;
    filterSkipped();
  }

  /* ------------------------------------------------------------------ the word diff */

  // Tokenisers of the three levels: lines (with their newline), sentences, words (a CJK character is a word).
  function splitLines(text) {
    return text.match(/[^\n]*\n|[^\n]+/g) || [];
  }

  function splitSentences(text) {
    return text.match(/[^.!?。！？\n]*(?:[.!?。！？]+[^\S\n]*\n?|\n)|[^.!?。！？\n]+$/g) || [];
  }

  function splitWords(text) {
    return text.match(
      /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}]|[\p{L}\p{M}\p{N}_]+|\s+|[^\s\p{L}\p{M}\p{N}_]/gu,
    ) || [];
  }

  const LEVELS = [splitLines, splitSentences, splitWords];
  const MAX_D = 1500;             // most edits one Myers run may find (its trace holds ~MAX_D² numbers)
  const STEP_BUDGET = 30000000;   // inner-loop steps for the whole diff of a pair

  // Token strings as small integers (equal strings, equal numbers), for a fast compare.
  function intern(tokens, table) {
    const ids = new Int32Array(tokens.length);
    for (let i = 0; i < tokens.length; i++) {
      let id = table.get(tokens[i]);
      if (id === undefined) {
        id = table.size;
        table.set(tokens[i], id);
      }
      ids[i] = id;
    }
    return ids;
  }

  // The edit runs turning a into b ([kind, count] with SAME, DEL, INS), by Myers' O(ND) algorithm; null when
  // it would need more than MAX_D edits or more steps than the budget has left.
  function myers(a, b, budget) {
    let pre = 0;
    while (pre < a.length && pre < b.length && a[pre] === b[pre]) pre++;
    let post = 0;
    while (post < a.length - pre && post < b.length - pre &&
           a[a.length - 1 - post] === b[b.length - 1 - post]) post++;
    const n = a.length - pre - post, m = b.length - pre - post;
    const runs = [];
    const push = (kind, count) => {
      if (!count) return;
      const last = runs[runs.length - 1];
      if (last && last[0] === kind) last[1] += count;
      else runs.push([kind, count]);
    };
    push(SAME, pre);
    if (n === 0 || m === 0) {
      push(DEL, n);
      push(INS, m);
      push(SAME, post);
      return runs;
    }
    const max = Math.min(n + m, MAX_D), off = max + 1;
    const v = new Int32Array(2 * max + 3);
    const trace = [];
    let found = -1;
    for (let d = 0; d <= max && found < 0; d++) {
      trace.push(v.slice(off - d, off + d + 1));
      for (let k = -d; k <= d; k += 2) {
        let x = k === -d || (k !== d && v[off + k - 1] < v[off + k + 1]) ? v[off + k + 1] : v[off + k - 1] + 1;
        let y = x - k;
        while (x < n && y < m && a[pre + x] === b[pre + y]) {
          x++;
          y++;
        }
        budget.steps -= 1 + (x - v[off + k]);
        v[off + k] = x;
        if (x >= n && y >= m) {
          found = d;
          break;
        }
      }
      if (found < 0 && budget.steps < 0) return null;
    }
    if (found < 0) return null;
    // Walk back through the saved diagonals, collecting the edits from the end.
    const back = [];
    let x = n, y = m;
    for (let d = found; d > 0; d--) {
      const vd = trace[d];   // the furthest x on each diagonal after d - 1 edits; diagonal k at vd[k + d]
      const k = x - y;
      const prevK = k === -d || (k !== d && vd[k - 1 + d] < vd[k + 1 + d]) ? k + 1 : k - 1;
      const prevX = vd[prevK + d], prevY = prevX - prevK;
      const snake = Math.min(x - (prevK === k + 1 ? prevX : prevX + 1), y - (prevK === k + 1 ? prevY + 1 : prevY));
      back.push([SAME, snake]);
      back.push(prevK === k + 1 ? [INS, 1] : [DEL, 1]);
      x = prevX;
      y = prevY;
    }
    back.push([SAME, x]);   // the snake from (0, 0); here x === y
    for (let i = back.length - 1; i >= 0; i--) push(back[i][0], back[i][1]);
    push(SAME, post);
    return runs;
  }

  // Equal stretches between two changes that are only whitespace, or shorter than the changes on both sides,
  // become part of the change: "<del>a</del> <del>b</del>" reads better as "<del>a b</del>".
  function tidy(runs, ta, tb) {
    const groups = [];   // [[same text] or [deleted text, inserted text]] in order
    let i = 0, j = 0;
    for (const [kind, count] of runs) {
      if (kind === SAME) {
        groups.push({same: ta.slice(i, i + count).join("")});
        i += count;
        j += count;
      } else {
        let last = groups[groups.length - 1];
        if (!last || last.same !== undefined) groups.push(last = {del: "", ins: ""});
        if (kind === DEL) last.del += ta.slice(i, i + count).join("");
        else last.ins += tb.slice(j, j + count).join("");
        if (kind === DEL) i += count;
        else j += count;
      }
    }
    const out = [];
    for (let g = 0; g < groups.length; g++) {
      const group = groups[g], before = out[out.length - 1], after = groups[g + 1];
      if (group.same !== undefined && before && before.same === undefined && after) {
        const small = /^\s*$/.test(group.same) || group.same.length <=
          Math.min(before.del.length + before.ins.length, after.del.length + after.ins.length);
        if (small) {
          before.del += group.same + after.del;
          before.ins += group.same + after.ins;
          g += 1;
          continue;
        }
      }
      if (group.same === undefined && before && before.same === undefined) {
        before.del += group.del;
        before.ins += group.ins;
      } else {
        out.push(group.same !== undefined ? {same: group.same} : {del: group.del, ins: group.ins});
      }
    }
    return out;
  }

  function emit(side, text, kind) {
    if (!text) return;
    const last = side[side.length - 1];
    if (last && last[1] === kind) last[0] += text;
    else side.push([text, kind]);
  }

  // Diffs a against b at `level` and below: lines first, then sentences within changed lines, then words.
  function diffLevel(a, b, level, out, budget) {
    if (a === b) {
      emit(out.a, a, SAME);
      emit(out.b, b, SAME);
      return;
    }
    if (!a || !b || level >= LEVELS.length || budget.steps <= 0) {
      emit(out.a, a, DEL);
      emit(out.b, b, INS);
      return;
    }
    const ta = LEVELS[level](a), tb = LEVELS[level](b);
    const table = new Map();
    const runs = myers(intern(ta, table), intern(tb, table), budget);
    if (runs === null) {   // too different or too long to align here: the whole stretch is a change
      emit(out.a, a, DEL);
      emit(out.b, b, INS);
      return;
    }
    for (const group of tidy(runs, ta, tb)) {
      if (group.same !== undefined) {
        emit(out.a, group.same, SAME);
        emit(out.b, group.same, SAME);
      } else {
        diffLevel(group.del, group.ins, level + 1, out, budget);
      }
    }
  }

  // The two texts as segments [text, SAME|DEL|INS]: side a has SAME and DEL, side b SAME and INS.
  function diffTexts(a, b) {
    const out = {a: [], b: []};
    diffLevel(String(a), String(b), 0, out, {steps: STEP_BUDGET});
    return out;
  }

  function diffNode(segments) {
    const box = el("div", {class: "text"});
    for (const [text, kind] of segments) {
      if (kind === DEL) box.appendChild(el("del", null, text));
      else if (kind === INS) box.appendChild(el("ins", null, text));
      else box.appendChild(document.createTextNode(text));
    }
    return box;
  }

  /* ------------------------------------------------------------------ the pair view */

  const pairInfo = new Map();   // pair id -> {kind: "duplicate" | "near-miss", order, a, b} (a, b: page ids)
  const pairOrder = [];         // pair ids with detail, in the order the lists show them
  let currentPair = null;       // {id, pair} on screen
  let pairToken = 0;            // bumped on every open/close: a slower, older load then draws nothing
  let pushedHash = false;       // the pair's hash was pushed from the report (Back returns there)
  let focusBack = null;         // the pair id whose compare control opened the pair view

  function indexPairs() {
    const add = (pairId, kind, a, b) => {
      if (pairId >= 0 && !pairInfo.has(pairId)) {
        pairInfo.set(pairId, {kind: kind, order: pairOrder.length, a: a, b: b});
        pairOrder.push(pairId);
      }
    };
    for (const ci of clusterOrder) for (const m of clusterMembers(ci)) add(m[4], "duplicate", m[0], m[1]);
    for (const row of S.nearMisses) add(row[4], "near-miss", row[0], row[1]);
  }

  function pairFromHash() {
    const match = /^#pair-(\d+)$/.exec(location.hash);
    return match ? Number(match[1]) : null;
  }

  // Opens pair `id` through the URL hash, so that the view has a link and Back closes it.
  function gotoPair(id) {
    const hash = "#pair-" + id;
    if (location.hash === hash) {
      openPair(id);
    } else if (pairFromHash() !== null) {
      location.replace(hash);   // from pair to pair: one history entry for the whole visit
    } else {
      pushedHash = true;
      location.hash = hash;
    }
  }

  function closePair() {
    if (pushedHash) {
      pushedHash = false;
      history.back();   // the hashchange closes the view
      return;
    }
    try {
      history.replaceState(null, "", location.pathname + location.search);
    } catch (err) {
      const y = window.scrollY;
      location.replace("#");
      window.scrollTo(0, y);
    }
    hidePair();
  }

  function hidePair() {
    pairToken += 1;
    currentPair = null;
    $("pair").hidden = true;
    document.body.classList.remove("pair-open");
    if (focusBack !== null) {   // the rows may have been redrawn meanwhile: find the control again
      const button = document.querySelector('main button.compare[data-pair="' + focusBack + '"]');
      if (button) button.focus({preventScroll: true});
    }
    focusBack = null;
  }

  function onHashChange() {
    const id = pairFromHash();
    if (id === null) {
      pushedHash = false;
      if (!$("pair").hidden) hidePair();
      return Promise.resolve();
    }
    return openPair(id);
  }

  function setPairState(state) {
    $("pair").dataset.state = state;
  }

  // Shows pair `id`: decodes its chunk if need be, then draws both sides, the diff and the features.
  async function openPair(id) {
    const token = ++pairToken;
    const view = $("pair");
    view.hidden = false;
    view.dataset.pair = String(id);
    document.body.classList.add("pair-open");
    setPairState("loading");
    currentPair = null;
    $("pair-title").textContent = "Pair " + fmtInt(id);
    $("pair-body").replaceChildren(el("p", {class: "loading"}, "Loading the pair…"));
    drawPairNav(id);
    drawPairLabel(id);
    const perChunk = S.meta.pairs_per_chunk;
    let chunk;
    try {
      if (!(perChunk > 0)) throw new Error("the report does not say how many pairs a chunk holds");
      chunk = await loadChunk(Math.floor(id / perChunk));
    } catch (err) {
      if (token !== pairToken) return;
      setPairState("error");
      document.body.dataset.ready = "error";
      $("pair-body").replaceChildren(el("p", {class: "error"},
        "The details of pair " + id + " could not be read: " + (err && err.message ? err.message : err)));
      return;
    }
    if (token !== pairToken) return;
    const pair = chunk && chunk.pairs ? chunk.pairs[String(id)] : undefined;
    if (!pair) {
      setPairState("missing");
      $("pair-body").replaceChildren(el("p", {class: "empty"}, "The report holds no details for pair " + id + "."));
      return;
    }
    currentPair = {id: id, pair: pair};
    drawPairLabel(id);
    $("pair-body").replaceChildren(pairContent(id, pair, chunk));
    setPairState("ready");
    $("pair-title").focus({preventScroll: true});
  }

  function drawPairNav(id) {
    const info = pairInfo.get(id);
    const at = info ? info.order : -1;
    $("pair-prev").disabled = at <= 0;
    $("pair-next").disabled = at < 0 || at >= pairOrder.length - 1;
    $("pair-position").textContent = at < 0 ? "" : fmtInt(at + 1) + " of " + fmtInt(pairOrder.length);
  }

  function stepPair(delta) {
    const info = currentPair ? pairInfo.get(currentPair.id) : undefined;
    if (!info) return;
    const next = pairOrder[info.order + delta];
    if (next !== undefined) gotoPair(next);
  }

  function drawPairLabel(id) {
    if (!currentPair || currentPair.id !== id) {
      for (const b of ["label-duplicate", "label-distinct", "label-clear"]) $(b).disabled = true;
      $("pair-label-state").textContent = "";
      return;
    }
    const label = labels.get(id);
    $("label-duplicate").disabled = false;
    $("label-distinct").disabled = false;
    $("label-clear").disabled = !label;
    $("label-duplicate").setAttribute("aria-pressed", label && label.duplicate ? "true" : "false");
    $("label-distinct").setAttribute("aria-pressed", label && !label.duplicate ? "true" : "false");
    $("pair-label-state").textContent = label ? (label.duplicate ? "labelled near-duplicate" : "labelled distinct")
      : "not labelled";
    $("pair-label-state").className = "label-state" + (label ? (label.duplicate ? " dup" : " distinct") : "");
  }

  // Calls apply(text) with a filter box's lower-cased text once typing pauses for FILTER_DELAY ms.
  function onFilterInput(id, apply) {
    let timer = 0;
    $(id).addEventListener("input", (event) => {
      clearTimeout(timer);
      const value = event.target.value.trim().toLowerCase();
      timer = setTimeout(() => apply(value), FILTER_DELAY);
    });
  }

  function stat(name, value, title) {
    return el("div", {class: "stat", title: title}, el("span", {class: "stat-name"}, name),
      el("span", {class: "stat-value"}, value));
  }

  function pairContent(id, pair, chunk) {
    const info = pairInfo.get(id);
    const texts = chunk.texts || {};
    const cut = new Set(Array.isArray(chunk.cut) ? chunk.cut : []);
    const textA = texts[String(pair.a)], textB = texts[String(pair.b)];
    const roles = info && info.kind === "near-miss"
      ? ["kept: came close to page B without being flagged", "the nearest earlier page"]
      : ["judged a near-duplicate of page B", "the page it was judged a near-duplicate of"];
    const frag = document.createDocumentFragment();
    frag.appendChild(el("div", {class: "stats"},
      stat("distance", fmtInt(pair.distance), "bits that differ between the two fingerprints"),
      stat("similarity", fmtFloat(pair.similarity),
        "the sketches' similarity (estimated weighted Jaccard of the words): a candidate needs at least t"),
      stat("weighted Jaccard", fmtFloat(pair.weighted_jaccard), "weighted Jaccard similarity of the features"),
      stat("text share of the difference", fmtShare(pair.text_share),
        "how much of the difference comes from text features (the rest from the page structure)"),
    ));
    let diff = null;
    if (typeof textA === "string" && typeof textB === "string") diff = diffTexts(textA, textB);
    const side = (cls, letter, pageId, role, text, segments) => el("div", {class: "side " + cls},
      el("h3", null, "Page " + letter, el("span", {class: "role"}, " — " + role)),
      el("div", {class: "page-url"}, urlNode(pageUrl(pageId))),
      el("div", {class: "page-facts"}, pageHost(pageId) + " · " + fmtBytes(pageBytes(pageId))),
      cut.has(pageId) ? el("p", {class: "note cut-note"}, "This text was cut at " + fmtInt(S.meta.text_cap) +
        " characters: the rest is neither shown nor compared.") : null,
      typeof text !== "string" ? el("p", {class: "note"}, "The report holds no text for this page.")
        : segments ? diffNode(segments) : el("div", {class: "text"}, text),
    );
    frag.appendChild(el("p", {class: "legend"},
      "Differences of the main texts: ", el("del", null, "struck through, red"), " in page A: words only in A; ",
      el("ins", null, "underlined, green"), " in page B: words only in B."));
    frag.appendChild(el("div", {class: "sides"},
      side("side-a", "A", pair.a, roles[0], textA, diff ? diff.a : null),
      side("side-b", "B", pair.b, roles[1], textB, diff ? diff.b : null)));
    frag.appendChild(features(pair));
    return frag;
  }

  function features(pair) {
    const box = el("div", {class: "features"}, el("h3", null, "Features that differ"));
    if (!S.meta.explained) {
      const held = S.meta.content === "none" ? "neither the pages' HTML nor their text" : "only the pages' text, not " +
        "their HTML";
      box.appendChild(el("p", {class: "note not-explained"}, "No feature lists: the input held " + held +
        ", so the difference cannot be explained feature by feature."));
      return box;
    }
    const tables = el("div", {class: "feature-tables"});
    tables.appendChild(featureTable("Text features", "features-text", pair.text));
    tables.appendChild(featureTable("Structure features", "features-structure", pair.structure));
    box.appendChild(tables);
    return box;
  }

  function featureTable(caption, cls, rows) {
    const list = Array.isArray(rows) ? rows : [];
    const body = el("tbody");
    const draw = (limit) => {
      const out = [];
      for (let i = 0; i < Math.min(limit, list.length); i++) {
        const [name, wa, wb] = list[i];
        out.push(el("tr", {class: wa && !wb ? "only-a" : wb && !wa ? "only-b" : null},
          el("td", {class: "feature"}, String(name)), el("td", {class: "num"}, fmtWeight(wa)),
          el("td", {class: "num"}, fmtWeight(wb))));
      }
      if (!list.length) out.push(el("tr", null, el("td", {colspan: 3, class: "muted"}, "none listed")));
      body.replaceChildren(...out);
    };
    draw(FEATURES_SHOWN);
    const table = el("table", {class: "data compact " + cls},
      el("caption", null, caption),
      el("thead", null, el("tr", null, el("th", null, "Feature"), el("th", {class: "num"}, "Weight in A"),
        el("th", {class: "num"}, "Weight in B"))),
      body);
    const wrap = el("div", {class: "feature-table"}, table);
    if (list.length > FEATURES_SHOWN) {
      const more = el("button", {type: "button", class: "more"}, "show all " + fmtInt(list.length));
      more.addEventListener("click", () => {
        draw(list.length);
        more.remove();
      });
      wrap.appendChild(more);
    }
    return wrap;
  }

  function setupPairView() {
    // "compare" anywhere in the lists
    document.querySelector("main").addEventListener("click", (event) => {
      const button = event.target instanceof Element ? event.target.closest("button.compare") : null;
      if (!button) return;
      focusBack = Number(button.dataset.pair);
      gotoPair(focusBack);
    });
    $("pair-close").addEventListener("click", closePair);
    $("pair-prev").addEventListener("click", () => stepPair(-1));
    $("pair-next").addEventListener("click", () => stepPair(1));
    const mark = (value) => {
      if (currentPair) setLabel(currentPair.id, currentPair.pair, value);
    };
    $("label-duplicate").addEventListener("click", () => mark(true));
    $("label-distinct").addEventListener("click", () => mark(false));
    $("label-clear").addEventListener("click", () => mark(null));
    document.addEventListener("keydown", (event) => {
      if ($("pair").hidden || event.ctrlKey || event.metaKey || event.altKey) return;
      const target = event.target;
      if (target instanceof Element && target.closest("input, select, textarea")) return;
      const actions = {
        Escape: closePair,
        ArrowLeft: () => stepPair(-1),
        ArrowRight: () => stepPair(1),
        1: () => mark(true),
        2: () => mark(false),
        0: () => mark(null),
      };
      const action = actions[event.key];
      if (action) {
        event.preventDefault();
        action();
      }
    });
    window.addEventListener("hashchange", () => {
      onHashChange().catch(fail);
    });
  }

  /* ------------------------------------------------------------------ start */

  function fail(err) {
    const box = $("error");
    box.hidden = false;
    box.textContent = "The report could not be shown: " + (err && err.message ? err.message : String(err));
    document.body.dataset.ready = "error";
  }

  // The summary with every list present (an older or partial file draws what it has).
  function init(data) {
    const list = (value) => (Array.isArray(value) ? value : []);
    const summary = data && typeof data === "object" ? data : {};
    S = {
      meta: summary.meta && typeof summary.meta === "object" ? summary.meta : {},
      hosts: list(summary.hosts),
      pages: list(summary.pages),
      clusters: list(summary.clusters),
      nearMisses: list(summary.near_misses),
      hostStats: list(summary.host_stats),
      skipped: list(summary.skipped),
    };
  }

  async function main() {
    if (typeof DecompressionStream !== "function") {
      throw new Error("this browser cannot decompress the embedded data (DecompressionStream is missing); " +
        "open the report in a current Chrome, Edge, Firefox or Safari");
    }
    init(await decodeBlock("simhash-data"));
    drawHeader();
    drawOverview();
    clusterOrder = S.clusters.map((_, i) => i);
    clusterOrder.sort((x, y) => S.clusters[y][1].length - S.clusters[x][1].length || x - y);
    indexPairs();
    loadLabels();
    setupClusters();
    setupNearMisses();
    setupHosts();
    setupSkipped();
    setupPairView();
    drawLabelsBar();
    $("labels-export").addEventListener("click", exportLabels);
    $("pair-labels-export").addEventListener("click", exportLabels);
    if (pairFromHash() !== null) await openPair(pairFromHash());
    if (document.body.dataset.ready !== "error") document.body.dataset.ready = "1";
  }

  // For the tests: the diff on its own.
  window.simhashReport = {diffTexts: diffTexts};

  main().catch(fail);
})();
