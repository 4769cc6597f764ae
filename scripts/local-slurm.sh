#!/usr/bin/env bash
# Bring up / tear down a real single-node SLURM cluster (with accounting) on
# this machine, for testing the Hydra submitit launcher locally and in CI.
#
#   bash scripts/local-slurm.sh start    # install if needed, start, wait until usable
#   bash scripts/local-slurm.sh status   # exit 0 iff the cluster is usable
#   bash scripts/local-slurm.sh stop     # stop only the daemons this script started
#
# Target: Debian 12, run as root, no systemd, no cgroups. Daemons run in the
# foreground (-D / -F) under setsid, so the PID we record is the daemon itself.
# Components: munged -> mariadbd -> slurmdbd -> slurmctld -> slurmd.
# A daemon that is already running but was not started by this script is
# reused as is and never stopped by `stop`.
#
# Environment overrides:
#   XDRL_SLURM_STATE_DIR  where PIDs and daemon stdout go (/run/xdrl-local-slurm)
#   XDRL_SLURM_CLUSTER    cluster name (xdrl)
#   XDRL_SLURM_TIMEOUT    seconds to wait for each readiness check (90)
set -euo pipefail

STATE_DIR="${XDRL_SLURM_STATE_DIR:-/run/xdrl-local-slurm}"
CLUSTER="${XDRL_SLURM_CLUSTER:-xdrl}"
TIMEOUT="${XDRL_SLURM_TIMEOUT:-90}"
PARTITION="debug"
HOST="$(hostname -s)"

SLURM_CONF=/etc/slurm/slurm.conf
SLURMDBD_CONF=/etc/slurm/slurmdbd.conf
MARKER="# Managed by xdrl scripts/local-slurm.sh"
DB_NAME=slurm_acct_db
DB_USER=slurm

PACKAGES=(munge slurm-wlm slurmdbd mariadb-server mariadb-client)
# Start order; `stop` walks it backwards.
COMPONENTS=(munged mariadbd slurmdbd slurmctld slurmd)

log() { printf '[local-slurm] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# --------------------------------------------------------------------------
# PID bookkeeping: $STATE_DIR/<component>.pid holds PIDs *we* started.
# --------------------------------------------------------------------------

# PID recorded for a component if that process is still alive and is the
# expected program (guards against PID reuse); empty otherwise.
owned_pid() {
    local name=$1 f="$STATE_DIR/$1.pid" pid
    [[ -f $f ]] || return 0
    pid=$(<"$f")
    if [[ -n $pid && -r /proc/$pid/comm && "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$name" ]]; then
        echo "$pid"
    fi
}

# PIDs of running processes called $1 that we did not start.
foreign_pids() {
    local name=$1 mine
    mine=$(owned_pid "$name")
    pgrep -x "$name" 2>/dev/null | grep -vx "${mine:-none}" || true
}

# Launch a daemon detached, in the foreground mode of the program, and record
# its PID. Usage: launch NAME CMD...
launch() {
    local name=$1; shift
    mkdir -p "$STATE_DIR"
    # setsid execs in place (a background job is no process-group leader), so
    # $! is the daemon's PID once the exec chain (setpriv etc.) has finished.
    setsid "$@" </dev/null >>"$STATE_DIR/$name.out" 2>&1 &
    local pid=$!
    echo "$pid" >"$STATE_DIR/$name.pid"
    local i
    for ((i = 0; i < 20; i++)); do
        [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$name" ]] && { log "started $name (pid $pid)"; return 0; }
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    rm -f "$STATE_DIR/$name.pid"
    tail -n 20 "$STATE_DIR/$name.out" >&2 || true
    die "$name failed to start (see $STATE_DIR/$name.out)"
}

# Stop a daemon we started: SIGTERM, wait, then SIGKILL.
terminate() {
    local name=$1 pid i
    pid=$(owned_pid "$name")
    if [[ -z $pid ]]; then
        rm -f "$STATE_DIR/$name.pid"
        if [[ -n "$(foreign_pids "$name")" ]]; then
            log "$name: running but not started by this script; left alone"
        fi
        return 0
    fi
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 300; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "$name did not exit after 30 s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$STATE_DIR/$name.pid"
}

# Poll a command until it succeeds or $TIMEOUT seconds pass.
wait_for() {
    local what=$1; shift
    local deadline=$((SECONDS + TIMEOUT))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || die "timed out after ${TIMEOUT}s waiting for $what"
        sleep 1
    done
}

# --------------------------------------------------------------------------
# Health checks (also used by `status`).
# --------------------------------------------------------------------------
munge_ok()     { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
mariadb_ok()   { mariadb-admin --silent ping >/dev/null 2>&1; }
slurmdbd_ok()  { sacctmgr -n -P list cluster format=cluster >/dev/null 2>&1; }
slurmctld_ok() { scontrol ping 2>/dev/null | grep -q 'is UP'; }
sacct_ok()     { sacct -n -X -S now-1hours >/dev/null 2>&1; }
node_state()   { sinfo -h -n "$HOST" -o '%T' 2>/dev/null | head -n1; }
node_ok() {
    # idle is what a fresh cluster reaches; busy states mean it is up too.
    case "$(node_state)" in
        idle | mixed | allocated | completing) return 0 ;;
        *) return 1 ;;
    esac
}

# --------------------------------------------------------------------------
# Step 1: install packages (only what is missing).
# --------------------------------------------------------------------------
install_packages() {
    local missing=() p
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    [[ $EUID -eq 0 ]] || die "must run as root to install: ${missing[*]}"
    log "installing: ${missing[*]}"
    # Keep package maintainer scripts from starting services themselves: we
    # start (and track) every daemon ourselves.
    local policy=/usr/sbin/policy-rc.d added_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        added_policy=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    local rc=0
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; } || rc=$?
    ((added_policy)) && rm -f "$policy"
    ((rc == 0)) || die "apt-get failed (exit $rc)"
}

