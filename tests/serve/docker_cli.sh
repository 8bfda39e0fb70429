#!/bin/bash
# The docker CLI (package docker.io, as a client only) against `lis serve`:
# mini-swe-agent's and SWE-ReX's sequences, cp both ways, exit codes, kill ->
# 137, ps --filter ancestor, the errors. Usage: docker_cli.sh SOCKET|tcp://HOST:PORT IMAGE
# (tcp://: over mutual TLS with DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH from the
# environment). Prints one line per check, then "N passed, M failed".
set -u
case $1 in
tcp://*) export DOCKER_HOST=$1 ;;
*) export DOCKER_HOST=unix://$1 ;;
esac
export DOCKER_CONFIG=$(mktemp -d)
IMG=$2
pass=0 fail=0
check() { # name, expected, actual
    if [ "$2" == "$3" ]; then pass=$((pass + 1)); echo "ok $1"
    else fail=$((fail + 1)); echo "FAIL $1: expected [$2] got [$3]"; fi
}
check "version" "1.41" "$(docker version --format '{{.Server.APIVersion}}' 2>&1)"
out=$(docker run --rm "$IMG" sh -c 'echo hi; echo err >&2; exit 7' 2>&1); rc=$?
check "run --rm: output" "hi err" "$(echo $out | tr '\n' ' ' | sed 's/ $//')"
check "run --rm: exit code" "7" "$rc"
check "run --rm: removed" "" "$(docker ps -aq)"
id=$(docker run -d --name msa1 -w /work/sub --rm "$IMG" sleep 2h)
check "run -d prints the id" "64" "${#id}"
check "exec -w -e bash -lc" "12 /work/sub" "$(docker exec -w /work/sub -e A=1 -e B=2 msa1 bash -lc 'echo $A$B $(pwd)' 2>&1)"
docker exec msa1 sh -c 'exit 5'; check "exec exit code" "5" "$?"
check "exec -i stdin, half-close" "l1 l2 done" "$(printf 'l1\nl2\n' | docker exec -i msa1 sh -c 'cat; echo done' | tr '\n' ' ' | sed 's/ $//')"
tmp=$(mktemp -d)
echo hello > "$tmp/f1.txt"; mkdir "$tmp/src"; echo deep > "$tmp/src/in.txt"
docker cp "$tmp/f1.txt" msa1:/tmp/ >/dev/null 2>&1
check "cp host -> container (into a dir)" "hello" "$(docker exec msa1 cat /tmp/f1.txt 2>&1)"
docker cp "$tmp/src" msa1:/tmp/src2 >/dev/null 2>&1
check "cp a dir to a new name" "deep" "$(docker exec msa1 cat /tmp/src2/in.txt 2>&1)"
docker cp msa1:/tmp/src2 "$tmp/back" >/dev/null 2>&1
check "cp container -> host" "deep" "$(cat "$tmp/back/in.txt" 2>&1)"
check "cp to stdout" "hello" "$(docker cp msa1:/tmp/f1.txt - 2>/dev/null | tar -xO)"
docker cp msa1:/nonexistent "$tmp/x" >/dev/null 2>&1; check "cp missing -> rc 1" "1" "$?"
check "ps --filter ancestor" "msa1" "$(docker ps --filter ancestor="$IMG" --format '{{.Names}}')"
docker pause msa1 >/dev/null; check "pause" "paused" "$(docker inspect -f '{{.State.Status}}' msa1 2>&1)"
check "ps shows a paused one as (Paused)" "msa1 paused" "$(docker ps --filter status=paused --format '{{.Names}} {{.State}}' 2>&1)"
docker exec msa1 true >/dev/null 2>&1; check "exec in a paused container fails" "1" "$?"
docker unpause msa1 >/dev/null; check "unpause, then exec" "ok" "$(docker exec msa1 echo ok 2>&1)"
docker stop msa1 >/dev/null; check "stop" "0" "$?"
docker rm -f msa1 >/dev/null 2>&1; check "rm -f of an auto-removed one: rc 0" "0" "$?"
check "auto-removed after stop" "" "$(docker ps -aq)"
docker run -d --name k1 "$IMG" sleep 1000 >/dev/null
docker kill k1 >/dev/null
check "kill -> 137" "137" "$(docker wait k1)"
check "ps -a shows exited" "exited" "$(docker ps -a --filter name=k1 --format '{{.State}}')"
docker rm k1 >/dev/null; check "rm" "" "$(docker ps -aq)"
docker run --rm --name k2 "$IMG" sleep 1000 & sleep 2
docker kill k2 >/dev/null; wait $!; check "attached run killed -> 137" "137" "$?"
for i in 1 2 3; do docker run -d "$IMG" sleep 1000 >/dev/null; done
docker ps -aq --filter "ancestor=$IMG" | xargs -r docker stop >/dev/null
docker ps -aq --filter "ancestor=$IMG" | xargs -r docker rm -f >/dev/null
check "benchmark cleanup (stop, rm -f by ancestor)" "" "$(docker ps -aq --filter ancestor="$IMG")"
# -p HOSTPORT:8000 (SWE-ReX): the owner's 127.0.0.1:HOSTPORT reaches the sandbox's port 8000
hp=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
docker run -d --name web -p "$hp:8000" "$IMG" python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1
code=none
for _ in $(seq 50); do
    code=$(python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$hp/etc/', timeout=5).status)" 2>/dev/null) && break
    sleep 0.2
done
check "-p: 127.0.0.1:HOSTPORT reaches the sandbox's port 8000" "200" "$code"
check "NetworkSettings.Ports, loopback only" "127.0.0.1:$hp" "$(docker inspect -f '{{range (index .NetworkSettings.Ports "8000/tcp")}}{{.HostIp}}:{{.HostPort}}{{end}}' web 2>&1)"
big=$(python3 -c "import urllib.request; print(len(urllib.request.urlopen('http://127.0.0.1:$hp/usr/bin/bash', timeout=10).read()))" 2>&1)
check "-p: a large body relayed whole" "$(docker exec web stat -c %s /usr/bin/bash)" "$big"
docker rm -f web >/dev/null
python3 -c "import socket; s=socket.create_connection(('127.0.0.1', $hp), timeout=2)" 2>/dev/null
check "-p: the port closes with the container" "1" "$?"
# docker commit: the container's files as an image, then docker run on it
docker run -d --name cm1 "$IMG" sleep 1000 >/dev/null
docker exec cm1 sh -c 'echo cli-commit > /root/cli.txt'
cid=$(docker commit cm1 lis-cli-commit:v1 2>&1)
check "commit prints the image id" "sha256:" "${cid:0:7}"
check "run on the committed image sees its files" "cli-commit" "$(docker run --rm lis-cli-commit:v1 cat /root/cli.txt 2>&1)"
check "images lists the commit" "lis-cli-commit:v1" "$(docker images --format '{{.Repository}}:{{.Tag}}' lis-cli-commit)"
check "inspect: the commit's Parent is the image" "$(docker inspect -f '{{.Id}}' "$IMG")" "$(docker inspect -f '{{.Parent}}' lis-cli-commit:v1 2>&1)"
docker commit nosuchct x:y >/dev/null 2>&1; check "commit of a missing container: rc 1" "1" "$?"
docker rm -f cm1 >/dev/null
docker inspect nosuch:image >/dev/null 2>&1; check "inspect missing: rc 1" "1" "$?"
docker inspect "$IMG" >/dev/null 2>&1; check "inspect an image: rc 0" "0" "$?"
docker exec nosuchct true >/dev/null 2>&1; check "exec in a missing container: rc 1" "1" "$?"
docker tag "$IMG" mytag:v2 && check "tag + images" "mytag:v2" "$(docker images --format '{{.Repository}}:{{.Tag}}' mytag)"
docker rmi mytag:v2 >/dev/null; check "rmi" "" "$(docker images -q mytag)"
rm -rf "$tmp" "$DOCKER_CONFIG"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
