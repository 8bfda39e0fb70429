#!/bin/bash
# The docker CLI's create options against `lis serve` (issue 22, item 2): each
# one honoured (seen from inside the container) or refused with dockerd's 400
# and a reason (docker exits 125). Usage: create_options.sh SOCKET IMAGE
# Prints one line per check, then "N passed, M failed".
set -u
export DOCKER_HOST=unix://$1 DOCKER_CONFIG=$(mktemp -d)
IMG=$2
pass=0 fail=0
check() { # name, expected, actual
    if [ "$2" == "$3" ]; then pass=$((pass + 1)); echo "ok $1"
    else fail=$((fail + 1)); echo "FAIL $1: expected [$2] got [$3]"; fi
}
run() { docker run --rm "$@" 2>&1; }
# refused: docker exits 125 with the daemon's message, which names the reason
refused() { # name, word the message holds, docker run args...
    local name=$1 word=$2 out rc
    shift 2
    out=$(docker run --rm "$@" "$IMG" true 2>&1); rc=$?
    if [ $rc -eq 125 ] && [[ "$out" == *"Error response from daemon"*"$word"* ]]; then
        pass=$((pass + 1)); echo "ok refused: $name"
    else
        fail=$((fail + 1)); echo "FAIL refused: $name: rc $rc: $out"
    fi
}
host=$(mktemp -d)
mkdir "$host/dir" "$host/outside"
echo hostfile > "$host/dir/f"
echo secret > "$host/outside/secret"
ln -s ../outside "$host/dir/esc"     # relative: resolved inside the container
ln -s "$host/outside" "$host/dir/abs" # absolute: a host path means nothing inside

# --- binds -----------------------------------------------------------------------
check "-v ro: reads the host's file" "hostfile" "$(run -v "$host/dir:/mnt:ro" "$IMG" cat /mnt/f)"
check "-v ro: a write fails" "1" "$(run -v "$host/dir:/mnt:ro" "$IMG" sh -c 'touch /mnt/g 2>/dev/null; echo $?')"
check "-v ro: nothing reached the host" "no" "$([ -e "$host/dir/g" ] && echo yes || echo no)"
run -v "$host/dir:/mnt" "$IMG" sh -c 'echo written > /mnt/w' >/dev/null
check "-v rw: the write reached the host" "written" "$(cat "$host/dir/w" 2>&1)"
check "-v rw: the host file is the owner's" "$(id -u)" "$(stat -c %u "$host/dir/w")"
check "--mount type=bind,readonly" "hostfile 1" "$(run --mount "type=bind,src=$host/dir,dst=/m,readonly" "$IMG" sh -c 'cat /m/f; touch /m/q 2>/dev/null; echo $?' | tr '\n' ' ' | sed 's/ $//')"
check "bind: a relative symlink resolves inside the container" "1" "$(run -v "$host/dir:/mnt:ro" "$IMG" sh -c 'cat /mnt/esc/secret >/dev/null 2>&1; echo $?')"
check "bind: an absolute symlink resolves inside the container" "1" "$(run -v "$host/dir:/mnt:ro" "$IMG" sh -c 'cat /mnt/abs/secret >/dev/null 2>&1; echo $?')"
run -v "$host/dir:/mnt" "$IMG" sh -c 'ln -s / /mnt/root-link; ln /etc/passwd /mnt/hard 2>/dev/null; true' >/dev/null
check "bind rw: a symlink made inside stays a symlink on the host" "/" "$(readlink "$host/dir/root-link")"
refused "a container path with .." "may not contain '..'" -v "$host/dir:/a/../b"
refused "a bind onto /proc" "lis's own" -v "$host/dir:/proc/x"
refused "a bind onto /" "destination can't be '/'" -v "$host/dir:/"
refused "a missing host path" "does not exist" -v "$host/nonexistent:/x"
chmod 000 "$host/outside"
refused "a host path the owner cannot read" "must be able to read" -v "$host/outside:/x"
chmod 755 "$host/outside"
refused "a named volume" "no volumes" -v myvolume:/data
refused "an anonymous volume" "anonymous volume" -v /data
refused "--mount type=volume" "no volumes" --mount type=volume,src=v,dst=/v
refused "--volumes-from" "VolumesFrom" --volumes-from other

# --- tmpfs, read-only root, /dev/shm ----------------------------------------------------
check "--tmpfs size" "1024" "$(run --tmpfs /t:size=1m "$IMG" sh -c "df -k /t | awk 'NR==2{print \$2}'")"
check "--tmpfs noexec" "126" "$(run --tmpfs /t:noexec "$IMG" sh -c 'cp /bin/true /t/t && /t/t 2>/dev/null; echo $?')"
check "--mount type=tmpfs,tmpfs-size" "2048" "$(run --mount type=tmpfs,dst=/t,tmpfs-size=2097152 "$IMG" sh -c "df -k /t | awk 'NR==2{print \$2}'")"
refused "--tmpfs bigger than the writable budget" "writable budget" --tmpfs /t:size=100g
check "--read-only: / and /tmp refuse writes, /dev/shm takes them" "1 1 0" "$(run --read-only "$IMG" sh -c 'touch /x 2>/dev/null; a=$?; touch /tmp/x 2>/dev/null; b=$?; touch /dev/shm/x; echo $a $b $?')"
check "--read-only --tmpfs /tmp" "0" "$(run --read-only --tmpfs /tmp "$IMG" sh -c 'touch /tmp/x; echo $?')"
check "--read-only keeps -w" "/work/d" "$(run --read-only -w /work/d "$IMG" pwd)"
check "--shm-size" "8192" "$(run --shm-size 8m "$IMG" sh -c "df -k /dev/shm | awk 'NR==2{print \$2}'")"

