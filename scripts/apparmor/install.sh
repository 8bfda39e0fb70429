#!/bin/sh
# Installs scripts/apparmor/lis as /etc/apparmor.d/lis for the lis binary at
# PATH and loads it, so that lis may create user namespaces on hosts that
# restrict them (kernel.apparmor_restrict_unprivileged_userns=1, Ubuntu 23.10+).
#   sudo scripts/apparmor/install.sh [PATH]      (default: /usr/local/bin/lis)
# PATH is absolute and may be an AppArmor glob: '/opt/lis/build/{lis,tests/test_*}'.
# --check: only check the profile for PATH with apparmor_parser, install nothing
# (as any user; with AppArmor < 4.0 the userns rule is left out of the check).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
bin=${1:-/usr/local/bin/lis}
case $bin in
  /*) ;;
  *) echo "install.sh: the path must be absolute: $bin" >&2; exit 2 ;;
esac
case $bin in
  *[[:space:]\"\'\|\\#]*) echo "install.sh: unusable characters in the path: $bin" >&2; exit 2 ;;
esac
parser=$(command -v apparmor_parser || echo /sbin/apparmor_parser)
if [ ! -x "$parser" ]; then
  echo "install.sh: apparmor_parser not found: apt-get install apparmor" >&2
  exit 1
fi
profile() { sed "s|^@{lis_bin}=.*|@{lis_bin}=$bin|" "$here/lis"; }

if [ $check -eq 1 ]; then
  tmp=$(mktemp)
  trap 'rm -f "$tmp"' EXIT
  if [ -e /etc/apparmor.d/abi/4.0 ]; then
    profile >"$tmp"
  else # AppArmor 3 knows neither abi 4.0 nor the userns rule: check the rest
    echo "install.sh: AppArmor < 4.0 here: checking the profile without its userns rule" >&2
    profile | sed 's|<abi/4.0>|<abi/3.0>|; /^  userns,$/d' >"$tmp"
  fi
  "$parser" -Q -K "$tmp" 2>&1 | grep -v '^Cache read/write disabled' >&2 || true
  "$parser" -Q -K "$tmp" >/dev/null 2>&1 || { echo "install.sh: the profile does not parse" >&2; exit 1; }
  echo "install.sh: profile for $bin parses"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install.sh: run as root: sudo $0 $bin" >&2
  exit 1
fi
if [ ! -e /etc/apparmor.d/abi/4.0 ]; then
  echo "install.sh: this AppArmor is older than 4.0: it has no user namespace restriction, nothing to do" >&2
  exit 0
fi
profile >/etc/apparmor.d/lis.tmp
mv /etc/apparmor.d/lis.tmp /etc/apparmor.d/lis
"$parser" -r /etc/apparmor.d/lis
echo "install.sh: /etc/apparmor.d/lis loaded for $bin"
