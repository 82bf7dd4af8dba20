"""The page served at /: per consumer, its queues with backlog, committed offsets, locks and last access, with
pause / resume / reset buttons. It reads and acts through the admin API (the admin token, when there is one, is
asked once and kept in the browser's localStorage)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from fastmq.proxy.http import Reply, Request

if TYPE_CHECKING:
    from fastmq.proxy.app import ProxyApp

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>fastmq proxy: consumers</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}th{background:#f4f4f4}.alert{background:#fdd}
h2{margin-bottom:.2em}.paused{color:#b00}button{margin-right:.4em}
</style></head><body>
<h1>fastmq proxy: consumers</h1><div id="consumers">loading...</div>
<script>
const token = () => localStorage.getItem("fastmq-admin-token") || "";
async function call(method, path, body) {
  const headers = {"content-type": "application/json"};
  if (token()) headers["authorization"] = "Bearer " + token();
  const answer = await fetch(path, {method, headers, body: body === undefined ? undefined : JSON.stringify(body)});
  if (answer.status === 401) {
    localStorage.setItem("fastmq-admin-token", prompt("admin token") || "");
    return call(method, path, body);
  }
  return answer.json();
}
function cell(row, text, cls) { const td = row.insertCell(); td.textContent = text; if (cls) td.className = cls; }
async function render() {
  const list = await call("GET", "/admin/consumers");
  // Built aside and swapped in at the end: renders that overlap (the timer, a button) never mix their rows.
  const sections = [];
  for (const entry of list.consumers || []) {
    const info = await call("GET", "/admin/consumers/" + encodeURIComponent(entry.name));
    const section = document.createElement("section");
    section.dataset.consumer = entry.name;
    const title = document.createElement("h2");
    title.textContent = entry.name + " (" + entry.topic + ", " + entry.mode + ")";
    const status = document.createElement("p");
    status.className = "status" + (info.paused ? " paused" : "");
    status.textContent = (info.paused ? "paused" : "running") + ", backlog " + info.backlog;
    section.append(title, status);
    for (const [label, path, body] of [["pause", "pause"], ["resume", "resume"], ["reset to latest", "reset", {to: "latest"}]]) {
      const button = document.createElement("button");
      button.textContent = label;
      button.dataset.action = path;
      button.onclick = async () => { await call("POST", "/admin/consumers/" + encodeURIComponent(entry.name) + "/" + path, body || {}); render(); };
      section.append(button);
    }
    const table = document.createElement("table");
    const head = table.insertRow();
    for (const name of ["clientId", "queue", "max offset", "committed", "backlog", "locked", "attempts", "last access"]) {
      const th = document.createElement("th"); th.textContent = name; head.append(th);
    }
    for (const q of info.queues || []) {
      const row = table.insertRow();
      if (q.alert) row.className = "alert";
      cell(row, q.clientId || "-"); cell(row, q.queue); cell(row, q.max); cell(row, q.committed);
      cell(row, q.backlog, "backlog"); cell(row, q.locked ? "yes" : "no"); cell(row, q.attempts);
      cell(row, q.access ? new Date(q.access).toISOString() : "-");
    }
    section.append(table);
    sections.push(section);
  }
  const root = document.getElementById("consumers");
  if (sections.length) root.replaceChildren(...sections);
  else root.textContent = "no consumers are registered";
}
render();
setInterval(render, 5000);
</script></body></html>
"""


async def serve(app: ProxyApp, request: Request) -> Reply:
    return Reply(200, body=PAGE.encode(), content_type="text/html; charset=utf-8")
