/* certs.c - `lis serve --tls-init DIR`: a CA, a server certificate and a client
 * certificate for mutual TLS on --tcp, made with GnuTLS's x509 API, under the
 * names Docker's clients look for (DOCKER_CERT_PATH=DIR: ca.pem, cert.pem,
 * key.pem; the server: ca.pem, server-cert.pem, server-key.pem), every file
 * 0600 in a 0700 directory.
 *
 * The CA's key is not kept: nothing can sign another certificate afterwards,
 * so a stolen DIR/ca.pem is only ever a public certificate; another client
 * certificate, or a renewal, is a new --tls-init into a new directory (and a
 * restart of the server with it). ECDSA P-256 keys, SHA-256 signatures. */
#include "serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CERT_DAYS 1095 /* 3 years: a --tls-init into a new DIR renews */
#define MAX_SANS 64

static const char *const files[] = {"ca.pem", "server-cert.pem", "server-key.pem", "cert.pem",
                                    "key.pem"};

static int gfail(lis_error *err, int rc, const char *what)
{
    return lis_fail(err, EIO, "%s: %s", what, gnutls_strerror(rc));
}

typedef struct party {
    gnutls_x509_privkey_t key;
    gnutls_x509_crt_t crt;
} party;

static void party_release(party *p)
{
    if (p->crt)
        gnutls_x509_crt_deinit(p->crt);
    if (p->key)
        gnutls_x509_privkey_deinit(p->key);
}

/* A key and a certificate's common fields: version 3, a random positive
 * serial, validity from an hour ago (clocks of other nodes differ), the CN. */
static int party_new(party *p, const char *cn, lis_error *err)
{
    int rc;
    unsigned char serial[16];
    time_t now = (time_t)lis_wallclock();
    if ((rc = gnutls_x509_privkey_init(&p->key)) < 0 ||
        (rc = gnutls_x509_privkey_generate(p->key, GNUTLS_PK_ECDSA,
                                           GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0)) <
            0)
        return gfail(err, rc, "generating an ECDSA P-256 key");
    if ((rc = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof serial)) < 0)
        return gfail(err, rc, "a random serial number");
    serial[0] &= 0x7f; /* positive (RFC 5280) */
    if ((rc = gnutls_x509_crt_init(&p->crt)) < 0 ||
        (rc = gnutls_x509_crt_set_version(p->crt, 3)) < 0 ||
        (rc = gnutls_x509_crt_set_serial(p->crt, serial, sizeof serial)) < 0 ||
        (rc = gnutls_x509_crt_set_activation_time(p->crt, now - 3600)) < 0 ||
        (rc = gnutls_x509_crt_set_expiration_time(p->crt, now + CERT_DAYS * 86400L)) < 0 ||
        (rc = gnutls_x509_crt_set_dn_by_oid(p->crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn,
                                            (unsigned)strlen(cn))) < 0 ||
        (rc = gnutls_x509_crt_set_key(p->crt, p->key)) < 0)
        return gfail(err, rc, "filling in a certificate");
    unsigned char id[64];
    size_t idlen = sizeof id;
    if ((rc = gnutls_x509_crt_get_key_id(p->crt, 0, id, &idlen)) < 0 ||
        (rc = gnutls_x509_crt_set_subject_key_id(p->crt, id, idlen)) < 0)
        return gfail(err, rc, "the subject key id");
    return 0;
}

/* Signs p's certificate with the CA's key (the CA's own: ca == p). */
static int party_sign(party *p, const party *ca, lis_error *err)
{
    int rc;
    unsigned char id[64];
    size_t idlen = sizeof id;
    if ((rc = gnutls_x509_crt_get_subject_key_id(ca->crt, id, &idlen, NULL)) < 0 ||
        (rc = gnutls_x509_crt_set_authority_key_id(p->crt, id, idlen)) < 0)
        return gfail(err, rc, "the authority key id");
    if ((rc = gnutls_x509_crt_sign2(p->crt, ca->crt, ca->key, GNUTLS_DIG_SHA256, 0)) < 0)
        return gfail(err, rc, "signing a certificate");
    return 0;
}

