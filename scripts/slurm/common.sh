# Shared by start-local.sh and stop-local.sh (sourced, not run): where the local cluster keeps its
# files, and how a daemon is found and stopped by the pid file this project wrote for it.
#
# LLEM_SLURM_DIR: the cluster's own directory (default: .slurm/ in the checkout, git-ignored).
# Under it: run/ (one pid file per daemon these scripts started), state/, log/, bin/ (a sacct
# stand-in), slurm.conf.orig (an /etc/slurm/slurm.conf that was there before, restored on stop).

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BASE=${LLEM_SLURM_DIR:-$REPO/.slurm}
case "$BASE" in /*) ;; *) BASE="$PWD/$BASE" ;; esac
RUN=$BASE/run
STATE=$BASE/state
LOGDIR=$BASE/log
CONF=/etc/slurm/slurm.conf
MARK="# written by llem's scripts/slurm/start-local.sh"

die() { log "error: $*"; exit 1; }
need_root() { [ "$(id -u)" = 0 ] || die "needs root (it installs packages and starts daemons)"; }

# pid_alive PIDFILE NAME: print the pid recorded in PIDFILE when that process is alive, is not a
# zombie, and is called NAME (so a recycled pid is never mistaken for ours).
pid_alive() {
  local f=$1 name=$2 pid
  [ -s "$f" ] || return 1
  pid=$(tr -dc 0-9 < "$f" 2>/dev/null)
  [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ] || return 1
  [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ] || return 1
  echo "$pid"
}

# stop_pidfile PIDFILE NAME: SIGTERM the recorded process (only if it is NAME), wait up to 15 s,
# then SIGKILL; remove the pid file.
stop_pidfile() {
  local f=$1 name=$2 pid i
  if ! pid=$(pid_alive "$f" "$name"); then
    [ ! -e "$f" ] || log "$name: pid file $f names no running $name; removed"
    rm -f "$f"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 150); do pid_alive "$f" "$name" >/dev/null || break; sleep 0.1; done
  if pid_alive "$f" "$name" >/dev/null; then
    log "$name (pid $pid) still running after 15 s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
  log "stopped $name (pid $pid)"
}
