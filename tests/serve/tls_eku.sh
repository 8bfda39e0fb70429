#!/bin/bash
# tls_eku.sh - mutual TLS asks for the client-auth extended key usage (issue 29).
#   tls_eku.sh make DIR        a CA, a server certificate for 127.0.0.1 and three
#                              client certificates: clientAuth, no extended key
#                              usage at all, serverAuth only (DIR: lis serve --tls-dir)
#   tls_eku.sh check DIR PORT  only the clientAuth one gets an answer
set -u
cmd=$1 dir=$2
fails=0
ok() { echo "ok $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

sign() { # name extfile-lines
    local n=$1
    shift
    printf '%s\n' "$@" >"$dir/$n.ext"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/$n-key.pem" \
        -out "$dir/$n.csr" -subj "/CN=$n" 2>/dev/null &&
        openssl x509 -req -in "$dir/$n.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca-key.pem" \
            -CAcreateserial -days 2 -sha256 -out "$dir/$n-cert.pem" -extfile "$dir/$n.ext" 2>/dev/null
}

if [ "$cmd" = make ]; then
    mkdir -p "$dir" && chmod 700 "$dir" || exit 1
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -sha256 -days 2 \
        -keyout "$dir/ca-key.pem" -out "$dir/ca.pem" -subj /CN=lis-test-ca \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null || exit 1
    sign server 'subjectAltName=IP:127.0.0.1' 'extendedKeyUsage=serverAuth' || exit 1
    sign client 'basicConstraints=CA:FALSE' 'extendedKeyUsage=clientAuth' || exit 1
    sign noeku 'basicConstraints=CA:FALSE' || exit 1
    sign srvonly 'basicConstraints=CA:FALSE' 'extendedKeyUsage=serverAuth' || exit 1
    chmod 600 "$dir"/*
    exit 0
fi

port=$3
ping_with() { # name: prints the answer to GET /_ping with that client certificate
    curl -sS --max-time 20 --cacert "$dir/ca.pem" --cert "$dir/$1-cert.pem" --key "$dir/$1-key.pem" \
        "https://127.0.0.1:$port/_ping" 2>&1
}
if openssl x509 -in "$dir/noeku-cert.pem" -noout -text | grep -q 'Extended Key Usage'; then
    bad "the no-EKU certificate has an extended key usage"
fi
out=$(ping_with client)
[ "$out" = OK ] && ok "clientAuth certificate: answered" || bad "clientAuth certificate: $out"
out=$(ping_with noeku)
[ "$out" != OK ] && ok "refused: a client certificate without extended key usage" ||
    bad "a client certificate without extended key usage was answered: $out"
out=$(ping_with srvonly)
[ "$out" != OK ] && ok "refused: a client certificate for serverAuth only" ||
    bad "a serverAuth-only client certificate was answered: $out"
out=$(ping_with client)
[ "$out" = OK ] && ok "the server still answers after the refusals" || bad "after the refusals: $out"
echo "$fails failed"
[ "$fails" = 0 ]