# --------------------------------------------------------------------------
# Step 2: users, directories and the munge key.
# --------------------------------------------------------------------------
prepare_dirs() {
    getent passwd slurm >/dev/null || useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin slurm
    getent passwd munge >/dev/null || die "user 'munge' missing (munge package broken?)"
    getent passwd mysql >/dev/null || die "user 'mysql' missing (mariadb-server package broken?)"

    # munge: strict ownership/permission checks in munged.
    install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge
    install -d -o munge -g munge -m 0700 /var/log/munge
    install -d -o munge -g munge -m 0755 /run/munge
    if [[ ! -s /etc/munge/munge.key ]]; then
        log "creating /etc/munge/munge.key"
        if command -v mungekey >/dev/null; then
            mungekey --create --keyfile=/etc/munge/munge.key --force
        else
            dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
        fi
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 0600 /etc/munge/munge.key

    # mariadb
    install -d -o mysql -g mysql -m 0755 /run/mysqld

    # slurm
    install -d -o root -g root -m 0755 /etc/slurm
    install -d -o slurm -g slurm -m 0755 /var/log/slurm /run/slurm
    install -d -o slurm -g slurm -m 0700 /var/spool/slurmctld
    install -d -o root -g root -m 0755 /var/spool/slurmd
    mkdir -p "$STATE_DIR"
}

# --------------------------------------------------------------------------
# Step 3: slurm.conf and slurmdbd.conf.
# --------------------------------------------------------------------------

# Replace $2 by the text on stdin if it differs; back up a foreign file once.
# Returns 0 if the file changed.
write_if_changed() {
    local dest=$1 mode=$2 owner=$3 tmp
    tmp=$(mktemp)
    cat >"$tmp"
    if [[ -f $dest ]] && cmp -s "$tmp" "$dest"; then
        rm -f "$tmp"
        chmod "$mode" "$dest"; chown "$owner" "$dest"
        return 1
    fi
    if [[ -f $dest ]] && ! grep -qF "$MARKER" "$dest" && [[ ! -e $dest.xdrl-bak ]]; then
        cp -p "$dest" "$dest.xdrl-bak"
        log "backed up existing $dest to $dest.xdrl-bak"
    fi
    install -m "$mode" -o "${owner%%:*}" -g "${owner##*:}" "$tmp" "$dest"
    rm -f "$tmp"
    log "wrote $dest"
    return 0
}

