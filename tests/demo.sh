#!/usr/bin/env bash
# `just demo`: a few real calls and a few hostile ones through the real binary, as a table, then
# a scripted agent session. Each row says what it should end as; a row that ends otherwise is
# marked `<- expected …` and the demo exits 1 (`demo::the_demo_tells_its_story` runs it).
set -uo pipefail
cd "$(dirname "$0")/.."
bin="${TOOLHOST:-target/debug/toolhost}"
adv=tests/fixtures/adversarial.toml
mkdir -p workspace

# A loopback web server for the http_get example (port 8765 is on its allowlist).
python3 -m http.server 8765 --bind 127.0.0.1 --directory tests/fixtures/sandbox-root >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null' EXIT
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/8765) 2>/dev/null && break; sleep 0.1; done

unexpected=0
# Each row prints its call's status and code, and `<- expected WANT` (exit 1, counted) when
# they are not WANT ("completed -", "failed CODE").
row() { # config tool args want
    local start end json
    start=$(date +%s%N)
    json=$("$bin" call --config "$1" "$2" "$3" 2>/dev/null)
    end=$(date +%s%N)
    python3 - "$2" "$json" "$(( (end - start) / 1000000 ))" "$4" <<'PY' || unexpected=$((unexpected + 1))
import json, sys
tool, raw, ms, want = sys.argv[1:5]
try:
    r = json.loads(raw)
except ValueError:
    r = {"status": "no result"}
got = f"{r['status']} {r.get('code') or '-'}"
mark = "" if got == want else f" <- expected {want}"
u = r.get("usage", {})
print(f"| {tool:<20} | {r['status']:<9} | {r.get('code') or '-':<17} | {u.get('fuel_consumed', 0):>13,} | {u.get('wall_ms', 0):>7} | {ms:>8} |{mark}")
sys.exit(1 if mark else 0)
PY
}

echo "| tool                 | status    | code              |          fuel | wall ms | total ms |"
echo "|----------------------|-----------|-------------------|---------------|---------|----------|"
row toolhost.toml convert_length '{"value": 42, "from": "mile", "to": "kilometre"}' 'completed -'
row toolhost.toml sha256 '{"text": "hello"}' 'completed -'
row toolhost.toml write_text '{"path": "demo.txt", "content": "written by the demo"}' 'completed -'
row toolhost.toml read_text '{"path": "demo.txt"}' 'completed -'
row toolhost.toml http_get '{"url": "http://127.0.0.1:8765/inside.txt"}' 'completed -'
row toolhost.toml http_get '{"url": "http://127.0.0.1:9/"}' 'failed tool_error'
row toolhost.toml greet '{"name": "demo"}' 'completed -'
# Each hostile guest and what contains it (escape_fs, exfiltrate and read_env complete: they
# report their attempts, each denied; write_readonly reports its denial as its own error).
while read -r t want; do
    row "$adv" "$t" '{}' "$want"
done <<'ROWS'
spin failed fuel_exhausted
spin_deadline failed deadline_exceeded
sleep_forever failed deadline_exceeded
balloon failed memory_exceeded
flood_stdout failed output_too_large
huge_result failed output_too_large
huge_list failed output_too_large
deep_recursion failed guest_trap
panic failed guest_trap
escape_fs completed -
write_readonly failed tool_error
exfiltrate completed -
read_env completed -
log_spam completed -
ROWS
echo
echo "total ms includes process start and component load (compile cache in .toolhost/cache)."

# A scripted agent session through the whole pipeline: one run, trusted identity from flags.
s=tests/fixtures/session.toml
run="demo-$(date +%s)"
last=""
echo
echo "== a scripted agent session (tests/fixtures/session.toml), run $run"
step() { # label want principal call-id tool args [token]
    local out
    out=$("$bin" call --config "$s" --principal "$3" --run-id "$run" --call-id "$4" ${7:+--approval-token "$7"} "$5" "$6" 2>/dev/null)
    printf '%-34s ' "$1"
    python3 - "$out" "$2" <<'PY' || unexpected=$((unexpected + 1))
import json, sys
raw, want = sys.argv[1:3]
try:
    r = json.loads(raw)
    got = f"{r['status']} {r.get('code') or '-'}"
    shown = f"{r['status']} {r.get('code') or ''} | {r.get('output', r.get('message'))}"
except (ValueError, KeyError):
    got = shown = "no result"
mark = "" if got == want else f" <- expected {want}"
print(shown + mark)
sys.exit(1 if mark else 0)
PY
    last=$out
}
step "valid call" "completed -" agent c1 greet '{"name": "agent"}'
step "invalid arguments" "failed invalid_arguments" agent c2 greet '{"name": 42}'
step "unauthorized principal" "failed unknown_tool" intruder c3 greet '{"name": "x"}'
step "destructive tool, no approval" "failed approval_required" agent c4 write_text '{"path": "session.txt", "content": "approved"}'
handle=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["approval"]["handle"])' "$last" 2>/dev/null)
# The human sees the call and answers yes; the ledger keeps no content, so the arguments are
# given again and checked against the handle.
token=$("$bin" approve --config "$s" --arguments '{"path": "session.txt", "content": "approved"}' \
    --yes "$handle" 2>/dev/null)
echo "  (a human ran: toolhost approve --arguments '{…}' --yes ${handle:0:16}…)"
step "resubmitted with the token" "completed -" agent c5 write_text '{"path": "session.txt", "content": "approved"}' "$token"
step "the token again" "failed approval_reused" agent c6 write_text '{"path": "session.txt", "content": "approved"}' "$token"
step "duplicate id, other arguments" "failed duplicate_call_id" agent c1 greet '{"name": "someone else"}'
step "same id, same arguments: replay" "completed -" agent c1 greet '{"name": "agent"}'
step "hostile guest" "failed fuel_exhausted" agent c7 spin '{}'

# What the ledger keeps of it: its hash chain checked whole, and the approved write's signed
# receipt checked offline with the host's public key alone.
tmp=$(mktemp -d)
trap 'kill $server 2>/dev/null; rm -rf "$tmp"' EXIT
evidence() { # label want json
    printf '%-34s ' "$1"
    python3 - "$2" "$3" <<'PY' || unexpected=$((unexpected + 1))
import json, sys
want, raw = sys.argv[1:3]
try:
    r = json.loads(raw)
except ValueError:
    r = {}
if "intact" in r:
    got = "intact" if r["intact"] else "not intact"
    shown = f"{got}: {r['links']} links in {r['chains']} chain(s)"
elif r.get("valid"):
    got = "valid"
    shown = f"valid: {r['tool']} {r['status']}, signed by {r['key'][:19]}…"
else:
    got = shown = "no answer"
mark = "" if got == want else f" <- expected {want}"
print(shown + mark)
sys.exit(1 if mark else 0)
PY
}
evidence "the ledger's chain" intact "$("$bin" ledger verify --config "$s" 2>/dev/null)"
"$bin" receipt --config "$s" "$run" c5 >"$tmp/c5.receipt.json" 2>/dev/null
"$bin" receipt key --config "$s" >"$tmp/host.pub" 2>/dev/null
evidence "c5's receipt, checked offline" valid "$("$bin" receipt verify --key "$tmp/host.pub" \
    --principal agent --tenant default "$tmp/c5.receipt.json" 2>/dev/null)"
echo
echo "the ledger of this run: $bin ledger --config $s --run $run"
if [ "$unexpected" -gt 0 ]; then
    echo "$unexpected row(s) ended other than expected (marked <- above)" >&2
    exit 1
fi
