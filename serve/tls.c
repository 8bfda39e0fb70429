/* tls.c - mutual TLS on --tcp, as dockerd's --tlsverify (Go's
 * RequireAndVerifyClientCert): the server's certificate and key and the CA
 * that signs its clients, read from --tls-dir (ca.pem, server-cert.pem,
 * server-key.pem, as `lis serve --tls-init` makes them: certs.c), and each TCP
 * connection's TLS done here with GnuTLS: the handshake requires a client
 * certificate, which must chain to the CA, be valid now and be made for
 * clients (extendedKeyUsage clientAuth named in it: a certificate without
 * the extension is refused, and the server's own certificate is not a
 * client's). Only then is the connection handed to libmicrohttpd, as the
 * plaintext end of a socketpair this relay pumps: an unauthenticated client
 * never reaches the HTTP parser.
 *
 * Why not libmicrohttpd's own TLS: 0.9.75 only requests a client certificate
 * (GNUTLS_CERT_REQUEST), so the check would come after HTTP parsing; and on
 * a hijacked (upgraded) connection it does not pass a client's TLS half-close
 * (close_notify: the docker CLI's end of stdin, `docker exec -i`) to the
 * application, so a command waiting for EOF waits for ever (up to 1.0.1). */
#include "serve.h"

#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PEM_MAX (64u << 10)

/* dir/name into a NUL-terminated buffer (PEM_MAX at most). A private key must
 * be readable by its owner only, as ssh wants of its keys. */
