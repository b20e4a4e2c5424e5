"""The web inspector served at ``/ui/``: one static page, no build step.

The page holds no data: it signs in with an API key kept in the tab's
``sessionStorage`` (never a URL, cookie or log line), sends it as ``X-API-Key``
to the ``/x-local/v1`` routes, and writes every stored text
with ``textContent`` (so a memory reading ``<script>`` shows as text). A user's
export is fetched the same way and saved from a ``blob:`` link, so the key never
travels in a URL. Failures read as sentences (a refused key, a server that does not
answer), not as raw status lines.
"""

from __future__ import annotations

INSPECTOR_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>memorysync-local inspector</title>
<style>
[hidden]{display:none !important}
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#234;color:#fff;padding:8px 16px;display:flex;gap:16px;align-items:center}
header h1{font-size:16px;margin:0;flex:1}
main{display:flex;gap:16px;padding:16px}
section{background:#fff;border:1px solid #ddd;border-radius:6px;padding:12px;overflow:auto}
#users{min-width:220px}#detail{flex:1}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #eee;padding:4px 6px;
text-align:left;vertical-align:top}th{font-weight:600}
button{cursor:pointer}.danger{color:#a00}.muted{color:#777}.turn{margin:4px 0}
.role{font-weight:600;margin-right:6px}#error{color:#a00}li.sel{font-weight:700}
tr.superseded td.text{text-decoration:line-through;color:#777}
</style></head><body>
<header><h1>memorysync-local inspector</h1><span id="who"></span>
<button id="signout" hidden>Sign out</button></header>
<p id="error" role="alert"></p>
<form id="signin" autocomplete="off">
<label>API key <input id="key" type="password" autocomplete="off" required></label>
<button type="submit">Sign in</button>
<span class="muted">The key stays in this tab (session storage) and is sent as X-API-Key.</span>
</form>
<main id="app" hidden>
<section id="users"><h2>Users</h2><ul id="user-list"></ul><p id="stats" class="muted"></p></section>
<section id="detail" hidden>
<h2 id="user-title"></h2>
<p><button id="export-user">Download export (JSON)</button>
<button id="forget-user" class="danger">Delete this user</button>
<span id="export-status" class="muted" role="status"></span></p>
<h3>Memories <span id="memory-count" class="muted"></span></h3>
<input id="search" type="search" placeholder="Search memories">
<table><thead><tr><th>Text</th><th>Kind</th><th>State</th><th>Session</th><th>Said</th><th></th>
</tr></thead>
<tbody id="memories"></tbody></table>
<h3>Sessions</h3><table><thead><tr><th>Session</th><th>Turns</th><th>Memories</th><th></th>
</tr></thead><tbody id="sessions"></tbody></table>
<div id="transcript"></div>
</section></main>
<script>
"use strict";
const KEY = "memorysync-local.key";
let current = null;
const $ = (id) => document.getElementById(id);
function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}
async function call(method, path, body, extra) {
  const headers = Object.assign({"X-API-Key": sessionStorage.getItem(KEY) || ""}, extra || {});
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {method, headers, credentials: "omit", cache: "no-store",
      body: body === undefined ? undefined : JSON.stringify(body)});
  } catch (err) {
    throw new Error("The server did not answer. Is memorysync-local still running?");
  }
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    if (response.status === 401) {
      signOut();
      throw new Error("That key was not accepted. Check it (memorysync-local serve prints " +
        "the key it uses) and sign in again.");
    }
    const detail = typeof data.detail === "string" ? " (" + data.detail + ")" : "";
    throw new Error("The server refused this request with status " + response.status +
      detail + ".");
  }
  return data;
}
function q(params) { return "?" + new URLSearchParams(params).toString(); }
function fail(err) { $("error").textContent = err.message; }
function signOut() {
  sessionStorage.removeItem(KEY); $("app").hidden = true; $("signin").hidden = false;
  $("signout").hidden = true; $("who").textContent = ""; $("key").focus();
}
async function loadUsers() {
  const [data, st] = await Promise.all([call("GET", "/x-local/v1/users"),
    call("GET", "/x-local/v1/stats")]);
  const list = $("user-list"); list.replaceChildren();
  for (const u of data.users) {
    const item = el("li"); item.dataset.user = u.user_id;
    if (u.user_id === current) item.className = "sel";
    const link = el("a", u.user_id); link.href = "#"; link.className = "user";
    link.addEventListener("click", (e) => { e.preventDefault(); openUser(u.user_id).catch(fail); });
    item.append(link, el("span", " " + u.memories + " memories, " + u.turns + " turns, " +
      u.sessions + " sessions", "muted counts"));
    list.append(item);
  }
  $("stats").textContent = st.users + " users, " + st.memories + " memories, " + st.turns +
    " turns, " + st.pending_jobs + " pending jobs";
  $("stats").dataset.memories = st.memories; $("stats").dataset.turns = st.turns;
}
let memoriesAsked = 0;
async function loadMemories() {
  // Typing sends a search per keystroke, and answers may come back out of order: only
  // the newest question's answer is shown (an older one would replace a newer list).
  const asked = ++memoriesAsked;
  const search = $("search").value;
  const data = await call("GET", "/x-local/v1/memories" + q({user_id: current, q: search}));
  if (asked !== memoriesAsked) return;
  $("memory-count").textContent = "(" + data.total + ")";
  $("memory-count").dataset.total = data.total;
  const body = $("memories"); body.replaceChildren();
  body.dataset.query = search;  // what the list shows: tests wait on it
  for (const m of data.memories) {
    const row = el("tr"); row.className = "memory " + m.state; row.dataset.id = m.memory_id;
    const del = el("button", "Delete", "danger");
    del.addEventListener("click", () => {
      if (!confirm("Delete this memory?")) return;
      call("POST", "/x-local/v1/memories/forget", {user_id: current, memory_id: m.memory_id})
        .then(() => openUser(current)).catch(fail);
    });
    const cell = el("td"); cell.append(del);
    // A superseded fact stays listed (its history), marked with what replaced it.
    const state = m.state === "current" ? "current" : m.superseded_by
      ? "superseded by " + m.superseded_by + " on " + m.valid_until
      : "retracted on " + m.valid_until;
    row.append(el("td", m.text, "text"), el("td", m.kind), el("td", state, "state"),
      el("td", m.session_id || ""), el("td", m.said_at), cell);
    body.append(row);
  }
}
async function loadSessions() {
  const data = await call("GET", "/x-local/v1/sessions" + q({user_id: current}));
  const body = $("sessions"); body.replaceChildren();
  for (const s of data.sessions) {
    const row = el("tr"); row.className = "session"; row.dataset.session = s.session_id;
    const show = el("a", s.session_id); show.href = "#";
    show.addEventListener("click", (e) => {
      e.preventDefault(); showTranscript(s.session_id).catch(fail);
    });
    const del = el("button", "Delete session", "danger");
    del.addEventListener("click", () => {
      if (!confirm("Delete the session " + s.session_id + " and its memories?")) return;
      call("POST", "/x-local/v1/sessions/forget", {user_id: current, session_id: s.session_id})
        .then(() => openUser(current)).catch(fail);
    });
    const first = el("td"); first.append(show);
    const last = el("td"); last.append(del);
    row.append(first, el("td", s.turns), el("td", s.memories), last);
    body.append(row);
  }
}
async function showTranscript(session) {
  const query = q({user_id: current, session_id: session});
  const data = await call("GET", "/x-local/v1/transcript" + query);
  const box = $("transcript"); box.replaceChildren(el("h3", "Transcript: " + session));
  for (const t of data.items) {
    const line = el("div", undefined, "turn");
    line.append(el("span", t.role, "role"), el("span", t.content, "content"));
    box.append(line);
  }
}
function fileName(user) {
  return "memorysync-export-" + (user.replace(/[^A-Za-z0-9._@-]+/g, "_").slice(0, 80) || "user") +
    ".json";
}
async function downloadExport() {
  const user = current;
  const data = await call("GET", "/x-local/v1/export" + q({user_id: user}));
  const blob = new Blob([JSON.stringify(data, null, 2) + "\\n"], {type: "application/json"});
  const link = el("a"); link.href = URL.createObjectURL(blob); link.download = fileName(user);
  document.body.append(link); link.click(); link.remove();
  // Revoked later, not at once: the browser reads the blob after the click returns.
  setTimeout(() => URL.revokeObjectURL(link.href), 60000);
  const turns = Object.values(data.transcripts).reduce((n, t) => n + t.length, 0);
  $("export-status").textContent = "Saved " + link.download + ": " + data.memories.length +
    " memories, " + turns + " turns, " + data.sessions.length + " sessions.";
}
async function openUser(user) {
  current = user; $("detail").hidden = false; $("user-title").textContent = user;
  $("transcript").replaceChildren(); $("export-status").textContent = "";
  await Promise.all([loadMemories(), loadSessions(), loadUsers()]);
}
async function start() {
  $("error").textContent = "";
  $("signin").hidden = true; $("app").hidden = false; $("signout").hidden = false;
  $("who").textContent = "signed in";
  await loadUsers();
}
$("signin").addEventListener("submit", (e) => {
  e.preventDefault();
  sessionStorage.setItem(KEY, $("key").value.trim()); $("key").value = "";
  start().catch(fail);
});
$("signout").addEventListener("click", signOut);
$("export-user").addEventListener("click", () => { if (current) downloadExport().catch(fail); });
$("search").addEventListener("input", () => { if (current) loadMemories().catch(fail); });
$("forget-user").addEventListener("click", () => {
  if (!current || !confirm("Delete every memory and transcript of " + current + "?")) return;
  call("POST", "/x-local/v1/users/forget", {user_id: current})
    .then(() => { current = null; $("detail").hidden = true; return loadUsers(); }).catch(fail);
});
if (sessionStorage.getItem(KEY)) start().catch(fail);
</script></body></html>
"""
