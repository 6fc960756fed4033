# Single-node SLURM for CI: source this file, then `slurm_up` and (in a trap) `slurm_down`.
#
#   source .ci/slurm-cluster.sh
#   trap slurm_down EXIT
#   slurm_install   # apt-get slurm-wlm + munge when sbatch is missing (root, Debian)
#   slurm_up        # munged, slurmctld, slurmd; waits until the node is idle
#
# Facts that shaped it (Debian 12, Slurm 22.05, snakemake-executor-plugin-slurm 2.8):
# - the config must be /etc/slurm/slurm.conf: the jobstep plugin strips SLURM_CONF
#   before it calls srun, so a config elsewhere is not seen inside a job. A config
#   already there is moved aside and put back by slurm_down.
# - no slurmdbd: sacct fails, so Snakemake must poll with squeue, which only sees jobs
#   for MinJobAge seconds after they end; MinJobAge >= 3 x the plugin's
#   slurm-init-seconds-before-status-checks (the plugin checks this). Here it is an
#   hour (SLURM_MIN_JOB_AGE), so that `squeue --states=all` still lists every job of
#   the run at the end.
# - no cgroups in a container: proctrack/linuxproc, task/none, no accounting.
# - munged runs as the munge user and needs /run/munge.
# - the node declares SLURM_FAKE_GPUS (default 1) GPUs of a GPU partition's kind
#   (GresTypes=gpu, Gres=gpu:N, gres.conf with AutoDetect=off) backed by character
#   devices created here (/dev/fedgdp-fakegpuK, NVIDIA's major number 195), so that a
#   job asking for --gpus is scheduled and runs, on the CPU; 0 declares none.
# Only the daemons started here are stopped, by their pid.

SLURM_CI_DIR="${SLURM_CI_DIR:-}"
SLURM_CONF_PATH=/etc/slurm/slurm.conf
SLURM_MIN_JOB_AGE="${SLURM_MIN_JOB_AGE:-3600}"
SLURM_FAKE_GPUS="${SLURM_FAKE_GPUS:-1}"
SLURM_GRES_PATH=/etc/slurm/gres.conf
_SLURM_PIDS=()
_SLURM_CONF_BACKUP=""
_SLURM_GRES_BACKUP=""
_SLURM_FAKE_DEVICES=()
_SLURM_MUNGED_OURS=0

