#!/usr/bin/env bash
# docs/slurm-sweep.sbatch on a real one-node Slurm cluster: a job array of three shards of a
# small sweep, a merge job that depends on it, and the merged files compared byte for byte with
# the same sweep run here unsharded.
#
#   bash tests/e2e/slurm_sweep_test.sh TRAINSIM SOURCE_DIR [TMP_BASE]
#
# Hermetic: its own munge key and munged, slurm.conf (SLURM_CONF), ports, state, spool and logs
# in a fresh folder under TMP_BASE (default TMPDIR or /tmp); /etc/slurm and the system's munge
# are not touched. Needs root and the packages `bash scripts/bootstrap.sh test` installs. The
# daemons are stopped however it ends; the folder is removed on success and kept on failure.
set -euo pipefail

if (($# < 2)); then
  echo "usage: bash tests/e2e/slurm_sweep_test.sh TRAINSIM SOURCE_DIR [TMP_BASE]" >&2
  exit 2
fi
trainsim=$(realpath "$1")
src=$(realpath "$2")
base=${3:-${TMPDIR:-/tmp}}
PATH=$PATH:/usr/sbin:/sbin

say() { echo "slurm_sweep_test: $*"; }
fail() { say "FAILED: $*" >&2; exit 1; }

# Prerequisites: one line each, never a skip.
[ "$(id -u)" -eq 0 ] || fail "must run as root (it starts its own slurmctld, slurmd and munged)"
for tool in slurmctld slurmd sbatch scontrol squeue sinfo munged munge unmunge; do
  command -v "$tool" >/dev/null ||
    fail "$tool not found: install Slurm and munge with 'bash scripts/bootstrap.sh test'"
done
[ -x "$trainsim" ] || fail "no trainsim binary at $trainsim"
[ -f "$src/docs/slurm-sweep.sbatch" ] || fail "$src is not the trainsim checkout"

# Whatever Slurm the caller's environment points at is not ours.
while read -r name; do unset "$name"; done < <(compgen -e | grep -E '^(SLURM|SBATCH|SALLOC|SRUN|SQUEUE|SINFO)_' || true)

mkdir -p "$base"
tmp=$(mktemp -d "$base/slurm-sweep.XXXXXX")
tmp=$(realpath "$tmp")
chmod 700 "$tmp"
host=$(hostname -s)
# Unix socket names (munged's, slurmd's per job step in its spool) hold at most 107 bytes.
if ((${#tmp} + ${#host} + 40 > 107)); then
  rmdir "$tmp"
  fail "$tmp is too long a path for Unix sockets: give a shorter TMPDIR or TMP_BASE"
fi
deadline=$((SECONDS + ${TRAINSIM_SLURM_TEST_BUDGET:-240}))
# Sleeps a moment while time is left; timeouts take what is left.
pause() { ((SECONDS < deadline)) || fail "out of time (${TRAINSIM_SLURM_TEST_BUDGET:-240} s)"; sleep "$1"; }
left() { echo $((deadline > SECONDS ? deadline - SECONDS : 1)); }

pids=()
watchdog=""
started=""

show_logs() {
  echo "---- jobs"
  [ -n "${array:-}" ] && timeout 10 scontrol show job "$array" 2>&1 | grep -E 'JobId=|JobState=|Reason=|ExitCode=' || true
  [ -n "${merge:-}" ] && timeout 10 scontrol show job "$merge" 2>&1 | grep -E 'JobId=|JobState=|Reason=|ExitCode=' || true
  local log
  for log in "$tmp"/sweep/*.log "$tmp"/log/*; do
    # A daemon logs to its .log once it has read slurm.conf, to its .out before.
    [ -f "$log" ] && ! [ -f "${log%.out}.log" ] || continue
    echo "---- ${log#"$tmp"/} (last 40 lines)"
    tail -n 40 "$log"
  done
}

cleanup() {
  local status=$?
  set +e
  trap - INT TERM
  if [ -n "$started" ] && ((status != 0)); then show_logs >&2; fi
  if ((${#pids[@]})); then
    # Only our controller, through our slurm.conf: never the host's (/etc/slurm) by mistake.
    if [ -n "${ctld_pid:-}" ]; then
      [ -n "${array:-}" ] && SLURM_CONF=$tmp/etc/slurm.conf timeout 10 scancel "$array" ${merge:+"$merge"} >/dev/null 2>&1
      SLURM_CONF=$tmp/etc/slurm.conf timeout 10 scontrol shutdown >/dev/null 2>&1
    fi
    local pid tries
    for pid in "${pids[@]}"; do
      [ "$pid" = "${munged_pid:-}" ] && continue
      for tries in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    done
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    for pid in "${pids[@]}"; do
      for tries in $(seq 25); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      kill -KILL "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
    done
  fi
  [ -n "$watchdog" ] && kill "$watchdog" 2>/dev/null
  # What the jobs left running (a trainsim of a cancelled task writes under our folder).
  pkill -KILL -f -- "$tmp/" 2>/dev/null
  if ((status == 0)); then
    rm -rf "$tmp"
  else
    say "kept $tmp" >&2
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A daemon runs in the foreground, a child of this script, its pid in run/pids; the watchdog
# stops the daemons if this script dies without its EXIT trap (SIGKILL).
start() {
  local name=$1
  shift
  "$@" >"$tmp/log/$name.out" 2>&1 &
  pids+=($!)
  echo "$!" >>"$tmp/run/pids"
}
alive() { kill -0 "$1" 2>/dev/null || fail "$2 exited: see $tmp/log"; }

mkdir -p "$tmp"/{etc,munge,state,spool,log,run,sweep,local,scratch}
started=1
export TMPDIR=$tmp/scratch

(
  exec >/dev/null 2>&1
  while kill -0 $$; do sleep 1; done
  while read -r pid; do
    grep -qaF "$tmp" "/proc/$pid/cmdline" && kill -KILL "$pid"
  done <"$tmp/run/pids"
) &
watchdog=$!

# munge: its own key, socket and files.
head -c 1024 /dev/urandom >"$tmp/munge/munge.key"
chmod 400 "$tmp/munge/munge.key"
socket=$tmp/munge/munge.socket
start munged munged --foreground --force --socket="$socket" --key-file="$tmp/munge/munge.key" \
  --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/log/munged.log" --seed-file="$tmp/munge/munged.seed"
munged_pid=${pids[-1]}
until timeout 5 munge -n -S "$socket" 2>/dev/null | timeout 5 unmunge -S "$socket" >/dev/null 2>&1; do
  alive "$munged_pid" munged
  pause 0.2
done

# Two free ports outside the usual ephemeral range (not Slurm's 6817/6818).
port_in_use() {
  local hex
  printf -v hex ':%04X' "$1"
  awk -v port="$hex" 'FNR > 1 && substr($2, length($2) - 4) == port { found = 1 } END { exit !found }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
free_port() {
  local port
  while :; do
    port=$((20000 + RANDOM % 10000))
    [ "$port" != "${1:-}" ] && ! port_in_use "$port" && break
  done
  echo "$port"
}
ctld_port=$(free_port)
slurmd_port=$(free_port "$ctld_port")

node=$(timeout 30 slurmd -C | head -n 1)
[[ $node == NodeName=* ]] || fail "slurmd -C did not describe this node: $node"
node="NodeName=$host NodeAddr=127.0.0.1 ${node#NodeName=* }"
export SLURM_CONF=$tmp/etc/slurm.conf
: >"$tmp/etc/plugstack.conf"
cat >"$SLURM_CONF" <<EOF
ClusterName=trainsim$$
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/run/slurmctld.pid
SlurmdPidFile=$tmp/run/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
PlugStackConfig=$tmp/etc/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SlurmdParameters=config_overrides
ReturnToService=2
MailProg=/bin/true
$node State=UNKNOWN
PartitionName=sweep Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF

start slurmctld slurmctld -D -f "$SLURM_CONF"
ctld_pid=${pids[-1]}
start slurmd slurmd -D -N "$host" -f "$SLURM_CONF"
slurmd_pid=${pids[-1]}
until timeout 5 scontrol ping 2>/dev/null | grep -q 'is UP'; do
  alive "$ctld_pid" slurmctld
  pause 0.2
done
while :; do
  alive "$ctld_pid" slurmctld
  alive "$slurmd_pid" slurmd
  state=$(timeout 5 sinfo -h -N -n "$host" -o %t 2>/dev/null || true)
  case "$state" in
    idle) break ;;
    drain* | down*) timeout 5 scontrol update NodeName="$host" State=RESUME >/dev/null 2>&1 || true ;;
  esac
  pause 0.2
done
say "cluster up after ${SECONDS} s (ports $ctld_port, $slurmd_port)"

# The documented job array, unchanged: three shards of 12 configurations, one CPU each; then
# the merge job its header shows, once every task has succeeded.
vary=(--vary memory.zero=0,1,2 --vary training.micro_batch=1,2 --vary memory.recompute=none,full)
out=$tmp/sweep
array=$(cd "$src" && TRAINSIM=$trainsim timeout 30 sbatch --parsable --array=1-3 --cpus-per-task=1 \
  --mem=100M --chdir="$src" --output="$out/slurm-%A_%a.log" docs/slurm-sweep.sbatch \
  "$out" tests/fixtures/tiny-ddp.ini "${vary[@]}")
array=${array%%;*}
quoted=$(printf %q "$out")
merge=$(timeout 30 sbatch --parsable --dependency="afterok:$array" --kill-on-invalid-dep=yes \
  --chdir="$src" --output="$out/merge-%j.log" \
  --wrap "$(printf %q "$trainsim") sweep merge $quoted/shard-*.jsonl -o $quoted/all.csv")
merge=${merge%%;*}

# Wait for both: any task failed, cancelled or held (a failed launch is requeued held) fails now.
while :; do
  states=$(timeout 10 squeue -h -r -t all -j "$array,$merge" -o "%i %T %r" 2>/dev/null) || states=""
  if [ -n "$states" ] && grep -qvE ' (COMPLETED|PENDING|CONFIGURING|RUNNING|COMPLETING) ' <<<"$states" ||
    grep -qiE 'held|NeverSatisfied' <<<"$states"; then
    fail "the jobs did not complete: $(tr '\n' ';' <<<"$states")"
  fi
  [ -n "$states" ] && ! grep -qvE ' COMPLETED ' <<<"$states" && break
  alive "$ctld_pid" slurmctld
  alive "$slurmd_pid" slurmd
  pause 0.5
done
completed=$(grep -c " COMPLETED " <<<"$states")
((completed == 4)) || fail "Slurm ran $completed jobs, not 3 array tasks and the merge: $(tr "\n" ";" <<<"$states")"
say "job array $array and merge job $merge completed after ${SECONDS} s"

# Each array task ran its own shard: its log (named by Slurm) shows trainsim given that shard,
# its files hold a third of the configurations.
for shard in 1 2 3; do
  log=$out/slurm-${array}_$shard.log
  [ -f "$log" ] || fail "no log of array task $shard ($log)"
  grep -q "(shard $shard/3)" "$log" || fail "array task $shard did not run shard $shard/3: $(cat "$log")"
  rows=$(wc -l <"$out/shard-$shard.jsonl") || fail "array task $shard wrote no shard-$shard.jsonl"
  ((rows == 4)) || fail "shard-$shard.jsonl has $rows rows, not 4"
done
grep -q 'merged 12 configurations from 3 file' "$out/merge-$merge.log" ||
  fail "the merge job did not merge the three shards: $(cat "$out/merge-$merge.log")"

# The same sweep here, unsharded: the merged files are the same bytes.
(cd "$src" && timeout "$(left)" "$trainsim" sweep tests/fixtures/tiny-ddp.ini "${vary[@]}" -j 1 \
  -o "$tmp/local/all.csv" >"$tmp/log/local-sweep.out" 2>&1) || fail "the local sweep failed: see $tmp/log/local-sweep.out"
for ext in csv jsonl svg html; do
  [ -f "$out/all.$ext" ] || fail "the merge job wrote no all.$ext"
  cmp "$out/all.$ext" "$tmp/local/all.$ext" ||
    fail "merged all.$ext differs from the unsharded sweep's:
$(diff -u "$tmp/local/all.$ext" "$out/all.$ext" | head -n 40)"
done
say "passed in ${SECONDS} s: merged shards equal the unsharded sweep"
