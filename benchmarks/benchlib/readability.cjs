// Mozilla Readability over pages given as JSON lines on stdin: {"id", "html", "url"} in,
// {"id", "content", "textContent", "error"} out, one line per page, in order.
// Run with NODE_PATH pointing at a node_modules that holds @mozilla/readability and jsdom
// (benchmarks/bench_extract.py installs them outside the repository).
"use strict";
const readline = require("readline");
const { JSDOM, VirtualConsole } = require("jsdom");
const { Readability } = require("@mozilla/readability");

const quiet = new VirtualConsole(); // no listeners: CSS and script errors of the pages stay silent
const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  if (!line.trim()) return;
  const page = JSON.parse(line);
  const out = { id: page.id, content: "", textContent: "", error: null };
  try {
    const dom = new JSDOM(page.html, { url: page.url || "http://localhost/", virtualConsole: quiet });
    const article = new Readability(dom.window.document).parse();
    if (article) {
      out.content = article.content || "";
      out.textContent = article.textContent || "";
    }
    dom.window.close();
  } catch (e) {
    out.error = String((e && e.message) || e).split("\n")[0];
  }
  process.stdout.write(JSON.stringify(out) + "\n");
});
