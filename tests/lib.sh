# Sourced by the shell tests (after `set -u`); sourcing only defines what
# follows and starts the counters.
#
#   make_temp_dir     $tmp: a fresh folder for the test's runs. At exit
#                     (normal, failed or by a signal) the script's on_exit
#                     function runs first if it defines one, then its
#                     background jobs still running are SIGKILLed and reaped,
#                     then $tmp is removed (kept, and named, when KEEP is set).
#                     The EXIT trap is lib.sh's: set no other. (Subshells
#                     and background jobs ended by a signal leave all this
#                     to the script.)
#   ok / bad MESSAGE  count a passed / failed check (bad prints FAIL: MESSAGE).
#   summary NAME [MORE]  prints "NAME: P passed, F failed[, MORE]"; its status
#                     (the script's last command) is 0 when nothing failed.
#   wait_until SECONDS COMMAND...  runs COMMAND every 0.05 s until it succeeds
#                     (status 0) or SECONDS have passed (status 1).
#   wait_exit PID SECONDS [FROM]  waits until SECONDS after FROM (a `now`;
#                     default: now) for the background job PID to end; sets
#                     rc to its exit status, or to "hung" when it was still
#                     running then (it is SIGKILLed), and t_end to when.
#   now               seconds since the epoch, with nanoseconds.
#   kill_jobs         SIGKILLs the script's background jobs and reaps them.
#   tiny_config SRC_DIR TMP_DIR > FILE  a config that trains a tiny model on
#                     the toy corpus in seconds.

pass=${pass:-0} fail=${fail:-0}  # a script that counted before sourcing keeps its counts
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
summary() {
  echo "$1: $pass passed, $fail failed${2:+, $2}"
  [ "$fail" -eq 0 ]
}

kill_jobs() {
  local p
  for p in $(jobs -p); do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
}

make_temp_dir() {
  tmp=$(mktemp -d)
  trap _lib_exit EXIT
}
_lib_exit() {
  # Only the script itself: a background job that a signal ends before it
  # execs its command runs this trap too, and must leave all this alone.
  # (Its BASHPID and BASH_SUBSHELL can still read as the script's here.)
  local me _
  read -r me _ </proc/self/stat
  [ "$me" = "$$" ] || return 0
  trap - EXIT INT TERM HUP
  if [ -n "${KEEP:-}" ]; then echo "kept $tmp"; fi
  exec 2>/dev/null  # (no "Killed" notices)
  if declare -F on_exit >/dev/null; then on_exit; fi
  kill_jobs
  [ -n "${KEEP:-}" ] || rm -rf "$tmp"
}

wait_until() {
  local limit=$1 i
  shift
  for ((i = 0; i < limit * 20; i++)); do
    "$@" && return 0
    sleep 0.05
  done
  return 1
}

now() { date +%s.%N; }

# shellcheck disable=SC2034  # rc and t_end are for the caller
wait_exit() {
  local pid=$1 deadline
  deadline=$(awk -v t="${3:-$(now)}" -v l="$2" 'BEGIN { printf "%.3f", t + l }')
  while kill -0 "$pid" 2>/dev/null; do
    if awk -v t="$(now)" -v d="$deadline" 'BEGIN { exit !(t > d) }'; then
      t_end=$(now)
      kill -9 "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
      rc=hung
      return
    fi
    sleep 0.1
  done
  t_end=$(now)
  wait "$pid"
  rc=$?
}

tiny_config() {
  cat <<YAML
data: {train_src: $1/data/toy/train.zh, train_tgt: $1/data/toy/train.en, valid_src: $1/data/toy/valid.zh, valid_tgt: $1/data/toy/valid.en, prepared_dir: $2/prepared}
model: {d_model: 32, heads: 4, encoder_layers: 1, decoder_layers: 1, ff_dim: 64, dropout: 0.1}
attention: {backend: flash}
train: {batch_tokens: 800, max_steps: 30, max_minutes: 0, eval_every: 1000, valid_max_sentences: 16, valid_bleu_sentences: 0, best_metric: loss, log_every: 5, progress: false, threads: 1}
YAML
}
