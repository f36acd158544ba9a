#!/usr/bin/env bash
# Data-parallel training across two "hosts": two Linux network namespaces
# joined by a veth pair, one rank in each, started the torchrun way
# (MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK/LOCAL_RANK, GLOO_SOCKET_IFNAME).
#   parity:       2 hosts give the 1-process losses (tolerance 1e-4 relative,
#                 as distributed_cli_test.sh);
#   slow link:    a tbf-throttled link with 2% random loss (nft/iptables),
#                 still the 1-process losses;
#   link flap:    both veth ends down for 3 s once the ranks train, then up: still the
#                 1-process losses (this kernel has no netem; tbf, nft and
#                 link-down stand in for its delay, loss and outages);
#   partition:    everything between the hosts dropped while they exchange
#                 gradients: both ranks exit non-zero within NMT_DIST_TIMEOUT
#                 + 5 s with one `nmt: ` line naming the other rank;
#   partition during a save: the same while rank 0 saves a checkpoint (slowed
#                 with NMT_TEST_SAVE_DELAY_MS) and rank 1 waits for it;
#   killed host:  every process of host B (then of host A) SIGKILLed: the
#                 survivor exits the same way;
# and after each fault rank 0's last/ checkpoint translates (its manifest's
# SHA-256 sums verified). All traffic stays inside the two namespaces; the
# EXIT trap kills whatever runs in them and deletes them (and the veth).
# Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN); otherwise prints SKIP and exits 77.
# Packet loss and the partition use nft (Debian package nftables), else
# iptables; without either, loss is left out and the partition is `ip link
# set down`.
# Usage: multihost_test.sh NMT_BINARY SOURCE_DIR
set -u
nmt=$1
src=$2

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "not root (network namespaces need CAP_SYS_ADMIN)"
command -v ip >/dev/null || skip "no ip command (iproute2)"

. "$(dirname "$0")/lib.sh"
make_temp_dir
nsa=nmtA$$ nsb=nmtB$$          # the two hosts
deva=nmtva$$ devb=nmtvb$$      # veth ends (interface names: at most 15 characters)
addra=10.213.77.1 addrb=10.213.77.2
timeout_s=10                   # NMT_DIST_TIMEOUT for the fault cases
margin_s=5 

# At exit (lib.sh's trap, before it removes $tmp): whatever runs in the two
# hosts is killed, then the hosts (and the veth with them) are deleted.
on_exit() {
  local ns p
  for ns in "$nsa" "$nsb"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  done
  kill_jobs
  ip netns del "$nsa" 2>/dev/null
  ip netns del "$nsb" 2>/dev/null
}
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

ip netns add "$nsa" 2>"$tmp/netns.err" || skip "ip netns add failed: $(head -1 "$tmp/netns.err")"
ip netns add "$nsb" || skip "ip netns add failed"
ip link add "$deva" netns "$nsa" type veth peer name "$devb" netns "$nsb" 2>"$tmp/veth.err" ||
  skip "no veth pair: $(head -1 "$tmp/veth.err")"
ip -n "$nsa" addr add $addra/24 dev "$deva"
ip -n "$nsb" addr add $addrb/24 dev "$devb"
for ns in "$nsa" "$nsb"; do ip -n "$ns" link set lo up; done
ip -n "$nsa" link set "$deva" up
ip -n "$nsb" link set "$devb" up

tiny_config "$src" "$tmp" >"$tmp/tiny.yaml"
sed -i 's/log_every: 5/log_every: 1/' "$tmp/tiny.yaml"   # every step's loss compared
head -1 "$src/data/toy/test.zh" >"$tmp/one.zh"

# The tools for faults: a firewall that works inside a namespace, tbf.
# NMT_MULTIHOST_FW=nft|iptables|none forces one (to test the fallbacks).
fw=none
want=${NMT_MULTIHOST_FW:-any}
if [[ $want == @(any|nft) ]] && command -v nft >/dev/null && ip netns exec "$nsa" nft add table inet nmt_probe 2>/dev/null; then
  ip netns exec "$nsa" nft delete table inet nmt_probe
  fw=nft
elif [[ $want == @(any|iptables) ]] && command -v iptables >/dev/null && ip netns exec "$nsa" iptables -L OUTPUT -n >/dev/null 2>&1; then
  fw=iptables
