#!/bin/bash
# The README's test command (`make test` runs it after building).
# As root: prepares the fixtures, then runs every suite as the unprivileged
# user $LIS_TEST_USER (created if missing), because rootless is the point.
# As a normal user: runs the suites as that user with whatever fixtures exist.
set -u
cd "$(dirname "$0")/.."
top=$PWD
user=${LIS_TEST_USER:-lis-test}
export LIS_TEST_USER="$user" # root_serve_users.c makes two users of it ($user and $user-b)
work=${LIS_TEST_WORK:-/var/tmp/lis-test-$(id -u)}
fail=0

if [ "$(id -u)" -eq 0 ]; then
    id "$user" >/dev/null 2>&1 || useradd -m -s /bin/bash "$user"
    id "$user-b" >/dev/null 2>&1 || useradd -m -s /bin/bash "$user-b"
fi
# a size-limited tmpfs a previous run left mounted (below)
[ "$(id -u)" -eq 0 ] && mountpoint -q "$work/smallfs" 2>/dev/null && umount "$work/smallfs"
rm -rf "$work"
mkdir -p "$work"
chmod 755 "$work"
# the suites' temporary directories (each test's run and data dirs, images
# imported by the serve suites: ~0.5 GB a run) live here and go at the end
mkdir -p "$work/tmp"
chmod 1777 "$work/tmp"
# The suites run from a copy readable by the test user (a checkout under /root is not).
cp -a "${B:-build}" "$work/build"
cp -a tests "$work/src-tests"
cp -a scripts/apparmor "$work/src-tests/apparmor" # test_doctor checks the profile
# the client python/lis beside its pytest suite tests/python: test_serve_api and
# test_python_client import it from src-tests/python (PYTHONPATH, conftest.py)
mkdir -p "$work/src-tests/python" && cp -a python/. "$work/src-tests/python/"
bash scripts/make-test-rootfs.sh busybox "$work/busybox" || fail=1
export LIS_TEST_BUSYBOX="$work/busybox"
if bash scripts/make-test-rootfs.sh debian "$work/debian" 2>"$work/debian.err"; then
    export LIS_TEST_DEBIAN="$work/debian"
else
    echo "note: Debian fixture unavailable, its tests are skipped: $(cat "$work/debian.err")"
fi
export LIS_BIN="$work/build/lis" LIS_TEST_SRC="$work/src-tests"
# make test-asan: each ASan/LeakSanitizer report of any process (a test, the lis
# CLI, a detached sandbox owner) goes to a file here, and each report fails its
# suite, as does each UBSan "runtime error:" in a suite's output.
san=""
if [ -n "${LIS_TEST_SANITIZE:-}" ]; then
    san="$work/sanitizer"
    mkdir -p "$san"
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$san/asan"
    export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}log_path=$san/ubsan"
