#!/usr/bin/env bash
# Start a single-node SLURM cluster on this machine for llem's cluster tests (tests/cluster):
# munged, slurmctld and slurmd, partition `debug`; wait until the node is idle; print "slurm ready".
# Stop it with scripts/slurm/stop-local.sh, which stops only what this script started.
#
# Needs root and Debian's packages (slurmctld, slurmd, slurm-client, munge: the parts of
# slurm-wlm used here); installs the missing ones with apt-get. No systemd, no cgroups, no
# accounting daemon (llem's sweep watchdog reads job states from squeue).
#
# It writes /etc/slurm/slurm.conf (where the SLURM commands look for it; one that was there is
# kept in $LLEM_SLURM_DIR/slurm.conf.orig and put back on stop) and keeps pid files, state and logs
# in LLEM_SLURM_DIR (default .slurm/ in the checkout). Running it again reuses the daemons it
# started. A munged already running on this machine is used and left alone; a slurmctld or slurmd
# it did not start stops it with an error.
#
# Env: LLEM_SLURM_DIR, LLEM_SLURM_PARTITION (default debug), LLEM_SLURM_READY_S (default 60).
set -euo pipefail
log() { echo "[slurm start] $*" >&2; }
# shellcheck source=scripts/slurm/common.sh
source "$(dirname "$0")/common.sh"
PARTITION=${LLEM_SLURM_PARTITION:-debug}
READY_S=${LLEM_SLURM_READY_S:-60}
need_root
t0=$SECONDS

wait_for_file() { local i; for i in $(seq 1 100); do [ -s "$1" ] && return 0; sleep 0.1; done; return 1; }

install_missing() {
  local bin missing=0
  for bin in /usr/sbin/munged /usr/sbin/slurmctld /usr/sbin/slurmd /usr/bin/sbatch; do
    [ -x "$bin" ] || missing=1
  done
  [ "$missing" = 1 ] || return 0
  log "installing slurmctld slurmd slurm-client munge (apt-get; log: $BASE/apt.log)"
  export DEBIAN_FRONTEND=noninteractive
  local made_policy=0 rc=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then  # the packages must not start their services themselves
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    made_policy=1
  fi
  { apt-get update -qq \
      && apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge
  } > "$BASE/apt.log" 2>&1 || rc=$?
  [ "$made_policy" = 0 ] || rm -f /usr/sbin/policy-rc.d
  [ "$rc" = 0 ] || { tail -20 "$BASE/apt.log" >&2; die "apt-get failed (log: $BASE/apt.log)"; }
}

write_conf() {
  local host hw cpus boards spb cps tpc mem new
  host=$(hostname -s)
  hw=$(/usr/sbin/slurmd -C | head -1)  # NodeName=.. CPUs=.. Boards=.. ... RealMemory=..
  field() { grep -o "\b$1=[0-9]*" <<< "$hw" | head -1 | cut -d= -f2; }
  cpus=$(field CPUs) boards=$(field Boards) spb=$(field SocketsPerBoard)
  cps=$(field CoresPerSocket) tpc=$(field ThreadsPerCore) mem=$(field RealMemory)
  [ -n "$cpus" ] && [ -n "$mem" ] || die "could not read 'slurmd -C': $hw"
  mem=$((mem * 90 / 100))  # a little under the real figure, or the node is drained
  new=$(cat <<CONF
$MARK
# A single-node test cluster; its state, logs and pid files are under $BASE.
ClusterName=llem-local
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
SchedulerType=sched/backfill
# the default batch_sched_delay=3 starts batch jobs on a 3 s cadence only
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
ReturnToService=2
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$LOGDIR/slurmctld.log
SlurmdLogFile=$LOGDIR/slurmd.log
InactiveLimit=0
KillWait=30
MinJobAge=300
SlurmctldTimeout=120
SlurmdTimeout=300
Waittime=0
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus Boards=$boards SocketsPerBoard=$spb CoresPerSocket=$cps ThreadsPerCore=$tpc RealMemory=$mem State=UNKNOWN
PartitionName=$PARTITION Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
)
  if [ -e "$CONF" ] && ! grep -qF "$MARK" "$CONF" && [ ! -e "$BASE/slurm.conf.orig" ]; then
    cp -a "$CONF" "$BASE/slurm.conf.orig"
    log "kept the existing $CONF as $BASE/slurm.conf.orig (stop puts it back)"
  fi
  if [ "$(cat "$CONF" 2>/dev/null || true)" != "$new" ]; then
    mkdir -p "$(dirname "$CONF")"
    printf '%s\n' "$new" > "$CONF"
    log "wrote $CONF"
    stop_pidfile "$RUN/slurmd.pid" slurmd  # a daemon of ours still has the old file
    stop_pidfile "$RUN/slurmctld.pid" slurmctld
  fi
}

