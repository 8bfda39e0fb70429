#!/bin/sh
# rootfs-fixtures.sh KIND BUSYBOX_DIR OUT - builds the images tests/test_rootfs.c
# imports, from the busybox fixture, with the real tools (tar, zstd, xz, umoci, skopeo).
#   tar|gz|xz|zst      a rootfs tarball
#   oci                an OCI layout dir, 2 layers: busybox (+ /opq/old, /etc/gone), then
#                      a layer with an opaque /opq (+ /opq/new), a whiteout of /etc/gone
#                      and /etc/added
#   oci-archive        the same image as an OCI tar (skopeo copy ... oci-archive:)
#   docker-archive     the same image as a docker-archive tar (skopeo, tag lis-test/da:v1)
#   multi              an OCI layout whose tag "multi" is an image index of two platforms
#                      (the host's and s390x); /etc/arch names the platform
#   push LAYOUT:TAG REGISTRY/NAME:TAG [--all]   skopeo copy to a plain-HTTP registry
set -eu
kind=$1 bb=$2 out=$3
SK="skopeo --insecure-policy"
host_arch() {
    case $(uname -m) in
    x86_64) echo amd64 ;; aarch64) echo arm64 ;; armv7l) echo arm ;; *) uname -m ;;
    esac
}
oci_base() { # layout tag extra-file-content
    umoci new --image "$1:$2"
    t=$(mktemp -d)
    umoci unpack --rootless --image "$1:$2" "$t/b" >/dev/null
    cp -a "$bb/." "$t/b/rootfs/"
    echo "$3" > "$t/b/rootfs/etc/arch"
    mkdir -p "$t/b/rootfs/opq"
    echo old > "$t/b/rootfs/opq/old"
    echo gone > "$t/b/rootfs/etc/gone"
    umoci repack --image "$1:$2" "$t/b" >/dev/null
    chmod -R u+rwX "$t"; rm -rf "$t"
}
oci_two_layers() {
    umoci init --layout "$1"
    oci_base "$1" latest "$(host_arch)"
    t=$(mktemp -d)
    mkdir -p "$t/l2/opq" "$t/l2/etc"
    : > "$t/l2/opq/.wh..wh..opq"
    : > "$t/l2/etc/.wh.gone"
    echo new > "$t/l2/opq/new"
    echo added > "$t/l2/etc/added"
    tar -C "$t/l2" -cf "$t/l2.tar" .
    umoci raw add-layer --image "$1:latest" "$t/l2.tar"
    rm -rf "$t"
}
case "$kind" in
tar) tar -C "$bb" -cf "$out" . ;;
gz)  tar -C "$bb" -czf "$out" . ;;
xz)  tar -C "$bb" -cJf "$out" . ;;
zst) tar -C "$bb" -cf - . | zstd -q -o "$out" ;;
oci) oci_two_layers "$out" ;;
oci-archive|docker-archive)
    w=$(mktemp -d)
    oci_two_layers "$w/l"
    if [ "$kind" = oci-archive ]; then
        $SK copy -q "oci:$w/l:latest" "oci-archive:$out"
    else
        $SK copy -q "oci:$w/l:latest" "docker-archive:$out:lis-test/da:v1"
    fi
    rm -rf "$w" ;;
multi)
    umoci init --layout "$out"
    oci_base "$out" host "$(host_arch)"
    oci_base "$out" other s390x
    python3 - "$out" "$(host_arch)" <<'PY'
import hashlib, json, os, sys
lay, arch = sys.argv[1], sys.argv[2]
idx = json.load(open(os.path.join(lay, "index.json")))
by = {m["annotations"]["org.opencontainers.image.ref.name"]: m for m in idx["manifests"]}
ms = []
for tag, a in (("other", "s390x"), ("host", arch)):
    d = dict(by[tag]); d.pop("annotations", None)
    d["platform"] = {"architecture": a, "os": "linux"}
    ms.append(d)
blob = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                   "manifests": ms}).encode()
h = hashlib.sha256(blob).hexdigest()
open(os.path.join(lay, "blobs", "sha256", h), "wb").write(blob)
idx["manifests"].append({"mediaType": "application/vnd.oci.image.index.v1+json",
                         "digest": "sha256:" + h, "size": len(blob),
                         "annotations": {"org.opencontainers.image.ref.name": "multi"}})
json.dump(idx, open(os.path.join(lay, "index.json"), "w"))
PY
    ;;
push)
    $SK copy -q ${4:-} --dest-tls-verify=false "oci:$bb" "docker://$out" ;;
*) echo "usage: $0 tar|gz|xz|zst|oci|oci-archive|docker-archive|multi BUSYBOX OUT" >&2; exit 2 ;;
esac
