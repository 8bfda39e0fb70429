#!/bin/bash
# make-rootfs.sh - builds the default agent image and imports it as lis-agent:latest.
#
# The image: python3 with pip, numpy, sympy, scipy, matplotlib, mpmath, ipython,
# chardet; git, curl, wget, build-essential, ca-certificates; working dir /testbed.
# Built with debootstrap: Ubuntu noble when an Ubuntu mirror is reachable (and
# debootstrap knows noble), otherwise Debian bookworm from the mirror apt uses.
#
#   scripts/make-rootfs.sh [--out FILE] [--no-import] [--rebuild]
#
# As root: debootstrap builds FILE (default /var/cache/lis/lis-agent.tar.zst,
# world-readable) and imports it for $SUDO_USER (or root).
# As a normal user: imports FILE when it exists; otherwise builds the image
# rootless with `mmdebstrap --mode=unshare` (mapped root in a user namespace with
# the user's /etc/subuid range) into ~/.cache/lis/lis-agent.tar.zst and imports
# it; only when that is impossible it prints the one command to run as root.
# --rebuild: build even when FILE exists. Progress: the stages and counts (packages
# fetched n/N and bytes, unpacked, configured) on stderr, redrawn every 2 s on a
# terminal, one line every 10 s otherwise; the builder's whole output goes to a log,
# whose tail is shown when it fails. `lis image build` runs this script.
set -euo pipefail
cd "$(dirname "$0")/.."
out=/var/cache/lis/lis-agent.tar.zst
import=1
rebuild=0
while [ $# -gt 0 ]; do
    case "$1" in
    --out) [ $# -ge 2 ] || { echo "make-rootfs: --out needs a FILE" >&2; exit 2; }; out=$2; shift 2 ;;
    --no-import) import=0; shift ;;
    --rebuild) rebuild=1; shift ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "make-rootfs: unknown argument '$1' (--out FILE, --no-import, --rebuild)" >&2; exit 2 ;;
    esac
done

# progress LOG: the builder's output (stdin) goes whole to LOG; stderr shows its stages
# ("I: ..." lines of mmdebstrap and debootstrap), warnings and errors as they come, and a
# status of the counts (packages fetched n/N with their bytes, unpacked, configured):
# redrawn every 2 s on a terminal, one line every 10 s otherwise, also while the builder
# is silent (a long download or configure).
progress() {
    local log=$1 tty=0 every=10 last=$SECONDS t0=$SECONDS line rc
    local stage="starting" got=0 kb=0 need=0 total="" unpacked=0 configured=0
    [ -t 2 ] && tty=1 every=2
    status() {
        local el=$((SECONDS - t0)) what
        what="$stage"
        if [ "$got" -gt 0 ]; then
            what="$what; fetched $got${need:+/$need} packages, $((kb / 1024)) MB${total:+ of $total}"
        fi
        [ "$unpacked" -gt 0 ] && what="$what; unpacked $unpacked${need:+/$need}"
        [ "$configured" -gt 0 ] && what="$what; configured $configured${need:+/$need}"
        if [ $tty -eq 1 ]; then
            printf '\r\033[Kmake-rootfs: %dm%02ds %s' $((el / 60)) $((el % 60)) "${what:0:150}" >&2
        else
            printf 'make-rootfs: %dm%02ds %s\n' $((el / 60)) $((el % 60)) "$what" >&2
        fi
    }
    say() { # a line of its own, above the status line
        [ $tty -eq 1 ] && printf '\r\033[K' >&2
        printf '  %s\n' "$1" >&2
    }
    while :; do
        if IFS= read -r -t 1 line; then
            printf '%s\n' "$line" >>"$log"
            case "$line" in
            "I: Retrieving "*Release* | "I: Retrieving Packages"*) stage=${line#I: } ;;
            "I: Retrieving "*) got=$((got + 1)) stage="fetching packages" ;; # debootstrap, one a package
            "I: Validating "*) ;;
            "I: Extracting "* | "I: Unpacking "*) unpacked=$((unpacked + 1)) stage="unpacking" ;;
            "I: Configuring "*) configured=$((configured + 1)) stage="configuring" ;;
            I:*)
                stage=${line#I: }
                stage=${stage%...}
                say "$line"
                ;;
            E:* | W:* | "Error"* | "error:"* | "dpkg: error"* | *"): error: "*) say "$line" ;;
            Get:*)
                # apt numbers what it fetches (Get:N): a number seen already is not counted twice
                if [[ $line =~ ^Get:([0-9]+) ]] && [ "${BASH_REMATCH[1]}" -gt "$got" ]; then
                    got=${BASH_REMATCH[1]}
                    if [[ $line =~ \[([0-9,.]+)\ ([kMG]?B)\]$ ]]; then
                        local n=${BASH_REMATCH[1]//,/} u=${BASH_REMATCH[2]}
                        n=${n%%.*}
                        case $u in
                        B) n=$((n / 1024)) ;;
                        MB) n=$((n * 1024)) ;;
                        GB) n=$((n * 1024 * 1024)) ;;
                        esac
                        kb=$((kb + n))
                    fi
                fi
                ;;
            *" newly installed,"*) # a new apt phase (essential, then the rest): counts anew
                [[ $line =~ ([0-9]+)\ newly\ installed ]] && need=${BASH_REMATCH[1]}
                got=0 kb=0 unpacked=0 configured=0 total=""
                ;;
            "Need to get "*)
                [[ $line =~ ^Need\ to\ get\ ([0-9.,]+\ [kMG]?B) ]] && total=${BASH_REMATCH[1]}
                ;;
            "Unpacking "*) unpacked=$((unpacked + 1)) ;;
            "Setting up "*) configured=$((configured + 1)) ;;
            esac
        else
            rc=$?
            [ $rc -gt 128 ] || break # timeout: > 128; end of input: 1
        fi
        if [ $((SECONDS - last)) -ge $every ]; then
            last=$SECONDS
            status
        fi
    done
    status
    [ $tty -eq 1 ] && printf '\n' >&2
    return 0
}
LIS=${LIS:-$PWD/${B:-build}/lis}
[ -x "$LIS" ] || LIS=$(command -v lis || echo "$LIS")