# --- limits and privileges --------------------------------------------------------------
check "--ulimit nofile" "100 200" "$(run --ulimit nofile=100:200 "$IMG" sh -c 'echo $(ulimit -n) $(ulimit -Hn)')"
refused "--ulimit past the server's own hard limit" "hard limit" --ulimit nofile=1000000000:1000000000
check "--cap-drop ALL" "0000000000000000" "$(run --cap-drop ALL "$IMG" sh -c "awk '/CapEff/{print \$2}' /proc/self/status")"
chown_rc() { run "$@" "$IMG" sh -c 'touch /tmp/o; chown 0:1 /tmp/o 2>/dev/null; echo $?'; }
check "chown works with the default capabilities" "0" "$(chown_rc)"
check "--cap-drop CHOWN: chown refused" "1" "$(chown_rc --cap-drop CHOWN)"
check "--cap-add of a default capability" "ok" "$(run --cap-add NET_RAW "$IMG" echo ok)"
refused "--cap-add SYS_ADMIN" "default capabilities at most" --cap-add SYS_ADMIN
refused "--cap-add ALL" "default capabilities at most" --cap-add ALL
refused "--privileged" "Privileged" --privileged
refused "--device" "Devices" --device /dev/null
refused "--pid host" "PidMode host" --pid host
refused "--ipc host" "IpcMode host" --ipc host
refused "--uts host" "UTSMode host" --uts host
refused "--userns host" "UsernsMode host" --userns host
refused "--security-opt seccomp=unconfined" "seccomp=unconfined" --security-opt seccomp=unconfined
refused "--security-opt apparmor=unconfined" "apparmor=unconfined" --security-opt apparmor=unconfined
refused "--security-opt label=disable" "label" --security-opt label=disable
refused "--security-opt systempaths=unconfined" "MaskedPaths is refused" --security-opt systempaths=unconfined
check "--security-opt no-new-privileges" "1" "$(run --security-opt no-new-privileges "$IMG" sh -c "awk '/NoNewPrivs/{print \$2}' /proc/self/status")"
refused "--sysctl" "Sysctls" --sysctl net.ipv4.ip_forward=1
refused "--cgroup-parent" "CgroupParent" --cgroup-parent custom
check "--init (lis-init is PID 1)" "ok" "$(run --init "$IMG" echo ok)"
check "--pids-limit -1" "ok" "$(run --pids-limit -1 "$IMG" echo ok)"

# --- the rest a dockerd would do and lis does not ----------------------------------------
refused "--network container:x" "NetworkMode" --network container:other
refused "--network of a user network that does not exist" "network mynet not found" --network mynet
refused "--dns" "Dns" --dns 1.1.1.1
refused "--add-host" "ExtraHosts" --add-host a:1.2.3.4
refused "--health-cmd" "Healthcheck" --health-cmd true
refused "--gpus" "DeviceRequests" --gpus all
refused "--oom-kill-disable" "OomKillDisable" --oom-kill-disable
refused "--log-driver none" "LogConfig" --log-driver none
out=$(docker run -d --restart always "$IMG" true 2>&1); rc=$?
[ $rc -eq 125 ] && [[ "$out" == *"RestartPolicy"* ]] && { pass=$((pass + 1)); echo "ok refused: --restart always"; } || { fail=$((fail + 1)); echo "FAIL refused: --restart always: $out"; }
check "--hostname" "myhost" "$(run --hostname myhost "$IMG" hostname)"
check "--network host (the unix socket is the owner's)" "ok" "$(run --network host "$IMG" echo ok)"

# --- inspect says what was honoured ------------------------------------------------------
id=$(docker create -v "$host/dir:/mnt:ro" --tmpfs /t --read-only "$IMG" true)
check "inspect: Mounts" "bind $host/dir /mnt false;tmpfs  /t true;" "$(docker inspect -f '{{range .Mounts}}{{.Type}} {{.Source}} {{.Destination}} {{.RW}};{{end}}' "$id")"
check "inspect: ReadonlyRootfs" "true" "$(docker inspect -f '{{.HostConfig.ReadonlyRootfs}}' "$id")"
docker rm "$id" >/dev/null
check "nothing left" "" "$(docker ps -aq)"
rm -rf "$host" "$DOCKER_CONFIG"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