fi
have_tbf=no
if tc -n "$nsa" qdisc add dev "$deva" root tbf rate 20mbit burst 32kbit latency 50ms 2>/dev/null; then
  tc -n "$nsa" qdisc del dev "$deva" root
  have_tbf=yes
fi
echo "fault tools: firewall $fw, tbf $have_tbf (netem is not required)"

ns_of() { [ "$1" = 0 ] && echo "$nsa" || echo "$nsb"; }
dev_of() { [ "$1" = 0 ] && echo "$deva" || echo "$devb"; }

# rank R PORT TIMEOUT RUNDIR LOG [env VAR=...] [--set ...]: starts rank R in its
# namespace, in the background; its pid is $!.
rank() {
  local r=$1 port=$2 to=$3 dir=$4 log=$5
  shift 5
  local envs=()
  while [ $# -gt 0 ] && [[ $1 == *=* ]]; do envs+=("$1"); shift; done
  ip netns exec "$(ns_of "$r")" env MASTER_ADDR=$addra MASTER_PORT="$port" WORLD_SIZE=2 RANK="$r" LOCAL_RANK=0 \
    NMT_DIST_TIMEOUT="$to" GLOO_SOCKET_IFNAME="$(dev_of "$r")" "${envs[@]}" \
    "$nmt" train --config "$tmp/tiny.yaml" --set train.checkpoint_dir="$dir" --threads 1 "$@" >"$log" 2>&1 &
}
# end_case: nothing of a case outlives it (its ranks run on when it gave up early).
end_case() {
  local p
  exec 3>&2 2>/dev/null
  for p in $(jobs -p); do kill -9 "$p"; done
  wait
  exec 2>&3 3>&-
}

elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# (now, wait_exit PID LIMIT_S [FROM] and wait_until: lib.sh)

# The one `nmt: ` line of a log, or a note that there is none or several.
error_line() {
  local n
  n=$(grep -c '^nmt: ' "$1")
  if [ "$n" -eq 1 ]; then grep '^nmt: ' "$1"; else echo "($n lines starting 'nmt: '; last output: $(tail -1 "$1"))"; fi
}

losses_match() {  # REFERENCE_METRICS OTHER_METRICS STEPS LABEL
  /usr/bin/python3 - "$@" <<'PY'
import json, sys
def losses(p): return [json.loads(l)["train_loss"] for l in open(p) if '"train_loss"' in l]
try:
    a, b = losses(sys.argv[1]), losses(sys.argv[2])
except OSError as e:
    print(f"{sys.argv[4]}: {e}")
    sys.exit(1)
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b)) if a and len(a) == len(b) else 1.0
print(f"{sys.argv[4]}: {len(b)} logged losses (want {sys.argv[3]}), worst relative difference {worst:.2e}")
sys.exit(0 if len(a) == int(sys.argv[3]) and len(b) == len(a) and worst < 1e-4 else 1)
PY
}

# Firewall rules between the hosts (on each veth end); loopback traffic in a
# namespace (rank 0 to its own store) is left alone.
fw_loss() {  # NS DEV PERCENT
  case $fw in
    nft) ip netns exec "$1" nft -f - <<NFT
table inet nmt_loss {
  chain in { type filter hook input priority -10; iifname "$2" numgen random mod 100 < $3 drop; }
  chain out { type filter hook output priority -10; oifname "$2" numgen random mod 100 < $3 drop; }
}
NFT
    ;;
    iptables)
      ip netns exec "$1" iptables -I INPUT -i "$2" -m statistic --mode random --probability "0.0$3" -j DROP &&
        ip netns exec "$1" iptables -I OUTPUT -o "$2" -m statistic --mode random --probability "0.0$3" -j DROP ;;
    *) return 1 ;;
  esac
}
fw_unloss() {  # NS DEV
  case $fw in
    nft) ip netns exec "$1" nft delete table inet nmt_loss ;;
    iptables) ip netns exec "$1" iptables -F INPUT && ip netns exec "$1" iptables -F OUTPUT ;;
  esac
}
partition() {
  local ok=0
  case $fw in
    nft)
      for pair in "$nsa $deva" "$nsb $devb"; do
        set -- $pair
        ip netns exec "$1" nft -f - <<NFT || ok=1