# Hardware as slurmd sees it: sets CPUS SOCKETS CORES THREADS MEM_MB.
detect_hardware() {
    local line
    line=$(slurmd -C 2>/dev/null | grep -m1 '^NodeName=' || true)
    field() { sed -n "s/.*[[:space:]]$1=\([0-9]*\).*/\1/p" <<<"$line"; }
    CPUS=$(field CPUs); SOCKETS=$(field SocketsPerBoard); CORES=$(field CoresPerSocket)
    THREADS=$(field ThreadsPerCore); MEM_MB=$(field RealMemory)
    if [[ -z $CPUS || -z $SOCKETS || -z $CORES || -z $THREADS || -z $MEM_MB ]]; then
        log "slurmd -C gave no usable answer; falling back to nproc/meminfo"
        CPUS=$(nproc); SOCKETS=1; CORES=$CPUS; THREADS=1
        MEM_MB=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024))
    fi
}

# slurm.conf on stdout; needs detect_hardware first.
render_slurm_conf() {
    # A little below what slurmd reports, or slurmd marks the node invalid
    # when the kernel's free memory view moves.
    local real_mem=$((MEM_MB * 95 / 100))
    local def_mem=$((real_mem / CPUS < 2048 ? real_mem / CPUS : 2048))
    cat <<EOF
$MARKER -- regenerated on every start.
ClusterName=$CLUSTER
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=slurm
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
# Short credential lifetime: a requeued job may start again after ~15 s
# instead of the default 120 s.
AuthInfo=cred_expire=10

StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log

# No systemd, no cgroups on these machines.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true

SchedulerType=sched/backfill
SchedulerParameters=bf_interval=2,sched_interval=5
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$def_mem
JobRequeue=1
ReturnToService=2
InactiveLimit=0
KillWait=10
MinJobAge=300
SlurmctldTimeout=120
SlurmdTimeout=300
Waittime=0

AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=6819
JobCompType=jobcomp/none

NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS Sockets=$SOCKETS CoresPerSocket=$CORES ThreadsPerCore=$THREADS RealMemory=$real_mem State=UNKNOWN
PartitionName=$PARTITION Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
}

# slurmdbd.conf on stdout; needs DB_PASS.
render_slurmdbd_conf() {
    cat <<EOF
$MARKER -- regenerated on every start.
AuthType=auth/munge
DbdHost=$HOST
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=slurm
LogFile=/var/log/slurm/slurmdbd.log
PidFile=/run/slurm/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StoragePort=3306
StorageLoc=$DB_NAME
StorageUser=$DB_USER
StoragePass=$DB_PASS
EOF
}

write_configs() {
    detect_hardware
    SLURM_CONF_CHANGED=0
    if render_slurm_conf | write_if_changed "$SLURM_CONF" 0644 root:root; then
        SLURM_CONF_CHANGED=1
    fi

    # Keep the database password across runs; make one up the first time.
    DB_PASS=""
    if [[ -f $SLURMDBD_CONF ]]; then
        DB_PASS=$(sed -n 's/^StoragePass=//p' "$SLURMDBD_CONF" | head -n1)
    fi
    if [[ -z $DB_PASS ]]; then
        DB_PASS=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
    fi
    render_slurmdbd_conf | write_if_changed "$SLURMDBD_CONF" 0600 slurm:slurm || true
}

# --------------------------------------------------------------------------
# Step 4..8: one function per daemon. Each is a no-op if the daemon runs.
# --------------------------------------------------------------------------