do_import() { # as the given user (or the current one)
    local who=${1:-}
    echo "importing $out as lis-agent:latest${who:+ for $who}"
    if [ -n "$who" ] && [ "$who" != root ]; then
        runuser -u "$who" -- "$LIS" rootfs import "$out" --name lis-agent:latest
    else
        "$LIS" rootfs import "$out" --name lis-agent:latest
    fi
}

pkgs="python3,python3-pip,python3-numpy,python3-sympy,python3-scipy,python3-matplotlib,python3-mpmath,ipython3,python3-chardet,git,curl,wget,build-essential,ca-certificates"
apt_mirror() {
    grep -rhE '^[[:space:]]*(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null |
        grep -oE 'https?://[^ ]+' | grep -v security | grep -E '/debian/?$' | head -n1 || true
}

# Rootless: mmdebstrap builds the tree as mapped root of a user namespace.
build_rootless() {
    local dest=$1 mirror
    mirror=$(apt_mirror)
    mirror=${mirror:-http://deb.debian.org/debian}
    mkdir -p "$(dirname "$dest")"
    # global, not local: the EXIT trap runs after the function has returned
    tmp=$(mktemp -d "${TMPDIR:-/var/tmp}/lis-make-rootfs.XXXXXX")
    trap 'rm -rf "${tmp:-}"' EXIT
    echo "make-rootfs: mmdebstrap --mode=unshare bookworm from $mirror, rootless (a few minutes;" \
        "log: $tmp/mmdebstrap.log)" >&2
    if ! mmdebstrap --verbose --mode=unshare --variant=minbase --include="$pkgs" \
            --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
            --dpkgopt='path-exclude=/usr/share/info/*' \
            --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin; mkdir -p "$1/testbed"' \
            --customize-hook='find "$1/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name "en*" ! -name locale.alias -exec rm -rf {} +' \
            --customize-hook='find "$1/usr/lib/python3/dist-packages" -depth -type d -name tests -exec rm -rf {} +' \
            --customize-hook='printf "[global]\nbreak-system-packages = true\nroot-user-action = ignore\n" > "$1/etc/pip.conf"; echo "lis-agent (bookworm)" > "$1/etc/lis-image"' \
            bookworm "$tmp/root.tar" "$mirror" 2>&1 | progress "$tmp/mmdebstrap.log"; then
        tail -n 20 "$tmp/mmdebstrap.log" | sed 's/^/  /' >&2
        echo "make-rootfs: mmdebstrap failed (the last lines of its log are above)" >&2
        exit 1
    fi
    echo "make-rootfs: compressing the image (zstd)" >&2
    zstd -q -T0 -10 "$tmp/root.tar" -o "$dest.tmp" -f
    mv "$dest.tmp" "$dest"
    echo "make-rootfs: $dest: $(du -h "$dest" | cut -f1) compressed"
}

if [ "$(id -u)" -ne 0 ]; then
    if [ ! -r "$out" ] && [ "$out" = /var/cache/lis/lis-agent.tar.zst ]; then
        out=${XDG_CACHE_HOME:-$HOME/.cache}/lis/lis-agent.tar.zst
    fi
    if [ -r "$out" ] && [ $rebuild -eq 0 ]; then
        echo "make-rootfs: $out exists (built before; --rebuild builds it again)" >&2
        [ "$import" -eq 1 ] && do_import
        exit 0
    fi
    if command -v mmdebstrap >/dev/null && command -v newuidmap >/dev/null &&
       command -v zstd >/dev/null && grep -qE "^($(id -un)|$(id -u)):" /etc/subuid 2>/dev/null; then
        build_rootless "$out"
        [ "$import" -eq 1 ] && do_import
        exit 0
    fi
    echo "make-rootfs: building the image rootless needs mmdebstrap, uidmap and a /etc/subuid"
    echo "range for $(id -un); without them it needs root once (debootstrap). Run:"
    echo "  sudo $PWD/scripts/make-rootfs.sh${out:+ --out $out}"
    echo "then, as yourself: $0${out:+ --out $out}   (or it is imported for you by sudo)"
    exit 1
fi

command -v debootstrap >/dev/null || { echo "make-rootfs: debootstrap is missing (scripts/deps.sh)" >&2; exit 1; }
command -v zstd >/dev/null || { echo "make-rootfs: zstd is missing (scripts/deps.sh)" >&2; exit 1; }

# Ubuntu noble when reachable, otherwise Debian bookworm from apt's own mirror.
suite=bookworm
mirror=$(grep -rhE '^[[:space:]]*(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null |
         grep -oE 'https?://[^ ]+' | grep -v security | grep -E '/debian/?$' | head -n1 || true)
mirror=${mirror:-http://deb.debian.org/debian}
components=main
umirror=${UBUNTU_MIRROR:-http://archive.ubuntu.com/ubuntu}
if [ -e /usr/share/debootstrap/scripts/noble ] && [ -e /usr/share/keyrings/ubuntu-archive-keyring.gpg ] &&
   curl -sfI --max-time 5 "$umirror/dists/noble/Release" >/dev/null 2>&1; then
    suite=noble mirror=$umirror components=main,universe
fi
work=$(mktemp -d /var/tmp/lis-make-rootfs.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/root
echo "make-rootfs: debootstrap $suite from $mirror (a few minutes; log: $work/debootstrap.log)"
if ! debootstrap --variant=minbase --components="$components" --include="$pkgs" \
        "$suite" "$root" "$mirror" 2>&1 | progress "$work/debootstrap.log"; then
    tail -n 20 "$work/debootstrap.log" >&2
    echo "make-rootfs: debootstrap failed (see above)" >&2
    exit 1
fi
# slim it: package caches and lists, docs, man pages, non-English locales
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
       "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
       "$root"/var/log/*.log "$root"/var/cache/debconf/*-old
find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'en*' ! -name locale.alias \
     -exec rm -rf {} + 2>/dev/null || true
# the Python packages' own test suites (sympy's alone is ~100 MB): nothing imports them
find "$root/usr/lib/python3/dist-packages" -depth -type d -name tests -exec rm -rf {} + 2>/dev/null || true
mkdir -p "$root/testbed"
# the agent's defaults inside: python/pip without warnings about the system install
printf '[global]\nbreak-system-packages = true\nroot-user-action = ignore\n' > "$root/etc/pip.conf"
echo "lis-agent ($suite)" > "$root/etc/lis-image"

mkdir -p "$(dirname "$out")"
tar -C "$root" --numeric-owner -cf - . | zstd -q -T0 -10 -o "$out.tmp" -f
mv "$out.tmp" "$out"
chmod 644 "$out"
echo "make-rootfs: $out: $(du -h "$out" | cut -f1) compressed, $(du -sh "$root" | cut -f1) unpacked ($suite)"
if [ "$import" -eq 1 ]; then
    do_import "${SUDO_USER:-}"
fi