/* One SAN: an IP address when it parses as one, else a DNS name. */
static int add_san(gnutls_x509_crt_t crt, const char *name, lis_error *err)
{
    unsigned char a[16];
    int rc;
    if (inet_pton(AF_INET, name, a) == 1)
        rc = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, a, 4,
                                                  GNUTLS_FSAN_APPEND);
    else if (inet_pton(AF_INET6, name, a) == 1)
        rc = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, a, 16,
                                                  GNUTLS_FSAN_APPEND);
    else
        rc = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, name,
                                                  (unsigned)strlen(name), GNUTLS_FSAN_APPEND);
    if (rc < 0)
        return lis_fail(err, EINVAL, "the server certificate's name %s: %s", name,
                        gnutls_strerror(rc));
    return 0;
}

typedef struct sans {
    char v[MAX_SANS][256];
    size_t n;
} sans;

static void sans_add(sans *s, const char *name)
{
    if (!*name || strlen(name) >= sizeof s->v[0] || s->n >= MAX_SANS)
        return;
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->v[i], name))
            return;
    snprintf(s->v[s->n++], sizeof s->v[0], "%s", name);
}

/* The names a client may reach this host by: localhost, the loopback
 * addresses, the host name and its canonical name, every address of an
 * interface that is up (link-local IPv6 left out: it needs a zone), and the
 * extra ones asked for. */
static void host_names(sans *s, const char *const *extra, size_t nextra)
{
    sans_add(s, "localhost");
    sans_add(s, "127.0.0.1");
    sans_add(s, "::1");
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) == 0) {
        sans_add(s, host);
        struct addrinfo hints = {.ai_flags = AI_CANONNAME}, *res = NULL;
        if (getaddrinfo(host, NULL, &hints, &res) == 0 && res && res->ai_canonname)
            sans_add(s, res->ai_canonname);
        if (res)
            freeaddrinfo(res);
    }
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) == 0) {
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
            char a[INET6_ADDRSTRLEN];
            if (!i->ifa_addr)
                continue;
            if (i->ifa_addr->sa_family == AF_INET)
                inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, a, sizeof a);
            else if (i->ifa_addr->sa_family == AF_INET6 &&
                     !IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr))
                inet_ntop(AF_INET6, &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, a, sizeof a);
            else
                continue;
            sans_add(s, a);
        }
        freeifaddrs(ifs);
    }
    for (size_t i = 0; i < nextra; i++)
        sans_add(s, extra[i]);
}

static int write_file(int dfd, const char *name, const gnutls_datum_t *d, lis_error *err)
{
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return lis_fail_errno(err, "creating %s", name);
    int ok = write(fd, d->data, d->size) == (ssize_t)d->size && fsync(fd) == 0;
    int e = errno;
    close(fd);
    return ok ? 0 : lis_fail_errnum(err, e, "writing %s", name);
}

static int write_crt(int dfd, const char *name, gnutls_x509_crt_t crt, lis_error *err)
{
    gnutls_datum_t d = {0};
    int rc = gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &d);
    if (rc < 0)
        return gfail(err, rc, "exporting a certificate");
    rc = write_file(dfd, name, &d, err);
    gnutls_free(d.data);
    return rc;
}

static int write_key(int dfd, const char *name, gnutls_x509_privkey_t key, lis_error *err)
{
    gnutls_datum_t d = {0};
    int rc =
        gnutls_x509_privkey_export2_pkcs8(key, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN, &d);
    if (rc < 0)
        return gfail(err, rc, "exporting a key");
    rc = write_file(dfd, name, &d, err);
    gnutls_free(d.data);
    return rc;
}

/* DIR: made 0700 when missing; an existing one must be ours, not readable by
 * others, and hold none of the five files (nothing is overwritten). */