# If we own a live copy, or a foreign copy runs, do not start another.
# Returns 0 if the caller should start the daemon.
needs_start() {
    local name=$1 pid others
    pid=$(owned_pid "$name")
    if [[ -n $pid ]]; then
        log "$name already running (pid $pid, started by this script)"
        return 1
    fi
    others=$(foreign_pids "$name" | tr '\n' ' ')
    if [[ -n ${others// /} ]]; then
        log "$name already running (pid ${others% }, not started by this script; reusing)"
        return 1
    fi
    return 0
}

start_munged() {
    if needs_start munged; then
        if munge_ok; then
            log "a munge daemon answers already; reusing it"
        else
            rm -f /run/munge/munge.socket.2.lock
            launch munged setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged -F
        fi
    fi
    wait_for "munged" munge_ok
}

start_mariadb() {
    if needs_start mariadbd; then
        if mariadb_ok; then
            log "a MariaDB server answers already; reusing it"
        else
            if [[ ! -d /var/lib/mysql/mysql ]]; then
                log "initialising MariaDB data directory"
                mariadb-install-db --user=mysql --datadir=/var/lib/mysql >"$STATE_DIR/mariadb-install-db.out" 2>&1 \
                    || die "mariadb-install-db failed (see $STATE_DIR/mariadb-install-db.out)"
            fi
            launch mariadbd /usr/sbin/mariadbd --user=mysql --innodb-buffer-pool-size=256M --innodb-lock-wait-timeout=900
        fi
    fi
    wait_for "MariaDB" mariadb_ok
    # Database and user for slurmdbd (idempotent; also resyncs the password).
    mariadb -u root <<EOF || die "could not create the accounting database (is root unix-socket auth enabled?)"
CREATE DATABASE IF NOT EXISTS $DB_NAME;
CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASS';
ALTER USER '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASS';
GRANT ALL ON $DB_NAME.* TO '$DB_USER'@'localhost';
FLUSH PRIVILEGES;
EOF
}

start_slurmdbd() {
    if needs_start slurmdbd; then
        launch slurmdbd /usr/sbin/slurmdbd -D
    fi
    wait_for "slurmdbd" slurmdbd_ok
    # slurmctld wants its cluster to exist in the accounting database.
    if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
        log "registering cluster '$CLUSTER' with slurmdbd"
        sacctmgr -i add cluster "$CLUSTER" >/dev/null
    fi
}

start_slurmctld() {
    if needs_start slurmctld; then
        launch slurmctld /usr/sbin/slurmctld -D
    elif ((SLURM_CONF_CHANGED)); then
        log "slurm.conf changed; asking slurmctld to reconfigure"
        scontrol reconfigure || log "scontrol reconfigure failed; run 'stop' then 'start'"
    fi
    wait_for "slurmctld" slurmctld_ok
}

start_slurmd() {
    if needs_start slurmd; then
        launch slurmd /usr/sbin/slurmd -D
    fi
    # A node left DOWN/DRAINED by an earlier unclean stop: resume it once.
    local deadline=$((SECONDS + TIMEOUT)) resumed=0 state
    until node_ok; do
        state=$(node_state)
        if ((!resumed)) && [[ $state == down* || $state == drain* ]]; then
            log "node $HOST is '$state'; resuming it"
            scontrol update NodeName="$HOST" State=RESUME || true
            resumed=1
        fi
        ((SECONDS < deadline)) || die "timed out after ${TIMEOUT}s waiting for node $HOST to become idle (state: '${state:-?}')"
        sleep 1
    done
    wait_for "sacct" sacct_ok
}

# --------------------------------------------------------------------------
# Subcommands.
# --------------------------------------------------------------------------
cmd_start() {
    [[ $EUID -eq 0 ]] || die "run as root"
    local t0=$SECONDS
    install_packages
    prepare_dirs
    write_configs
    start_munged
    start_mariadb
    start_slurmdbd
    start_slurmctld
    start_slurmd
    log "cluster up in $((SECONDS - t0)) s"
    cmd_status
}

cmd_stop() {
    local i
    for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
        terminate "${COMPONENTS[i]}"
    done
    log "stopped"
}

cmd_status() {
    local name pid others ok=0
    for name in "${COMPONENTS[@]}"; do
        pid=$(owned_pid "$name")
        others=$(foreign_pids "$name" | tr '\n' ' ')
        if [[ -n $pid ]]; then
            printf '  %-10s running (pid %s, ours)\n' "$name" "$pid"
        elif [[ -n ${others// /} ]]; then
            printf '  %-10s running (pid %s, not ours)\n' "$name" "${others% }"
        else
            printf '  %-10s not running\n' "$name"
        fi
    done
    local checks=(munge_ok mariadb_ok slurmdbd_ok slurmctld_ok node_ok sacct_ok) c
    for c in "${checks[@]}"; do
        if command -v sinfo >/dev/null && "$c"; then
            printf '  check %-13s ok\n' "$c"
        else
            printf '  check %-13s FAILED\n' "$c"
            ok=1
        fi
    done
    if ((ok == 0)); then
        sinfo
        echo "local SLURM cluster '$CLUSTER' is UP"
    else
        echo "local SLURM cluster '$CLUSTER' is DOWN"
    fi
    return "$ok"
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    *)
        echo "usage: $0 start|stop|status" >&2
        exit 2
        ;;
esac