table inet nmt_partition {
  chain in { type filter hook input priority -20; iifname "$2" drop; }
  chain out { type filter hook output priority -20; oifname "$2" drop; }
}
NFT
      done ;;
    iptables)
      for pair in "$nsa $deva" "$nsb $devb"; do
        set -- $pair
        ip netns exec "$1" iptables -I INPUT -i "$2" -j DROP && ip netns exec "$1" iptables -I OUTPUT -o "$2" -j DROP || ok=1
      done ;;
    *) ip -n "$nsa" link set "$deva" down && ip -n "$nsb" link set "$devb" down || ok=1 ;;
  esac
  return $ok
}
heal() {
  case $fw in
    nft) for ns in "$nsa" "$nsb"; do ip netns exec "$ns" nft delete table inet nmt_partition 2>/dev/null; done ;;
    iptables) for ns in "$nsa" "$nsb"; do ip netns exec "$ns" iptables -F INPUT; ip netns exec "$ns" iptables -F OUTPUT; done ;;
    *) ip -n "$nsa" link set "$deva" up; ip -n "$nsb" link set "$devb" up ;;
  esac
}

start_all=$(now)
steps=20
short=(--set train.max_steps=$steps --set train.eval_every=4)

# The reference: one process (inside host A, so nothing leaves the namespaces).
ip netns exec "$nsa" "$nmt" train --config "$tmp/tiny.yaml" --set train.checkpoint_dir="$tmp/one" --threads 1 \
  "${short[@]}" >"$tmp/one.log" 2>&1 || bad "1 process: $(tail -2 "$tmp/one.log")"

# Runs both ranks to the end (bounded) and compares rank 0's losses with the reference.
two_hosts() {  # NAME PORT [--set ...]
  local name=$1 port=$2 t0 r0 r1 took
  shift 2
  t0=$(now)
  rank 0 "$port" 30 "$tmp/$name" "$tmp/$name.0.log" "${short[@]}" "$@"
  local p0=$!
  rank 1 "$port" 30 "$tmp/$name.r1" "$tmp/$name.1.log" "${short[@]}" "$@"
  local p1=$!
  wait_exit $p0 120; r0=$rc
  wait_exit $p1 30; r1=$rc
  took=$(elapsed "$t0" "$(now)")
  outcome="both ranks exit 0"
  if [ "$r0" = 0 ] && [ "$r1" = 0 ]; then ok
  else
    outcome="rank 0 exit $r0, rank 1 exit $r1"
    bad "$name: $outcome: $(tail -1 "$tmp/$name.0.log") / $(tail -1 "$tmp/$name.1.log")"
  fi
  if summary=$(losses_match "$tmp/${ref:-one}/metrics.jsonl" "$tmp/$name/metrics.jsonl" "${ref_steps:-$steps}" "$name: 2 hosts vs 1 process"); then ok
  else bad "$summary"; fi
  summary="$summary, $outcome, ${took} s"
  echo "$summary"
}

two_hosts parity 29501

# a. Slow, lossy link: tbf on both veth ends (20 Mbit/s, up to 50 ms of
# queueing), 2% of the packets dropped at random each way.
faults=""
if [ $have_tbf = yes ]; then
  tc -n "$nsa" qdisc add dev "$deva" root tbf rate 20mbit burst 32kbit latency 50ms
  tc -n "$nsb" qdisc add dev "$devb" root tbf rate 20mbit burst 32kbit latency 50ms
  faults="tbf 20 Mbit/s"
fi
if fw_loss "$nsa" "$deva" 2 && fw_loss "$nsb" "$devb" 2; then faults="${faults:+$faults + }2% random loss ($fw)"; fi
[ -n "$faults" ] || echo "note: no tbf and no firewall: the slow-link case runs on a clean link"
two_hosts slow_link 29502
echo "fault: slow link ($faults) -> ${summary#*: }"
if [ $have_tbf = yes ]; then tc -n "$nsa" qdisc del dev "$deva" root; tc -n "$nsb" qdisc del dev "$devb" root; fi
fw_unloss "$nsa" "$deva" 2>/dev/null
fw_unloss "$nsb" "$devb" 2>/dev/null