_slurm_log() { printf '[slurm-ci %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

slurm_install() {
    if command -v sbatch >/dev/null && command -v slurmctld >/dev/null \
        && command -v slurmd >/dev/null && command -v munged >/dev/null; then
        _slurm_log "slurm-wlm and munge already installed ($(_slurm_versions))"
        return 0
    fi
    if [[ $(id -u) -ne 0 ]]; then
        _slurm_log "installing slurm-wlm and munge needs root"; return 1
    fi
    _slurm_log "installing slurm-wlm and munge from Debian packages"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq slurm-wlm munge >/dev/null
    _slurm_log "installed $(_slurm_versions)"
}

_slurm_versions() {
    dpkg-query -W -f='${Package} ${Version}  ' slurm-wlm munge 2>/dev/null || true
}

_slurm_wait() {  # _slurm_wait SECONDS DESCRIPTION COMMAND...
    local limit=$1 what=$2; shift 2
    local t0=$SECONDS
    until "$@" >/dev/null 2>&1; do
        if (( SECONDS - t0 > limit )); then
            _slurm_log "timed out after ${limit}s waiting for $what"; return 1
        fi
        sleep 1
    done
}

_slurm_running() {  # is a process with this exact name running? (no procps needed)
    local f
    for f in /proc/[0-9]*/comm; do
        [[ $(cat "$f" 2>/dev/null) == "$1" ]] && return 0
    done
    return 1
}

_slurm_node_idle() {
    [[ $(sinfo --noheader --Node --format=%T 2>/dev/null | head -n1) == idle* ]]
}

slurm_up() {
    local host cpus mem
    if _slurm_running slurmctld || _slurm_running slurmd; then
        _slurm_log "a slurmctld or slurmd is already running here; refusing to start a second"
        return 1
    fi
    SLURM_CI_DIR="${SLURM_CI_DIR:-$(mktemp -d /tmp/slurm-ci.XXXXXX)}"
    mkdir -p "$SLURM_CI_DIR"/{state,spool,log}

    # munge: the key comes with the Debian package; make one if it is missing.
    if [[ ! -s /etc/munge/munge.key ]]; then
        install -d -o munge -g munge -m 0700 /etc/munge
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
        chown munge:munge /etc/munge/munge.key; chmod 0400 /etc/munge/munge.key
    fi
    install -d -o munge -g munge -m 0755 /run/munge
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        _slurm_log "munged already running; using it"
    else
        runuser -u munge -- /usr/sbin/munged --force
        _SLURM_MUNGED_OURS=1
        _slurm_wait 20 munged sh -c 'munge -n | unmunge'
    fi

    host=$(hostname -s)
    cpus=$(nproc)
    mem=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
    mem=$(( mem - 1024 ))
    if [[ -e $SLURM_CONF_PATH ]]; then
        _SLURM_CONF_BACKUP="$SLURM_CI_DIR/slurm.conf.orig"
        cp -p "$SLURM_CONF_PATH" "$_SLURM_CONF_BACKUP"
    fi
    mkdir -p "$(dirname "$SLURM_CONF_PATH")"
    local gres_types="" node_gres=""
    if (( SLURM_FAKE_GPUS > 0 )); then
        _slurm_fake_gpus || return 1
        gres_types="GresTypes=gpu"
        node_gres="Gres=gpu:$SLURM_FAKE_GPUS"
    fi
    cat > "$SLURM_CONF_PATH" <<EOF
# Written by fedgdp's .ci/slurm-cluster.sh for a CI run; removed when it ends.
ClusterName=ci
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$SLURM_CI_DIR/state
SlurmdSpoolDir=$SLURM_CI_DIR/spool
SlurmctldPidFile=$SLURM_CI_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_CI_DIR/slurmd.pid
SlurmctldLogFile=$SLURM_CI_DIR/log/slurmctld.log
SlurmdLogFile=$SLURM_CI_DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MinJobAge=$SLURM_MIN_JOB_AGE
SchedulerParameters=sched_interval=2
MpiDefault=none
$gres_types
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem $node_gres State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
    _slurm_log "wrote $SLURM_CONF_PATH: node $host, CPUs=$cpus, RealMemory=$mem MB, fake GPUs=$SLURM_FAKE_GPUS"

    /usr/sbin/slurmctld -D -i >"$SLURM_CI_DIR/log/slurmctld.out" 2>&1 &
    _SLURM_PIDS+=($!)
    _slurm_wait 30 slurmctld scontrol ping || { tail -n 20 "$SLURM_CI_DIR"/log/slurmctld.*; return 1; }
    /usr/sbin/slurmd -D >"$SLURM_CI_DIR/log/slurmd.out" 2>&1 &
    _SLURM_PIDS+=($!)
    _slurm_wait 60 "node $host idle" _slurm_node_idle || {
        sinfo -N -l; tail -n 20 "$SLURM_CI_DIR"/log/slurmd.*; return 1; }
    _slurm_log "SLURM is up: $(sinfo --noheader --Node --format='%N %T cpus=%c mem=%m')"
}

_slurm_fake_gpus() {  # gres.conf and the device files of SLURM_FAKE_GPUS fake GPUs
    local k dev
    if [[ -e $SLURM_GRES_PATH ]]; then
        _SLURM_GRES_BACKUP="$SLURM_CI_DIR/gres.conf.orig"
        cp -p "$SLURM_GRES_PATH" "$_SLURM_GRES_BACKUP"
    fi
    echo "# Written by fedgdp's .ci/slurm-cluster.sh for a CI run; removed when it ends." > "$SLURM_GRES_PATH"
    echo "AutoDetect=off" >> "$SLURM_GRES_PATH"
    for (( k=0; k<SLURM_FAKE_GPUS; k++ )); do
        dev=/dev/fedgdp-fakegpu$k
        [[ -e $dev ]] || { mknod "$dev" c 195 "$(( 200 + k ))" || { _slurm_log "cannot create $dev (mknod)"; return 1; }
                           _SLURM_FAKE_DEVICES+=("$dev"); }
        echo "Name=gpu File=$dev" >> "$SLURM_GRES_PATH"
    done
    _slurm_log "wrote $SLURM_GRES_PATH: $SLURM_FAKE_GPUS fake GPU(s) on ${_SLURM_FAKE_DEVICES[*]:-existing devices}"
}

slurm_down() {
    local pid
    if [[ ${#_SLURM_PIDS[@]} -gt 0 ]] && command -v scancel >/dev/null; then
        scancel --full --user="$(id -un)" 2>/dev/null || true
    fi
    # slurmd first, then slurmctld (reverse order of start).
    for (( i=${#_SLURM_PIDS[@]}-1; i>=0; i-- )); do
        pid=${_SLURM_PIDS[i]}
        kill -TERM "$pid" 2>/dev/null || continue
        for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    _SLURM_PIDS=()
    if (( _SLURM_MUNGED_OURS )) && [[ -r /run/munge/munged.pid ]]; then
        pid=$(cat /run/munge/munged.pid)
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
        _SLURM_MUNGED_OURS=0
    fi
    if [[ -n $_SLURM_CONF_BACKUP && -e $_SLURM_CONF_BACKUP ]]; then
        cp -p "$_SLURM_CONF_BACKUP" "$SLURM_CONF_PATH"
    elif [[ -n $SLURM_CI_DIR ]] && grep -qs "fedgdp's .ci/slurm-cluster.sh" "$SLURM_CONF_PATH"; then
        rm -f "$SLURM_CONF_PATH"
    fi
    _SLURM_CONF_BACKUP=""
    if [[ -n $_SLURM_GRES_BACKUP && -e $_SLURM_GRES_BACKUP ]]; then
        cp -p "$_SLURM_GRES_BACKUP" "$SLURM_GRES_PATH"
    elif grep -qs "fedgdp's .ci/slurm-cluster.sh" "$SLURM_GRES_PATH"; then
        rm -f "$SLURM_GRES_PATH"
    fi
    _SLURM_GRES_BACKUP=""
    rm -f "${_SLURM_FAKE_DEVICES[@]}"
    _SLURM_FAKE_DEVICES=()
    if [[ -n $SLURM_CI_DIR && -d $SLURM_CI_DIR ]]; then
        if [[ ${SLURM_CI_KEEP:-0} == 1 ]]; then
            _slurm_log "kept SLURM's state and logs in $SLURM_CI_DIR"
        else
            rm -rf "$SLURM_CI_DIR"
        fi
    fi
    SLURM_CI_DIR=""
    _slurm_log "SLURM torn down"
}
