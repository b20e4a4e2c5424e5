#!/bin/bash
# Proof for issue 34: a fresh venv, `pip install` of the server from this repo, the
# network cut (`unshare -n`, needs root or user namespaces), and `serve` with no option
# answers a question that shares no word with the stored fact: recall by meaning,
# offline, from the static model inside the wheel (no torch, no model hub).
#
#   bash tools/offline_recall_proof.sh        # prints the transcript; exit 0 = proven
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q "$repo/packages/memorysync-local" 2>&1 | grep -v "is ignored" || true
echo "installed: $("$work/venv/bin/pip" list 2>/dev/null | grep -iE '^(memorysync-local|model2vec|numpy|torch) ' | tr -s ' ' | paste -sd, -)"
"$work/venv/bin/python" -c 'import importlib.util as u; print("torch importable:", u.find_spec("torch") is not None)'
# In the new network namespace there is only a loopback device, and it starts down.
exec unshare -n bash -s "$work" <<'INSIDE'
set -euo pipefail
work=$1
ip link set lo up
echo "network: $(ip -o link | awk -F': ' '{print $2}' | paste -sd, -) (no route beyond loopback)"
"$work/venv/bin/python" - "$work" <<'PY'
import json, subprocess, sys, urllib.request
work = sys.argv[1]
key = "ms_offline_proof_key"
server = subprocess.Popen(
    [f"{work}/venv/bin/memorysync-local", "serve", "--db", f"{work}/proof.db", "--port", "0",
     "--api-key", key, "--log-level", "warning"],
    stdout=subprocess.PIPE, text=True,
)
try:
    banner = server.stdout.readline()
    print(banner.strip())
    print(server.stdout.readline().strip())
    base = banner.rsplit(" at ", 1)[1].strip()

    def post(path, body, user=None):
        headers = {"X-API-Key": key, "Content-Type": "application/json"}
        if user:
            headers["X-End-User-Id"] = user
        request = urllib.request.Request(base + path, json.dumps(body).encode(), headers)
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.load(answer)

    facts = [
        "ugh, I'm lactose intolerant so dairy wrecks my stomach",
        "I work as a dentist in Berlin.",
        "We adopted a rescue greyhound last spring.",
    ]
    for fact in facts:
        post("/memory/add", {"text": fact, "verbatim": True}, user="ana")
        print(f"stored: {fact}")
    question = "Can I have a milkshake?"
    found = post("/v1/memory/recall",
                 {"tenant_id": "local", "user_id": "ana", "prompt": question, "k": 3})
    print(f"recall {question!r} (k=3):")
    for memory in found["memories"]:
        print(f"  {memory['score']:.3f}  {memory['value']}")
    ok = bool(found["memories"]) and found["memories"][0]["value"] == facts[0]
    print("proven: recalled by meaning with the network cut" if ok else "NOT proven")
    sys.exit(0 if ok else 1)
finally:
    server.terminate()
    server.wait(30)
PY
INSIDE
