#!/bin/sh
# Inside the test VM, as the unprivileged uid in a leaf of its delegated cgroup v2 subtree
# (started by run-suite.sh through run-vm.sh). Copies lis and the busybox fixture to a tmpfs, prints the environment and `lis doctor`, then runs the criterion suite.
set -u
D=$(cd "$(dirname "$0")" && pwd)
W=/dev/shm/lis-vm
rm -rf "$W" && mkdir -p "$W" && cp -r "$D/build" "$W/" || exit 1
tar -C "$W" -xf "$D/busybox.tar" || exit 1
export TMPDIR=$W LIS_TEST_BUSYBOX=$W/busybox LIS_BIN=$W/build/lis HOME=$W
cg=$(sed -n 's/^0:://p' /proc/self/cgroup)
echo "guest: uid=$(id -u) kernel=$(uname -r) cgroup=$cg delegated controllers: $(cat "/sys/fs/cgroup$(dirname "$cg")/cgroup.controllers")"
"$W/build/lis" doctor
echo "--- vm_cgroup"
"$W/build/tests/vm_cgroup" -j1 --verbose=1 "$@"; rc=$?
# the bombs of the host suite, here under real cgroup v2 limits
echo "--- test_bombs"
LIS_TEST_FILES=${LIS_TEST_FILES:-20000} "$W/build/tests/test_bombs" -j1 --verbose=1 "$@" || rc=1
exit $rc