static int open_dir(const char *dir, lis_error *err)
{
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return lis_fail_errno(err, "creating %s", dir);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return lis_fail_errno(err, "opening %s", dir);
    struct stat st;
    if (fstat(dfd, &st) < 0 || st.st_uid != getuid() || (st.st_mode & 077)) {
        close(dfd);
        return lis_fail(err, EPERM,
                        "%s must be a directory of yours that nobody else can read or enter "
                        "(chmod 700 %s)",
                        dir, dir);
    }
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        if (faccessat(dfd, files[i], F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
            close(dfd);
            return lis_fail(err, EEXIST,
                            "%s/%s exists: --tls-init never overwrites (use a new directory)", dir,
                            files[i]);
        }
    return dfd;
}

int lis_serve_tls_init(const char *dir, const char *const *extra_names, size_t nextra,
                       char *names_out, size_t names_len, lis_error *err)
{
    sans names = {0};
    host_names(&names, extra_names, nextra);
    size_t off = 0;
    for (size_t i = 0; i < names.n && off < names_len; i++)
        off +=
            (size_t)snprintf(names_out + off, names_len - off, "%s%s", i ? ", " : "", names.v[i]);
    int dfd = open_dir(dir, err);
    if (dfd < 0)
        return -1;
    party ca = {0}, srv = {0}, cli = {0};
    char host[256] = "", cn[300];
    gethostname(host, sizeof host - 1);
    snprintf(cn, sizeof cn, "lis serve%s%s", host[0] ? " " : "", host);
    int rc = party_new(&ca, "lis serve CA", err);
    if (rc == 0 &&
        ((rc = gnutls_x509_crt_set_basic_constraints(ca.crt, 1, 0)) < 0 ||
         (rc =
              gnutls_x509_crt_set_key_usage(ca.crt, GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN |
                                                        GNUTLS_KEY_DIGITAL_SIGNATURE)) < 0))
        rc = gfail(err, rc, "the CA's constraints");
    if (rc == 0)
        rc = party_sign(&ca, &ca, err);
    const char *who[2] = {cn, "lis serve client"};
    const char *purpose[2] = {GNUTLS_KP_TLS_WWW_SERVER, GNUTLS_KP_TLS_WWW_CLIENT};
    party *leaf[2] = {&srv, &cli};
    for (int i = 0; rc == 0 && i < 2; i++) {
        if ((rc = party_new(leaf[i], who[i], err)) < 0)
            break;
        if ((rc = gnutls_x509_crt_set_basic_constraints(leaf[i]->crt, 0, -1)) < 0 ||
            (rc = gnutls_x509_crt_set_key_usage(leaf[i]->crt, GNUTLS_KEY_DIGITAL_SIGNATURE)) < 0 ||
            (rc = gnutls_x509_crt_set_key_purpose_oid(leaf[i]->crt, purpose[i], 1)) < 0) {
            rc = gfail(err, rc, "a certificate's purpose");
            break;
        }
        for (size_t k = 0; i == 0 && rc == 0 && k < names.n; k++)
            rc = add_san(srv.crt, names.v[k], err);
        if (rc == 0)
            rc = party_sign(leaf[i], &ca, err);
    }
    if (rc == 0 && (rc = write_crt(dfd, "ca.pem", ca.crt, err)) == 0 &&
        (rc = write_crt(dfd, "server-cert.pem", srv.crt, err)) == 0 &&
        (rc = write_key(dfd, "server-key.pem", srv.key, err)) == 0 &&
        (rc = write_crt(dfd, "cert.pem", cli.crt, err)) == 0)
        rc = write_key(dfd, "key.pem", cli.key, err);
    if (rc < 0) /* nothing half-made: what was written goes */
        for (size_t i = 0; i < sizeof files / sizeof *files; i++)
            unlinkat(dfd, files[i], 0);
    party_release(&ca);
    party_release(&srv);
    party_release(&cli);
    close(dfd);
    return rc < 0 ? -1 : 0;
}
