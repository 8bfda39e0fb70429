#!/bin/sh
# Tests scripts/deps.sh (the README's first command) two ways:
#  - against stub id, sudo, apt-get, make and dpkg-query on a PATH that holds nothing else (so
#    the real sudo is hidden): the README's command as root without sudo, as a user with sudo
#    and, once everything is installed, as a user without sudo (twice); what is missing only
#    is installed, through sudo for a user; --test adds the test-only packages; a user without
#    sudo gets the root command for what is missing; a bad option. Installs nothing.
#  - for real, as the user running it (scripts/test.sh: the unprivileged test user, after
#    root's `scripts/deps.sh --test` in .ci/run): twice, each time "installed", exit 0.
# Usage: sh scripts/test-deps.sh
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; sed 's/^/     | /' "$tmp/out"; }

# stubs: id answers $FAKE_UID; apt-get logs its arguments and "installs" (records the
# packages in $DB); dpkg-query answers from $DB ("ii " when listed); sudo logs itself and runs
# the command as "root" (FAKE_UID=0); make logs itself
mkdir "$tmp/bin" "$tmp/nosudo"
cat >"$tmp/bin/id" <<'S'
#!/bin/sh
[ "$1" = "-u" ] && echo "${FAKE_UID:-1000}"
S
cat >"$tmp/bin/apt-get" <<'S'
#!/bin/sh
echo "apt-get uid=${FAKE_UID:-?} $*" >>"$LOG"
[ "$1" = install ] && for a in "$@"; do case "$a" in -*|install) ;; *) echo "$a" >>"$DB" ;; esac; done
exit 0
S
cat >"$tmp/bin/dpkg-query" <<'S'
#!/bin/sh
for p; do :; done
grep -qx "$p" "$DB" 2>/dev/null && printf 'ii ' && exit 0
exit 1
S
cat >"$tmp/bin/sudo" <<'S'
#!/bin/sh
echo "sudo $*" >>"$LOG"
FAKE_UID=0 exec "$@"
S
cat >"$tmp/bin/make" <<'S'
#!/bin/sh
echo "make uid=${FAKE_UID:-?} $*" >>"$LOG"
S
for t in sed wc grep; do ln -sf "$(command -v $t)" "$tmp/bin/$t"; done
chmod +x "$tmp/bin/"*
cp -P "$tmp/bin/id" "$tmp/bin/apt-get" "$tmp/bin/dpkg-query" "$tmp/bin/make" "$tmp/bin/sed" \
  "$tmp/bin/wc" "$tmp/bin/grep" "$tmp/nosudo/"
sh_bin=$(command -v sh)
run() { # run PATHDIR UID ARGS...: deps.sh with only PATHDIR on PATH
  d=$1 u=$2; shift 2
  : >"$tmp/log"
  ln -sf "$sh_bin" "$d/sh"
  (cd "$top" && env -i PATH="$d" LOG="$tmp/log" DB="$tmp/db" FAKE_UID="$u" "$sh_bin" \
    scripts/deps.sh "$@") >"$tmp/out" 2>&1
}
installed() { # installed PKG...: the stub database holds exactly these
  printf '%s\n' "$@" >"$tmp/db"
}
build_run=$(sed -n 's/^\(BUILD\|RUN\)="\(.*\)"$/\2/p; /^BUILD=\|^RUN=/,/"$/p' "$top/scripts/deps.sh" |
  tr -d '"\\' | sed 's/^[A-Z]*=//' | tr ' ' '\n' | grep -v '^$' | sort -u)
# shellcheck disable=SC2086
all_but_python=$(echo "$build_run" | grep -vx python3)

# 0. the README's command (the first line of its first sh block), as root without sudo and as
# a user with sudo on a bare system: packages installed as root, then make
readme_cmd=$(awk '/^```sh$/ { getline; print; exit }' "$top/README.md")
for c in "$tmp/nosudo 0" "$tmp/bin 1000"; do
  # shellcheck disable=SC2086
  set -- $c
  : >"$tmp/log"
  : >"$tmp/db"
  ln -sf "$sh_bin" "$1/sh"
  (cd "$top" && env -i PATH="$1" LOG="$tmp/log" DB="$tmp/db" FAKE_UID="$2" "$sh_bin" -c "$readme_cmd") \
    >"$tmp/out" 2>&1; rc=$?
  if [ $rc -eq 0 ] && grep -q '^apt-get uid=0 install' "$tmp/log" &&
     grep -q '^make uid=' "$tmp/log"; then ok "README '$readme_cmd' as uid $2 ($(basename "$1"))"
  else cat "$tmp/log" >>"$tmp/out"; bad "README '$readme_cmd' as uid $2 (rc=$rc)"; fi
