#!/usr/bin/env bash
# `just demo`: a few real calls and a few hostile ones through the real binary, as a table.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=target/debug/toolhost
adv=tests/fixtures/adversarial.toml
mkdir -p workspace

# A loopback web server for the http_get example (port 8765 is on its allowlist).
python3 -m http.server 8765 --bind 127.0.0.1 --directory tests/fixtures/sandbox-root >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null' EXIT
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/8765) 2>/dev/null && break; sleep 0.1; done

row() { # config tool args
    local start end json
    start=$(date +%s%N)
    json=$("$bin" call --config "$1" "$2" "$3" 2>/dev/null)
    end=$(date +%s%N)
    python3 - "$2" "$json" "$(( (end - start) / 1000000 ))" <<'PY'
import json, sys
tool, raw, ms = sys.argv[1], sys.argv[2], sys.argv[3]
r = json.loads(raw)
u = r.get("usage", {})
print(f"| {tool:<20} | {r['status']:<9} | {r.get('code') or '-':<17} | {u.get('fuel_consumed', 0):>13,} | {u.get('wall_ms', 0):>7} | {ms:>8} |")
PY
}

echo "| tool                 | status    | code              |          fuel | wall ms | total ms |"
echo "|----------------------|-----------|-------------------|---------------|---------|----------|"
row toolhost.toml convert_length '{"value": 42, "from": "mile", "to": "kilometre"}'
row toolhost.toml sha256 '{"text": "hello"}'
row toolhost.toml write_text '{"path": "demo.txt", "content": "written by the demo"}'
row toolhost.toml read_text '{"path": "demo.txt"}'
row toolhost.toml http_get '{"url": "http://127.0.0.1:8765/inside.txt"}'
row toolhost.toml http_get '{"url": "http://127.0.0.1:9/"}'
row toolhost.toml greet '{"name": "demo"}'
for t in spin spin_deadline sleep_forever balloon flood_stdout huge_result huge_list deep_recursion panic escape_fs write_readonly exfiltrate read_env log_spam; do
    row "$adv" "$t" '{}'
done
echo
echo "total ms includes process start and component load (compile cache in .toolhost/cache)."

# A scripted agent session through the whole pipeline: one run, trusted identity from flags.
s=tests/fixtures/session.toml
run="demo-$(date +%s)"
last=""
echo
echo "== a scripted agent session (tests/fixtures/session.toml), run $run"
step() { # label principal call-id tool args [token]
    local out
    out=$("$bin" call --config "$s" --principal "$2" --run-id "$run" --call-id "$3" ${6:+--approval-token "$6"} "$4" "$5" 2>/dev/null)
    printf '%-34s ' "$1"
    python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(r["status"], r.get("code") or "", "|", r.get("output", r["message"]))' "$out"
    last=$out
}
step "valid call" agent c1 greet '{"name": "agent"}'
step "invalid arguments" agent c2 greet '{"name": 42}'
step "unauthorized principal" intruder c3 greet '{"name": "x"}'
step "destructive tool, no approval" agent c4 write_text '{"path": "session.txt", "content": "approved"}'
handle=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["approval"]["handle"])' "$last")
token=$("$bin" approve --config "$s" "$handle" 2>/dev/null)
echo "  (a human ran: toolhost approve ${handle:0:16}…)"
step "resubmitted with the token" agent c5 write_text '{"path": "session.txt", "content": "approved"}' "$token"
step "the token again" agent c6 write_text '{"path": "session.txt", "content": "approved"}' "$token"
step "duplicate id, other arguments" agent c1 greet '{"name": "someone else"}'
step "same id, same arguments: replay" agent c1 greet '{"name": "agent"}'
step "hostile guest" agent c7 spin '{}'
echo
echo "the ledger of this run: target/debug/toolhost ledger --config $s --run $run"