start_munged() {
  local pid
  [ -s /etc/munge/munge.key ] || {
    /usr/sbin/mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
    chmod 0600 /etc/munge/munge.key
  }
  if pid=$(pid_alive "$RUN/munged.pid" munged); then
    log "munged already running (pid $pid, started by this script)"
    return 0
  fi
  rm -f "$RUN/munged.pid"
  if munge -n < /dev/null 2> /dev/null | unmunge > /dev/null 2>&1; then
    log "a munged this script did not start answers on /run/munge: using it (stop leaves it alone)"
    return 0
  fi
  install -d -o munge -g munge -m 0755 /run/munge
  rm -f /run/munge/munged.pid
  runuser -u munge -- /usr/sbin/munged  # forks into the background, writes /run/munge/munged.pid
  wait_for_file /run/munge/munged.pid || die "munged did not start (see /var/log/munge/munged.log)"
  cp /run/munge/munged.pid "$RUN/munged.pid"  # our record: only this one is stopped later
  munge -n < /dev/null | unmunge > /dev/null || die "munge credential round trip failed"
  log "started munged (pid $(cat "$RUN/munged.pid"))"
}

start_daemon() {  # NAME
  local name=$1 pid
  if pid=$(pid_alive "$RUN/$name.pid" "$name"); then
    log "$name already running (pid $pid, started by this script)"
    return 0
  fi
  pid=$(ps -C "$name" -o pid=,stat= | awk '$2 !~ /^Z/ {print $1; exit}' || true)  # look only
  [ -z "$pid" ] || die "a $name this script did not start is running (pid $pid); stop it first"
  rm -f "$RUN/$name.pid"
  if [ "$name" = slurmctld ]; then
    rm -rf "$STATE/ctld"  # a fresh controller: no jobs left from an earlier start
    mkdir -p "$STATE/ctld"
  fi
  "/usr/sbin/$name"  # daemonizes and writes its pid file
  wait_for_file "$RUN/$name.pid" || die "$name did not start (see $LOGDIR/$name.log)"
  sleep 0.3
  pid=$(pid_alive "$RUN/$name.pid" "$name") || {
    tail -20 "$LOGDIR/$name.log" >&2
    die "$name exited"
  }
  log "started $name (pid $pid)"
}

wait_until_ready() {
  local host deadline state=""
  host=$(hostname -s)
  deadline=$((SECONDS + READY_S))
  while :; do
    state=$(sinfo -h -n "$host" -o '%T' 2> /dev/null | head -1 || true)
    case "$state" in
      idle | mixed | allocated | completing) return 0 ;;
      down* | drain* | fail*) scontrol update NodeName="$host" State=RESUME > /dev/null 2>&1 || true ;;
    esac
    if [ "$SECONDS" -ge "$deadline" ]; then
      tail -15 "$LOGDIR/slurmctld.log" "$LOGDIR/slurmd.log" >&2 || true
      die "node $host not ready after ${READY_S} s (state '$state')"
    fi
    sleep 0.3
  done
}

mkdir -p "$BASE" "$RUN" "$STATE/ctld" "$STATE/d" "$LOGDIR"
install_missing
log "$(/usr/sbin/slurmctld -V), munge $(dpkg-query -W -f='${Version}' munge 2> /dev/null)"
write_conf
start_munged
start_daemon slurmctld
start_daemon slurmd
wait_until_ready
sinfo >&2
log "ready in $((SECONDS - t0)) s"
echo "slurm ready"