done

# 0b. then, everything installed (by 0), as a user without sudo: twice, no root needed
for i in 1 2; do
  : >"$tmp/log"
  ln -sf "$sh_bin" "$tmp/nosudo/sh"
  (cd "$top" && env -i PATH="$tmp/nosudo" LOG="$tmp/log" DB="$tmp/db" FAKE_UID=1000 "$sh_bin" -c "$readme_cmd") \
    >"$tmp/out" 2>&1; rc=$?
  if [ $rc -eq 0 ] && ! grep -q 'apt-get\|sudo' "$tmp/log" && grep -q '^make uid=1000' "$tmp/log" &&
     grep -q 'are installed' "$tmp/out"; then ok "README '$readme_cmd' as a user without sudo, run $i"
  else cat "$tmp/log" >>"$tmp/out"; bad "README as a user without sudo, run $i (rc=$rc)"; fi
done

# 1. root, no sudo anywhere, one package missing: apt-get installs that one, as root
# shellcheck disable=SC2086
installed $all_but_python
run "$tmp/nosudo" 0; rc=$?
if [ $rc -eq 0 ] && grep -q '^apt-get uid=0 update' "$tmp/log" &&
   grep -q '^apt-get uid=0 install .* python3$' "$tmp/log" &&
   ! grep -q 'libseccomp-dev' "$tmp/log" && ! grep -q sudo "$tmp/log"; then
  ok "root without sudo installs only what is missing"
else cat "$tmp/log" >>"$tmp/out"; bad "root without sudo (rc=$rc)"; fi

# 2. a user with sudo, one package missing: deps.sh runs again through sudo, which installs it
# shellcheck disable=SC2086
installed $all_but_python
run "$tmp/bin" 1000; rc=$?
if [ $rc -eq 0 ] && grep -q '^sudo sh scripts/deps.sh$' "$tmp/log" &&
   grep -q '^apt-get uid=0 install .* python3$' "$tmp/log"; then ok "a user with sudo re-runs through sudo"
else cat "$tmp/log" >>"$tmp/out"; bad "user with sudo (rc=$rc)"; fi

# 2b. --test: the test-only packages too, and the option survives the sudo hop
# shellcheck disable=SC2086
installed $build_run
run "$tmp/bin" 1000 --test; rc=$?
if [ $rc -eq 0 ] && grep -q '^sudo sh scripts/deps.sh --test$' "$tmp/log" &&
   grep -q 'libcriterion-dev' "$tmp/log" && grep -q 'chromium' "$tmp/log" &&
   ! grep -q 'install.*libseccomp-dev' "$tmp/log"; then ok "--test adds the test-only packages, through sudo"
else cat "$tmp/log" >>"$tmp/out"; bad "--test through sudo (rc=$rc)"; fi

# 2c. the default needs none of the test-only packages
# shellcheck disable=SC2086
installed $build_run
run "$tmp/nosudo" 1000; rc=$?
if [ $rc -eq 0 ] && [ ! -s "$tmp/log" ]; then ok "the default is what building and running needs"
else cat "$tmp/log" >>"$tmp/out"; bad "default with build+run installed (rc=$rc)"; fi

# 3. a user without sudo, something missing: the exact command for root (only what is
# missing), and a failure (so `&& make` stops)
# shellcheck disable=SC2086
installed $all_but_python
run "$tmp/nosudo" 1000; rc=$?
if [ $rc -ne 0 ] && [ ! -s "$tmp/log" ] && grep -q 'sudo is not installed' "$tmp/out" &&
   grep -q '^  apt-get update && apt-get install -y --no-install-recommends python3$' "$tmp/out"
then ok "a user without sudo gets the root command for what is missing, and exit $rc"
else bad "user without sudo (rc=$rc)"; fi

# 4. a bad option: a usage error, nothing run
run "$tmp/nosudo" 0 --bogus; rc=$?
if [ $rc -eq 2 ] && [ ! -s "$tmp/log" ] && grep -q "unknown option '--bogus'" "$tmp/out"
then ok "an unknown option is refused"
else bad "unknown option (rc=$rc)"; fi

# 5. for real, as whoever runs this (an ordinary user in scripts/test.sh), after root's
# install: twice, each time nothing to do
for i in 1 2; do
  (cd "$top" && sh scripts/deps.sh --test) >"$tmp/out" 2>&1; rc=$?
  if [ $rc -eq 0 ] && grep -q 'are installed' "$tmp/out"; then ok "real deps.sh --test as uid $(id -u), run $i"
  else bad "real deps.sh --test as uid $(id -u), run $i (rc=$rc)"; fi
done

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