static char *read_pem(const char *dir, const char *name, int secret, lis_error *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        lis_fail_errno(err, "--tls-dir: %s (lis serve --tls-init DIR makes the files)", path);
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t)PEM_MAX) {
        close(fd);
        lis_fail(err, EINVAL, "--tls-dir: %s is not a PEM file of at most %u bytes", path, PEM_MAX);
        return NULL;
    }
    if (secret && ((st.st_mode & 077) || st.st_uid != getuid())) {
        close(fd);
        lis_fail(err, EPERM, "--tls-dir: %s is a private key others can read (chmod 600 %s)", path,
                 path);
        return NULL;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    ssize_t n = buf ? read(fd, buf, (size_t)st.st_size) : -1;
    close(fd);
    if (n != (ssize_t)st.st_size) {
        free(buf);
        lis_fail(err, EIO, "--tls-dir: reading %s", path);
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

/* The server certificate must parse and be valid now (a clear line here
 * rather than failed handshakes later). */
static int check_cert(const char *pem, const char *what, lis_error *err)
{
    gnutls_x509_crt_t crt;
    gnutls_datum_t d = {(unsigned char *)pem, (unsigned)strlen(pem)};
    if (gnutls_x509_crt_init(&crt) < 0)
        return lis_oom(err);
    int rc = gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_PEM);
    time_t now = time(NULL), until = rc < 0 ? 0 : gnutls_x509_crt_get_expiration_time(crt);
    time_t from = rc < 0 ? 0 : gnutls_x509_crt_get_activation_time(crt);
    gnutls_x509_crt_deinit(crt);
    if (rc < 0)
        return lis_fail(err, EINVAL, "--tls-dir: %s: %s", what, gnutls_strerror(rc));
    if (now > until || now < from)
        return lis_fail(err, EINVAL,
                        "--tls-dir: %s is not valid now (expired or not yet valid; make new "
                        "certificates with lis serve --tls-init NEWDIR)",
                        what);
    return 0;
}

int sv_tls_load(const char *dir, sv_tls *t, lis_error *err)
{
    memset(t, 0, sizeof *t);
    if (!(t->ca = read_pem(dir, "ca.pem", 0, err)) ||
        !(t->cert = read_pem(dir, "server-cert.pem", 0, err)) ||
        !(t->key = read_pem(dir, "server-key.pem", 1, err)) ||
        check_cert(t->cert, "server-cert.pem", err) < 0 || check_cert(t->ca, "ca.pem", err) < 0) {
        sv_tls_release(t);
        return -1;
    }
    /* the key and the certificate belong together: GnuTLS checks it here */
    gnutls_certificate_credentials_t cred;
    gnutls_datum_t c = {(unsigned char *)t->cert, (unsigned)strlen(t->cert)};
    gnutls_datum_t k = {(unsigned char *)t->key, (unsigned)strlen(t->key)};
    int rc = gnutls_certificate_allocate_credentials(&cred);
    if (rc >= 0) {
        rc = gnutls_certificate_set_x509_key_mem(cred, &c, &k, GNUTLS_X509_FMT_PEM);
        gnutls_certificate_free_credentials(cred);
    }
    if (rc < 0) {
        sv_tls_release(t);
        return lis_fail(err, EINVAL, "--tls-dir: server-cert.pem with server-key.pem: %s",
                        gnutls_strerror(rc));
    }
    return 0;
}

void sv_tls_release(sv_tls *t)
{
    free(t->ca);
    if (t->key) /* the key does not outlive its use in memory we free */
        memset(t->key, 0, strlen(t->key));
    free(t->key);
    free(t->cert);
    memset(t, 0, sizeof *t);
}

/* ---- the relay ---------------------------------------------------------------------- */

struct sv_tls_ctx {
    gnutls_certificate_credentials_t cred;
    gnutls_priority_t prio;
};

sv_tls_ctx *sv_tls_ctx_new(const sv_tls *pem, lis_error *err)
{
    sv_tls_ctx *x = calloc(1, sizeof *x);
    if (!x) {
        lis_oom(err);
        return NULL;
    }
    gnutls_datum_t ca = {(unsigned char *)pem->ca, (unsigned)strlen(pem->ca)};
    gnutls_datum_t c = {(unsigned char *)pem->cert, (unsigned)strlen(pem->cert)};
    gnutls_datum_t k = {(unsigned char *)pem->key, (unsigned)strlen(pem->key)};
    int rc = gnutls_certificate_allocate_credentials(&x->cred);
    if (rc >= 0)
        rc = gnutls_certificate_set_x509_key_mem(x->cred, &c, &k, GNUTLS_X509_FMT_PEM);
    if (rc >= 0)
        rc = gnutls_certificate_set_x509_trust_mem(x->cred, &ca, GNUTLS_X509_FMT_PEM);
    if (rc >= 0) /* TLS 1.2 and 1.3 only */
        rc = gnutls_priority_init2(&x->prio, "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2", NULL, 0);
    if (rc < 0) {
        lis_fail(err, EINVAL, "--tls-dir: %s", gnutls_strerror(rc));
        sv_tls_ctx_free(x);
        return NULL;
    }
    return x;
}

void sv_tls_ctx_free(sv_tls_ctx *x)
{
    if (!x)
        return;
    if (x->cred)
        gnutls_certificate_free_credentials(x->cred);
    if (x->prio)
        gnutls_priority_deinit(x->prio);
    free(x);
}

#define RELAY_BUF 16384 /* one TLS record */

struct sv_tlsconn {
    sv_loop *loop;
    gnutls_session_t ss;
    int tcp, pair; /* pair: our end of the plaintext socketpair, -1 before */
    sv_watch w_tcp, w_pair;
    int handshaken, tls_eof, pair_eof, dead;
    char in[RELAY_BUF]; /* from the client, to libmicrohttpd */
    size_t in_off, in_len;
    char out[RELAY_BUF]; /* from libmicrohttpd, to the client (kept whole on AGAIN) */
    size_t out_len;
    void (*ready)(void *arg, int fd);
    void (*gone)(void *arg);
    void *arg;
};

static void relay_free(void *arg)
{
    sv_tlsconn *t = arg;
    if (t->ss)
        gnutls_deinit(t->ss);
    free(t);
}

void sv_tlsconn_close(sv_tlsconn *t)
{
    if (t->dead)
        return;
    t->dead = 1;
    sv_loop_unwatch(t->loop, &t->w_tcp);
    sv_loop_unwatch(t->loop, &t->w_pair);
    close(t->tcp);
    if (t->pair >= 0)
        close(t->pair);
    if (t->gone)
        t->gone(t->arg);
    sv_loop_defer(t->loop, relay_free, t); /* an event of this batch may name it */
}

/* Does the leaf certificate name clientAuth in its extended key usage? The
 * purpose given to the verification below is not enough: GnuTLS (like RFC
 * 5280 and Go) takes a certificate without the extension as good for every
 * purpose, and lis asks for the usage itself (issue 29). */
static int leaf_is_for_clients(const gnutls_datum_t *der)
{
    gnutls_x509_crt_t crt;
    if (gnutls_x509_crt_init(&crt) < 0)
        return 0;
    int ok = 0;
    if (gnutls_x509_crt_import(crt, der, GNUTLS_X509_FMT_DER) >= 0) {
        for (unsigned i = 0; !ok && i < 64; i++) { /* bounded: a hostile list is short-cut */
            char oid[128];
            size_t len = sizeof oid;
            if (gnutls_x509_crt_get_key_purpose_oid(crt, i, oid, &len, NULL) < 0)
                break; /* the end of the list, or no extension at all */
            ok = !strcmp(oid, GNUTLS_KP_TLS_WWW_CLIENT);
        }
    }
    gnutls_x509_crt_deinit(crt);
    return ok;
}

/* The client's certificate: there, chained to the CA, valid now, for clients
 * (every certificate of the chain allows clientAuth, and the leaf names it). */
static int client_ok(gnutls_session_t ss)
{
    gnutls_typed_vdata_st purpose = {.type = GNUTLS_DT_KEY_PURPOSE_OID,
                                     .data = (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT};
    unsigned status = 1;
    unsigned n = 0;
    const gnutls_datum_t *peers = gnutls_certificate_get_peers(ss, &n);
    return peers && n > 0 && gnutls_certificate_verify_peers(ss, &purpose, 1, &status) >= 0 &&
           status == 0 && leaf_is_for_clients(&peers[0]);
}

static void relay_ev(void *arg, uint32_t ev);

static int handshake(sv_tlsconn *t)
{
    int rc = gnutls_handshake(t->ss);
    if (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED)
        return 0;
    if (rc < 0)
        return -1;
    if (!client_ok(t->ss)) {
        gnutls_alert_send(t->ss, GNUTLS_AL_FATAL, GNUTLS_A_BAD_CERTIFICATE);
        return -1;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
        return -1;
    t->pair = sv[0];
    if (sv_loop_watch(t->loop, &t->w_pair, t->pair, EPOLLIN, relay_ev, t) < 0) {
        close(sv[1]);
        return -1;
    }
    t->handshaken = 1;
    t->ready(t->arg, sv[1]); /* libmicrohttpd's now, or closed by it */
    return 0;
}

/* client -> libmicrohttpd */
static int pump_in(sv_tlsconn *t)
{
    for (;;) {
        while (t->in_off < t->in_len) {
            ssize_t n = send(t->pair, t->in + t->in_off, t->in_len - t->in_off,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -1;
            t->in_off += (size_t)n;
        }
        t->in_off = t->in_len = 0;
        if (t->tls_eof)
            return 0;
        ssize_t n = gnutls_record_recv(t->ss, t->in, sizeof t->in);
        if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
            return 0;
        if (n > 0) {
            t->in_len = (size_t)n;
            continue;
        }
        /* close_notify (the client's half-close), or the TCP end without one:
         * either way the end of what the client sends */
        t->tls_eof = 1;
        shutdown(t->pair, SHUT_WR);
        return 0;
    }
}

/* libmicrohttpd -> client */
static int pump_out(sv_tlsconn *t)
{
    for (;;) {
        while (t->out_len) {
            ssize_t n = gnutls_record_send(t->ss, t->out, t->out_len);
            if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
                return 0;
            if (n < 0)
                return -1;
            memmove(t->out, t->out + n, t->out_len - (size_t)n);
            t->out_len -= (size_t)n;
        }
        if (t->pair_eof)
            return 0;
        ssize_t n = recv(t->pair, t->out, sizeof t->out, MSG_DONTWAIT);
        if (n < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        if (n == 0) { /* libmicrohttpd is done with the connection */
            t->pair_eof = 1;
            return 0;
        }
        t->out_len = (size_t)n;
    }
}

static void relay_ev(void *arg, uint32_t ev)
{
    sv_tlsconn *t = arg;
    if (t->dead)
        return;
    if (!t->handshaken) {
        if (handshake(t) < 0 || t->dead) {
            sv_tlsconn_close(t);
            return;
        }
        if (!t->handshaken) {
            uint32_t want = gnutls_record_get_direction(t->ss) ? EPOLLOUT : EPOLLIN;
            if (sv_loop_events(t->loop, &t->w_tcp, want) < 0)
                sv_tlsconn_close(t);
            return;
        }
    }
    if (pump_in(t) < 0 || pump_out(t) < 0 || (t->pair_eof && !t->out_len)) {
        if (t->pair_eof && !t->out_len)
            gnutls_bye(t->ss, GNUTLS_SHUT_WR); /* best effort: it may not all go out */
        sv_tlsconn_close(t);
        return;
    }
    /* interest: room and what waits, in each direction */
    uint32_t tcp =
        (!t->tls_eof && t->in_off == t->in_len ? EPOLLIN : 0) | (t->out_len ? EPOLLOUT : 0);
    uint32_t pair =
        (!t->pair_eof && !t->out_len ? EPOLLIN : 0) | (t->in_off < t->in_len ? EPOLLOUT : 0);
    if (sv_loop_events(t->loop, &t->w_tcp, tcp) < 0 ||
        sv_loop_events(t->loop, &t->w_pair, pair) < 0)
        sv_tlsconn_close(t);
}

sv_tlsconn *sv_tlsconn_new(sv_loop *l, sv_tls_ctx *x, int fd, void (*ready)(void *, int),
                           void (*gone)(void *), void *arg)
{
    sv_tlsconn *t = calloc(1, sizeof *t);
    if (!t) {
        close(fd);
        return NULL;
    }
    *t = (sv_tlsconn){.loop = l, .tcp = fd, .pair = -1, .ready = ready, .gone = gone, .arg = arg};
    if (gnutls_init(&t->ss, GNUTLS_SERVER | GNUTLS_NONBLOCK | GNUTLS_NO_SIGNAL) < 0 ||
        gnutls_priority_set(t->ss, x->prio) < 0 ||
        gnutls_credentials_set(t->ss, GNUTLS_CRD_CERTIFICATE, x->cred) < 0 ||
        sv_loop_watch(l, &t->w_tcp, fd, EPOLLIN, relay_ev, t) < 0) {
        if (t->ss)
            gnutls_deinit(t->ss);
        free(t);
        close(fd);
        return NULL;
    }
    gnutls_certificate_server_set_request(t->ss, GNUTLS_CERT_REQUIRE);
    gnutls_transport_set_int(t->ss, fd);
    return t;
}
