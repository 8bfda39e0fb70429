#!/bin/sh
# Tests scripts/deps.sh (the README's first command) against stub id, sudo and
# apt-get on a PATH that holds nothing else, so the real sudo is hidden:
#   the README's install command as root without sudo and as a user with sudo,
#   root without sudo, a user with sudo, a user without sudo, a bad option.
# Installs nothing. Usage: sh scripts/test-deps.sh
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; sed 's/^/     | /' "$tmp/out"; }

# stubs: id answers $FAKE_UID; apt-get logs its arguments; sudo logs itself and
# runs the command as "root" (FAKE_UID=0)
mkdir "$tmp/bin" "$tmp/nosudo"
cat >"$tmp/bin/id" <<'S'
#!/bin/sh
[ "$1" = "-u" ] && echo "${FAKE_UID:-1000}"
S
cat >"$tmp/bin/apt-get" <<'S'
#!/bin/sh
echo "apt-get uid=${FAKE_UID:-?} $*" >>"$LOG"
S
cat >"$tmp/bin/sudo" <<'S'
#!/bin/sh
echo "sudo $*" >>"$LOG"
FAKE_UID=0 exec "$@"
S
chmod +x "$tmp/bin/"*
cat >"$tmp/bin/make" <<'S'
#!/bin/sh
echo "make uid=${FAKE_UID:-?} $*" >>"$LOG"
S
chmod +x "$tmp/bin/"*
cp "$tmp/bin/id" "$tmp/bin/apt-get" "$tmp/bin/make" "$tmp/nosudo/"
sh_bin=$(command -v sh)
run() { # run PATHDIR UID ARGS...: deps.sh with only PATHDIR on PATH
  d=$1 u=$2; shift 2
  : >"$tmp/log"
  ln -sf "$sh_bin" "$d/sh"
  (cd "$top" && env -i PATH="$d" LOG="$tmp/log" FAKE_UID="$u" "$sh_bin" scripts/deps.sh "$@") \
    >"$tmp/out" 2>&1
}

# 0. the README's command (the first line of its first sh block), as root
# without sudo and as a user with sudo: packages installed as root, then make
readme_cmd=$(awk '/^```sh$/ { getline; print; exit }' "$top/README.md")
for c in "$tmp/nosudo 0" "$tmp/bin 1000"; do
  # shellcheck disable=SC2086
  set -- $c
  : >"$tmp/log"
  ln -sf "$sh_bin" "$1/sh"
  (cd "$top" && env -i PATH="$1" LOG="$tmp/log" FAKE_UID="$2" "$sh_bin" -c "$readme_cmd") \
    >"$tmp/out" 2>&1; rc=$?
  if [ $rc -eq 0 ] && grep -q '^apt-get uid=0 install' "$tmp/log" &&
     grep -q '^make uid=' "$tmp/log"; then ok "README '$readme_cmd' as uid $2 ($(basename "$1"))"
  else cat "$tmp/log" >>"$tmp/out"; bad "README '$readme_cmd' as uid $2 (rc=$rc)"; fi
done

# 1. root, no sudo anywhere: apt-get update + install, as root
run "$tmp/nosudo" 0; rc=$?
if [ $rc -eq 0 ] && grep -q '^apt-get uid=0 update' "$tmp/log" &&
   grep -q '^apt-get uid=0 install .*libseccomp-dev' "$tmp/log" &&
   ! grep -q sudo "$tmp/log"; then ok "root without sudo installs with apt-get"
else cat "$tmp/log" >>"$tmp/out"; bad "root without sudo (rc=$rc)"; fi

# 2. a user with sudo: deps.sh runs again through sudo, which installs
run "$tmp/bin" 1000; rc=$?
if [ $rc -eq 0 ] && grep -q '^sudo sh scripts/deps.sh$' "$tmp/log" &&
   grep -q '^apt-get uid=0 install' "$tmp/log"; then ok "a user with sudo re-runs through sudo"
else cat "$tmp/log" >>"$tmp/out"; bad "user with sudo (rc=$rc)"; fi

# 2b. options survive the sudo hop
run "$tmp/bin" 1000 --minimal; rc=$?
if [ $rc -eq 0 ] && grep -q '^sudo sh scripts/deps.sh --minimal$' "$tmp/log" &&
   ! grep -q 'apparmor' "$tmp/log"; then ok "--minimal passes through sudo"
else cat "$tmp/log" >>"$tmp/out"; bad "--minimal through sudo (rc=$rc)"; fi

# 3. a user without sudo: the exact command for root, and a failure (so `&& make` stops)
run "$tmp/nosudo" 1000; rc=$?
if [ $rc -ne 0 ] && [ ! -s "$tmp/log" ] && grep -q 'sudo is not installed' "$tmp/out" &&
   grep -q '^  apt-get update && apt-get install -y --no-install-recommends build-essential' "$tmp/out"
then ok "a user without sudo gets the root command and exit $rc"
else bad "user without sudo (rc=$rc)"; fi

# 4. a bad option: a usage error, nothing run
run "$tmp/nosudo" 0 --bogus; rc=$?
if [ $rc -eq 2 ] && [ ! -s "$tmp/log" ] && grep -q "unknown option '--bogus'" "$tmp/out"
then ok "an unknown option is refused"
else bad "unknown option (rc=$rc)"; fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