# c. Link flap: both veth ends down for 3 s while the ranks train (shorter
# than the ranks' 30 s timeout), then up: TCP retransmits, training goes on
# with the same losses (against a 60-step run of one process: 20 steps end
# before the flap would).
ip netns exec "$nsa" "$nmt" train --config "$tmp/tiny.yaml" --set train.checkpoint_dir="$tmp/one60" --threads 1 \
  "${short[@]}" --set train.max_steps=60 >"$tmp/one60.log" 2>&1 || bad "1 process, 60 steps: $(tail -2 "$tmp/one60.log")"
flap_log=$tmp/flap.txt
# Down once the group trains (rank 0 has logged a step): a link that is down
# while the ranks connect fails the rendezvous at once (no route to host),
# which is another fault than a flap.
( wait_until 60 grep -q train_loss "$tmp/link_flap/metrics.jsonl" 2>/dev/null
  ip -n "$nsa" link set "$deva" down; ip -n "$nsb" link set "$devb" down
  echo "down $(now)" >"$flap_log"
  sleep 3
  ip -n "$nsa" link set "$deva" up; ip -n "$nsb" link set "$devb" up
  echo "up $(now)" >>"$flap_log" ) &
flapper=$!
ref=one60 ref_steps=60 two_hosts link_flap 29507 --set train.max_steps=60
wait $flapper
# The flap happened while the ranks ran: both ends came back up before they ended.
up_at=$(sed -n 's/^up //p' "$flap_log")
if [ -n "$up_at" ] && awk -v u="$up_at" -v e="$t_end" 'BEGIN { exit !(u < e) }'; then ok
else bad "link flap: the link was not down while the ranks trained ($(tr '\n' ' ' <"$flap_log"), ended $t_end)"; fi
echo "fault: link down for 3 s once training runs -> ${summary#*: }"

# The checks after a fault: RANK exited non-zero within the timeout + margin
# (from T_FAULT), with one `nmt: ` line naming PEER; rank 0's last/ translates.
long=(--set train.max_steps=100000 --set train.eval_every=4)
check_exit() {  # LABEL RANK RC T_END T_FAULT LOG PEER
  local label=$1 r=$2 code=$3 took line
  took=$(elapsed "$5" "$4")
  line=$(error_line "$6")
  if [ "$code" != hung ] && [ "$code" -ne 0 ] &&
     awk -v t="$took" -v l=$((timeout_s + margin_s)) 'BEGIN { exit !(t <= l) }' &&
     [[ $line == "nmt: "*"distributed: rank $r at step "*" failed after "*" s (NMT_DIST_TIMEOUT $timeout_s s; "*"rank $7"* ]]; then
    ok
  else
    bad "$label: rank $r exit $code after $took s (limit $((timeout_s + margin_s)) s): $line"
  fi
  echo "  rank $r exit $code after $took s: $line"
}
check_last() {  # LABEL RUNDIR
  if [ -f "$2/last/manifest.txt" ] &&
     ip netns exec "$nsa" "$nmt" translate --checkpoint "$2/last" --input "$tmp/one.zh" --threads 1 \
       >"$2.translate.out" 2>"$2.translate.err" && [ "$(wc -l <"$2.translate.out")" -eq 1 ]; then
    ok; intact="last/ intact (step $(sed -n 's/^step: //p' "$2/last/state.yaml"))"
  else
    bad "$1: rank 0's last checkpoint: $(ls "$2/last" 2>&1 | tr '\n' ' ') $(tail -1 "$2.translate.err" 2>/dev/null)"
    intact="last/ DAMAGED or missing"
  fi
}

# b. Partition while the ranks exchange gradients. To pin that moment, host
# B's rank is stopped first: rank 0 runs on until it blocks in a collective
# that needs rank 1 (everything it sent before lies in B's socket buffers);
# then the link is cut and rank 1 resumed.
d=$tmp/partition
rank 0 29503 $timeout_s "$d" "$d.0.log" "${long[@]}"; p0=$!
rank 1 29503 $timeout_s "$d.r1" "$d.1.log" "${long[@]}"; p1=$!
if wait_until 60 test -e "$d/last/manifest.txt"; then
  kill -STOP $p1; sleep 0.5
  partition || bad "partition: could not cut the link"
  tf=$(now); kill -CONT $p1
  echo "partition (while exchanging gradients) at $(elapsed "$start_all" "$tf") s:"
  wait_exit $p0 $((timeout_s + margin_s + 5)) "$tf"; r0=$rc t0=$t_end
  wait_exit $p1 $((timeout_s + margin_s + 5)) "$tf"; r1=$rc t1=$t_end
  check_exit partition 0 "$r0" "$t0" "$tf" "$d.0.log" 1
  check_exit partition 1 "$r1" "$t1" "$tf" "$d.1.log" 0
  check_last partition "$d"
  echo "fault: partition -> rank 0 exit $r0 after $(elapsed "$tf" "$t0") s, rank 1 exit $r1 after $(elapsed "$tf" "$t1") s: $(error_line "$d.0.log"); $intact"