fi
san_reports() { # prints (to stderr) and counts the reports since the last call
    local n=0 r
    # UBSan beside ASan ignores log_path (GCC 12): its reports are in the output
    if [ -n "$san" ] && grep -q 'runtime error:' "$work/suite.log"; then
        grep -A3 'runtime error:' "$work/suite.log" | sed 's/^/[SAN ] /' | head -n 80 >&2
        n=$(grep -c 'runtime error:' "$work/suite.log")
    fi
    for r in ${san:+"$san"/*}; do
        [ -f "$r" ] || continue
        grep -qE 'ERROR: |runtime error:' "$r" && n=$((n + 1))
        sed 's/^/[SAN ] /' "$r" | head -n 80 >&2
        rm -f "$r"
    done
    echo "$n"
}

# A sandbox dies with its owner: a process of the (dedicated) test user still
# there 10 s after a suite ended is a leak (a sandbox, a server, a helper),
# and fails that suite. Zombies are not counted: this host's PID 1 reaps late.
leaks() { # prints (to stderr) and counts, then kills, what the last suite left
    [ "$(id -u)" -eq 0 ] || { echo 0; return; }
    local left i
    for i in $(seq 1 100); do
        left=$(ps -u "$user" -o stat=,pid=,args= 2>/dev/null | awk '$1 !~ /^Z/')
        [ -z "$left" ] && { echo 0; return; }
        sleep 0.1
    done
    echo "$left" | sed 's/^/[LEAK] /' | head -n 20 >&2
    # what holds them: every thread of the user's processes (zombies too: a
    # zombie leader keeps its fds while a thread of it is still exiting) and
    # where it waits, and the unix sockets of the leaked ones with their peers
    ps -L -u "$user" -o stat=,pid=,tid=,wchan:24=,args= 2>/dev/null | head -n 40 |
        sed 's/^/[LEAK-THREAD] /' >&2
    for p in $(echo "$left" | awk '{print $2}' | head -n 5); do
        ss -xpn 2>/dev/null | grep "pid=$p," | head -n 8 | sed "s/^/[LEAK-SOCK $p] /" >&2
    done
    pkill -KILL -u "$user" 2>/dev/null
    echo 1
}

as_user() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u "$user" -- env HOME="$(getent passwd "$user" | cut -d: -f6)" \
            XDG_RUNTIME_DIR= TMPDIR="$work/tmp" \
            LIS_TEST_BUSYBOX="${LIS_TEST_BUSYBOX:-}" LIS_TEST_DEBIAN="${LIS_TEST_DEBIAN:-}" \
            LIS_BIN="$LIS_BIN" LIS_TEST_SRC="$LIS_TEST_SRC" \
            LIS_TEST_FOREIGN="${LIS_TEST_FOREIGN:-}" LIS_TEST_SMALLFS="${LIS_TEST_SMALLFS:-}" \
            LIS_TEST_ROOTFS_ROOT="${LIS_TEST_ROOTFS_ROOT:-}" "$@"
    else
        "$@"
    fi
}

if [ "$(id -u)" -eq 0 ]; then
    chown -R "$user:$user" "$work"
    chmod -R a+rX "$work/build" "$work/src-tests"
    # A rootfs owned by root without /etc/hosts, as `sudo debootstrap` leaves one
    # (tests/security: it must start for the test user and stay untouched).
    cp -a "$work/busybox" "$work/rootfs-root" &&
        rm -f "$work/rootfs-root/etc/hosts" "$work/rootfs-root/etc/resolv.conf" &&
        chown -R root:root "$work/rootfs-root" && export LIS_TEST_ROOTFS_ROOT="$work/rootfs-root"
    # A size-limited tmpfs for the suites whose regression could fill a disk (the
    # exports of 1 TB holes in tests/test_bounds.c): such a regression fills it, not
    # the machine's disk. Unmounted at the end.
    mkdir -p "$work/smallfs" &&
        mount -t tmpfs -o "size=256m,mode=0755,uid=$(id -u "$user"),gid=$(id -g "$user")" \
            lis-test-small "$work/smallfs" && export LIS_TEST_SMALLFS="$work/smallfs"
    # A sandbox of another user, to prove the test user cannot reach it.
    foreign=$(runuser -u "$user-b" -- env XDG_RUNTIME_DIR= "$LIS_BIN" sandbox create \
              --rootfs "$work/busybox" --name "foreign-$$" 2>&1) && \
        export LIS_TEST_FOREIGN="/tmp/lis-$(id -u "$user-b")/foreign-$$"
fi

passed=0 failed=0 skipped=0
# LIS_TEST_SUITES="test_tty test_net" runs only those suites (default: all);
# LIS_TEST_FILTER='tty/*' passes criterion's --filter (one test: 'suite/name')
only=${LIS_TEST_SUITES:-}
want() { [ -z "$only" ] || [[ " $only " == *" $(basename "$1") "* ]]; }
# The one-way layers (docs/architecture.md, scripts/check-layers.py): no upward
# include or call, no loop of calls inside an area; then the check's self-test.
if want check_layers; then
    for mode in check self-test; do
        args=(--objdir "${B:-build}/obj" --objdir "${B:-build}/pobj" --docs docs/architecture.md)
        [ $mode = self-test ] && args=(--self-test)
        if python3 scripts/check-layers.py "${args[@]}" >"$work/suite.log" 2>&1; then
            p=1 f=0
        else
            p=0 f=1
            cat "$work/suite.log"
        fi
        echo "check_layers ($mode): $p passed, $f failed"
        passed=$((passed + p))
        failed=$((failed + f))
    done
fi
# The C style of .clang-format (make format-check); skipped without clang-format 14.
if want format_check; then
    bash scripts/format-check.sh >"$work/suite.log" 2>&1
    rc=$?
    if [ $rc -eq 77 ]; then
        echo "format_check: skipped ($(sed -n 's/^format-check: skipped: //p' "$work/suite.log"))"
    else
        [ $rc -eq 0 ] && p=1 f=0 || { p=0 f=1; head -n 40 "$work/suite.log"; }
        echo "format_check: $p passed, $f failed"
        passed=$((passed + p))
        failed=$((failed + f))
    fi
fi
# scripts/deps.sh (the README's first command), by scripts/test-deps.sh: stubs, then the real
# one as the test user, twice, after root's install (.ci/run: scripts/deps.sh --test).
if want deps_check; then
    mkdir -p "$work/deps-check/scripts"
    cp scripts/deps.sh scripts/test-deps.sh "$work/deps-check/scripts/"
    cp README.md "$work/deps-check/"
    [ "$(id -u)" -eq 0 ] && chown -R "$user:$user" "$work/deps-check"
    as_user sh "$work/deps-check/scripts/test-deps.sh" >"$work/suite.log" 2>&1 </dev/null
    rc=$?
    p=$(sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1/p' "$work/suite.log")
    f=$(sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\2/p' "$work/suite.log")
    p=${p:-0}
    f=${f:-1}
    [ $rc -ne 0 ] && [ "$f" -eq 0 ] && f=1
    [ "$f" -ne 0 ] && grep -A8 '^FAIL' "$work/suite.log" | head -n 60
    echo "deps_check: $p passed, $f failed"
    passed=$((passed + p))
    failed=$((failed + f))
fi
for t in "$work"/build/tests/test_* "$work"/build/tests/security/test_*; do
    [ -x "$t" ] || continue
    want "$t" || continue
    # through a file, not $(...): a process a test leaked cannot hold the runner
    as_user "$t" -j"${LIS_TEST_JOBS:-2}" --verbose=0 ${LIS_TEST_FILTER:+--filter "$LIS_TEST_FILTER"} \
        >"$work/suite.log" 2>&1 </dev/null
    rc=$?
    out=$(cat "$work/suite.log")
    # failures in full (criterion puts their details on [----] lines), then the summary
    echo "$out" | grep -E '^\[(FAIL|----|====)\]|^\[ERR' | grep -vE 'Criterion v|Running [0-9]+ test' | tail -n 200
    syn=$(echo "$out" | grep -E 'Synthesis: Tested' | tail -n1)
    p=$(echo "$syn" | sed -nE 's/.*Passing: ([0-9]+).*/\1/p')
    f=$(echo "$syn" | sed -nE 's/.*Failing: ([0-9]+).*Crashing: ([0-9]+).*/\1+\2/p')
    p=${p:-0}
    f=$(( ${f:-1} ))
    if [ -z "$syn" ] || [ $rc -ne 0 ]; then f=$(( f > 0 ? f : 1 )); fi
    f=$(( f + $(san_reports) + $(leaks) ))
    # a test skipped for a missing fixture (cr_skip_test) is neither passed nor failed
    s=$(grep -c '^\[SKIP\]' "$work/suite.log")
    why=$(grep -m1 '^\[SKIP\]' "$work/suite.log" | sed 's/^\[SKIP\] [^ ]*: //')
    if [ "$s" -gt 0 ] && [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
        echo "$(basename "$t"): skipped ($s tests: $why)"
    elif [ "$s" -gt 0 ]; then
        echo "$(basename "$t"): $p passed, $f failed, $s skipped ($why)"
    else
        echo "$(basename "$t"): $p passed, $f failed"
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    skipped=$((skipped + s))
done

if [ "$(id -u)" -eq 0 ]; then
    runuser -u "$user-b" -- env XDG_RUNTIME_DIR= "$LIS_BIN" sandbox rm "foreign-$$" >/dev/null 2>&1
    # root-only fallbacks (cgroup v1) run as root
    for t in "$work"/build/tests/root_*; do
        [ -x "$t" ] || continue
        want "$t" || continue
        "$t" -j1 --verbose=0 >"$work/suite.log" 2>&1 </dev/null; rc=$?
        out=$(cat "$work/suite.log")
        echo "$out" | grep -E '^\[(FAIL|----|====)\]|^\[ERR' | grep -vE 'Criterion v|Running [0-9]+ test' | tail -n 100
        syn=$(echo "$out" | grep -E 'Synthesis: Tested' | tail -n1)
        p=$(echo "$syn" | sed -nE 's/.*Passing: ([0-9]+).*/\1/p'); p=${p:-0}
        f=$(echo "$syn" | sed -nE 's/.*Failing: ([0-9]+).*Crashing: ([0-9]+).*/\1+\2/p'); f=$(( ${f:-1} ))
        if [ -z "$syn" ] || [ $rc -ne 0 ]; then f=$(( f > 0 ? f : 1 )); fi
        f=$(( f + $(san_reports) ))
        echo "$(basename "$t") (root): $p passed, $f failed"
        passed=$((passed + p)); failed=$((failed + f))
    done
fi
[ -n "${LIS_TEST_SMALLFS:-}" ] && umount "$LIS_TEST_SMALLFS" 2>/dev/null
[ $fail -ne 0 ] && failed=$((failed + 1))
[ $skipped -gt 0 ] && echo "$skipped tests skipped for a missing fixture (as root, make test prepares" \
    "every fixture and runs the suites as the unprivileged $user)"
rm -rf "$work/tmp" 2>/dev/null # as a user, files of subordinate ids may stay: the next run's rm -rf
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