else
  bad "partition: no checkpoint within 60 s: $(tail -1 "$d.0.log")"
fi
end_case
heal

# b2. Partition while rank 0 saves a checkpoint and rank 1 waits for rank
# 0's verdict: rank 0 is held inside its first save that replaces a
# checkpoint (the test hold at the swap, util/test_hooks.h), the link is cut
# while it is there, then the hold is released.
d=$tmp/partition_save
rank 0 29504 $timeout_s "$d" "$d.0.log" NMT_TEST_HOLD=save-replace:$d.hold "${long[@]}"; p0=$!
rank 1 29504 $timeout_s "$d.r1" "$d.1.log" "${long[@]}"; p1=$!
if wait_until 60 test -e "$d.hold"; then
  partition || bad "partition during a save: could not cut the link"
  tf=$(now)
  if grep -q "test hold: at save-replace" "$d.0.log" && kill -0 $p0 2>/dev/null; then ok
  else bad "partition during a save: rank 0 was not inside a save when the link was cut"; fi
  rm -f "$d.hold"
  echo "partition (rank 0 held inside a save) at $(elapsed "$start_all" "$tf") s:"
  wait_exit $p0 $((timeout_s + margin_s + 5)) "$tf"; r0=$rc t0=$t_end
  wait_exit $p1 $((timeout_s + margin_s + 5)) "$tf"; r1=$rc t1=$t_end
  check_exit "partition during a save" 0 "$r0" "$t0" "$tf" "$d.0.log" 1
  check_exit "partition during a save" 1 "$r1" "$t1" "$tf" "$d.1.log" 0
  check_last "partition during a save" "$d"
  echo "fault: partition during a save -> rank 0 exit $r0 after $(elapsed "$tf" "$t0") s, rank 1 exit $r1 after $(elapsed "$tf" "$t1") s: $(error_line "$d.1.log"); $intact"
else
  bad "partition during a save: rank 0 reached no save that replaces a checkpoint within 60 s: $(tail -1 "$d.0.log")"
fi
end_case
heal

# c. Killed host: every process in host B's namespace SIGKILLed, after a
# checkpoint; then the same for host A (rank 0, which hosts the store).
for victim in 1 0; do
  d=$tmp/kill_$victim
  survivor=$((1 - victim))
  rank 0 $((29505 + victim)) $timeout_s "$d" "$d.0.log" "${long[@]}"; p0=$!
  rank 1 $((29505 + victim)) $timeout_s "$d.r1" "$d.1.log" "${long[@]}"; p1=$!
  if wait_until 60 test -e "$d/last/manifest.txt"; then
    sleep 0.3
    ps=$([ $survivor = 0 ] && echo $p0 || echo $p1)
    pv=$([ $victim = 0 ] && echo $p0 || echo $p1)
    exec 3>&2 2>/dev/null  # (no "Killed" notice from bash for the host killed on purpose)
    for p in $(ip netns pids "$(ns_of $victim)"); do kill -9 "$p"; done
    tf=$(now)
    wait_exit "$pv" 5
    exec 2>&3 3>&-
    wait_exit "$ps" $((timeout_s + margin_s + 5)) "$tf"; rs=$rc ts=$t_end
    check_exit "host of rank $victim killed" $survivor "$rs" "$ts" "$tf" "$d.$survivor.log" $victim
    check_last "host of rank $victim killed" "$d"
    echo "fault: host of rank $victim killed (SIGKILL) -> rank $survivor exit $rs after $(elapsed "$tf" "$ts") s: $(error_line "$d.$survivor.log"); $intact"
  else
    bad "kill rank $victim: no checkpoint within 60 s: $(tail -1 "$d.0.log")"
  fi
  end_case
done

summary multihost "$(elapsed "$start_all" "$(now)") s"
