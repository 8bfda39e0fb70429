/* exec.c - POST /containers/{id}/exec, /exec/{id}/start|json|resize.
 *
 * A started exec is an sv_proc (proc.c) whose pipes (or pty) are relayed to
 * the hijacked stream: frames of the command's writes, read only while the
 * stream's backlog is below SV_STREAM_HIGH (a slow client back-pressures its
 * own command, nobody else). The exit code is recorded before the stream is
 * closed (docker-py inspects the moment it sees EOF). If the client goes
 * away the command keeps running, as with Docker. */
#include "serve.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

typedef enum exec_state {
    EXEC_CREATED, /* made by exec create, not started */
    EXEC_RUNNING, /* started (or its 101 is on the way) */
    EXEC_DONE,    /* ended: exit_code is final */
} exec_state;

struct sv_exec {
    char id[65];
    char cid[65];
    sv_server *s;
    char **argv, **env;
    char cwd[1024], user[64];
    int tty, attach_in, attach_out, attach_err, detach;
    exec_state state;
    int exit_code, pid;
    double ended;
    sv_proc *proc;
    sv_stream *st;
    sv_child child;
    char *inbuf;
    size_t inlen;
    int in_eof;
    sv_exec *next;
};

static sv_exec *find(sv_server *s, const char *id)
{
    size_t n = strlen(id);
    sv_exec *hit = NULL;
    for (sv_exec *e = s->execs; e; e = e->next) {
        if (!strcmp(e->id, id))
            return e;
        if (n >= 4 && !strncmp(e->id, id, n))
            hit = e;
    }
    return hit;
}

static void exec_free(sv_exec *e)
{
    sv_strv_free(e->argv);
    sv_strv_free(e->env);
    free(e->inbuf);
    free(e);
}

/* Forget finished execs of containers that are gone, and those done long ago. */
static void gc(sv_server *s)
{
    double now = lis_now();
    for (sv_exec **p = &s->execs; *p;) {
        sv_exec *e = *p;
        int gone = !sv_container_find(s, e->cid), drop = 0;
        switch (e->state) {
        case EXEC_DONE: drop = now - e->ended > 600 || gone; break;
        case EXEC_CREATED: drop = gone; break;
        case EXEC_RUNNING: break;
        }
        if (drop) {
            *p = e->next;
            exec_free(e);
        } else {
            p = &e->next;
        }
    }
}

/* Env of the container, then the exec's (a later key replaces an earlier);
 * NULL without memory. */
static char **merge_env(char **base, char **over)
{
    size_t nb = sv_strv_len(base), no = sv_strv_len(over), n = 0;
    char **r = calloc(nb + no + 1, sizeof *r);
    for (size_t i = 0; r && i < nb; i++) {
        size_t k = strcspn(base[i], "=");
        int replaced = 0;
        for (size_t j = 0; j < no; j++)
            if (!strncmp(over[j], base[i], k) && over[j][k] == '=')
                replaced = 1;
        if (!replaced && !(r[n++] = strdup(base[i])))
            goto oom;
    }
    for (size_t j = 0; r && j < no; j++)
        if (strchr(over[j], '=') && !(r[n++] = strdup(over[j])))
            goto oom;
    return r;
oom:
    sv_strv_free(r);
    return NULL;
}

enum MHD_Result sv_exec_create(sv_req *q, sv_container *c)
{
    cJSON *b = q->len ? cJSON_ParseWithLength(q->body, q->len) : NULL;
    if (!cJSON_IsObject(b)) {
        cJSON_Delete(b);
        return sv_reply_error(q, 400, "invalid JSON body for exec create");
    }
    if (!c->main) {
        cJSON_Delete(b);
        return sv_reply_error(q, 409, "Container %s is not running", c->id);
    }
    if (c->paused) { /* dockerd's words */
        cJSON_Delete(b);
        return sv_reply_error(q, 409, "Container %s is paused, unpause the container before exec",
                              c->id);
    }
    char **argv = sv_jstrv(b, "Cmd");
    if (!argv || !argv[0]) {
        sv_strv_free(argv);
        cJSON_Delete(b);
        return sv_reply_error(q, 400, "No exec command specified");
    }
    gc(q->s);
    sv_exec *e = calloc(1, sizeof *e);
    char **env = sv_jstrv(b, "Env");
    if (e)
        e->env = merge_env(c->env, env);
    sv_strv_free(env);
    if (!e || !e->env) {
        free(e);
        sv_strv_free(argv);
        cJSON_Delete(b);
        return sv_reply_error(q, 500, "out of memory");
    }
    e->s = q->s;
    sv_hexid(e->id);
    snprintf(e->cid, sizeof e->cid, "%s", c->id);
    e->argv = argv;
    const char *wd = sv_jstr(b, "WorkingDir");
    snprintf(e->cwd, sizeof e->cwd, "%s", wd ? wd : c->workdir[0] ? c->workdir : "/");
    const char *u = sv_jstr(b, "User");
    snprintf(e->user, sizeof e->user, "%s", u ? u : c->user);
    e->tty = sv_jbool(b, "Tty");
    e->attach_in = sv_jbool(b, "AttachStdin");
    e->attach_out = sv_jbool(b, "AttachStdout");
    e->attach_err = sv_jbool(b, "AttachStderr");
    e->exit_code = -1;
    cJSON_Delete(b);
    e->next = q->s->execs;
    q->s->execs = e;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "Id", e->id);
    return sv_reply_json(q, 201, o);
}

/* ---- running ---------------------------------------------------------------------------- */

static int proc_output(void *owner, int type, const char *buf, size_t n)
{
    sv_exec *e = owner;
    int want = type == 2 ? e->attach_err : e->attach_out;
    if (want || e->tty)
        sv_stream_write(e->st, type, buf, n);
    return sv_stream_backlog(e->st) < SV_STREAM_HIGH;
}

/* What the client sent, into the command's stdin (or pty) as far as it takes. */
static void in_flush(sv_exec *e)
{
    int fd = e->proc ? sv_proc_stdin(e->proc) : -1;
    if (fd < 0)
        return;
    while (e->inlen) {
        ssize_t n = write(fd, e->inbuf, e->inlen);
        if (n < 0) {
            if (errno == EAGAIN)
                break;
            e->inlen = 0; /* the command closed its stdin */
            break;
        }
        memmove(e->inbuf, e->inbuf + n, e->inlen - (size_t)n);
        e->inlen -= (size_t)n;
    }
    if (e->inlen) {
        if (sv_proc_stdin_want_room(e->proc, 1) < 0)
            e->inlen = 0; /* cannot wait for room: what the client sent is dropped */
    } else {
        (void)sv_proc_stdin_want_room(e->proc, 0); /* at worst one spurious wake-up */
        if (e->in_eof && !e->tty)
            sv_proc_stdin_close(e->proc);
    }
}

static void stdin_room(void *owner) { in_flush(owner); }

static void st_input(void *owner, const char *buf, size_t n)
{
    sv_exec *e = owner;
    if (n == 0) { /* a half-close: end of stdin, not a hang-up */
        e->in_eof = 1;
        if (e->proc)
            in_flush(e);
        return;
    }
    if (!e->attach_in)
        return;
    char *b = realloc(e->inbuf, e->inlen + n);
    if (!b)
        return;
    e->inbuf = b;
    memcpy(e->inbuf + e->inlen, buf, n);
    e->inlen += n;
    if (e->proc)
        in_flush(e);
}

static void st_drained(void *owner)
{
    sv_exec *e = owner;
    if (e->proc)
        sv_proc_read_on(e->proc);
}

static void st_gone(void *owner)
{
    sv_exec *e = owner;
    sv_stream *st = e->st;
    e->st = NULL;      /* keep running and reading, as Docker does; output goes nowhere */
    sv_stream_end(st); /* closes it: nothing refers to it any more */
    if (e->proc)
        sv_proc_read_on(e->proc);
}

static const sv_stream_ops exec_ops = {.input = st_input, .drained = st_drained, .gone = st_gone};

static void finish(sv_exec *e, int code, const char *msg)
{
    e->exit_code = code;
    e->state = EXEC_DONE;
    e->ended = lis_now();
    if (msg && e->st) {
        char m[600];
        int k = snprintf(m, sizeof m, "%s\r\n", msg);
        sv_stream_write(e->st, 1, m, (size_t)k);
    }
    if (e->st) {
        sv_stream_end(e->st);
        e->st = NULL;
    }
}

static void proc_exited(void *owner, const lis_result *r, const lis_error *err)
{
    sv_exec *e = owner;
    e->proc = NULL;
    sv_container *c = sv_container_find(e->s, e->cid);
    if (c)
        sv_container_del_child(c, &e->child);
    char msg[400] = "";
    int code = r->exit_code < 0 ? 137 : r->exit_code;
    if (r->exec_failed) {
        snprintf(msg, sizeof msg, "OCI runtime exec failed: exec failed: %s: unknown", r->err_msg);
        code = 126;
    } else if (err) {
        snprintf(msg, sizeof msg, "lis: %s", err->msg);
    }
    finish(e, code, msg[0] ? msg : NULL);
}

static const sv_proc_ops exec_proc_ops = {.output = proc_output,
                                          .exited = proc_exited,
                                          .stdin_room = stdin_room};

/* The container is going away: containers.c kills and reaps the proc. */
static void child_detach(void *owner)
{
    sv_exec *e = owner;
    if (e->proc)
        sv_proc_detach(e->proc);
    e->proc = NULL;
    finish(e, 137, NULL);
}

/* "" root, "1000", "1000:1000", "name[:group]": uid/gid, or -1 with a message. */
static int resolve_user(sv_container *c, const char *user, long *uid, long *gid, char *msg,
                        size_t mlen)
{
    *uid = 0;
    *gid = 0;
    if (!user[0])
        return 0;
    char u[64], *g;
    snprintf(u, sizeof u, "%s", user);
    if ((g = strchr(u, ':')))
        *g++ = 0;
    char *end;
    long v = strtol(u, &end, 10);
    int numeric = *u && !*end;
    if (numeric) {
        *uid = v;
        *gid = 0;
    }
    char *pw = NULL;
    size_t len = 0;
    lis_error err = {0};
    if (lis_file_read(c->sb, "/etc/passwd", 1 << 20, &pw, &len, &err) == 0) {
        char *save = NULL; /* strtok_r: jobs run on worker threads */
        for (char *line = strtok_r(pw, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            char *f[7] = {0};
            int nf = 0;
            for (char *p = line; nf < 7; nf++) {
                f[nf] = p;
                char *colon = strchr(p, ':');
                if (!colon) {
                    nf++;
                    break;
                }
                *colon = 0;
                p = colon + 1;
            }
            if (nf < 4)
                continue;
            if ((numeric && atol(f[2]) == v) || (!numeric && !strcmp(f[0], u))) {
                *uid = atol(f[2]);
                *gid = atol(f[3]);
                numeric = 1;
                break;
            }
        }
    }
    free(pw);
    if (!numeric) {
        snprintf(msg, mlen, "unable to find user %s: no matching entries in passwd file", u);
        return -1;
    }
    if (g && *g) {
        long gv = strtol(g, &end, 10);
        if (*end) {
            snprintf(msg, mlen, "unable to find group %s: numeric groups only in lis serve", g);
            return -1;
        }
        *gid = gv;
    }
    return 0;
}

/* setpriv --reuid --regid --clear-groups -- argv: NULL without memory. */
static char **as_user(const char *setpriv, long uid, long gid, char **argv)
{
    size_t n = sv_strv_len(argv);
    char **w = calloc(n + 6, sizeof *w);
    char ru[32], rg[32];
    snprintf(ru, sizeof ru, "--reuid=%ld", uid);
    snprintf(rg, sizeof rg, "--regid=%ld", gid);
    const char *head[] = {setpriv, ru, rg, "--clear-groups", "--"};
    for (size_t i = 0; w && i < 5; i++)
        if (!(w[i] = strdup(head[i])))
            goto oom;
    for (size_t i = 0; w && i < n; i++)
        if (!(w[5 + i] = strdup(argv[i])))
            goto oom;
    return w;
oom:
    sv_strv_free(w);
    return NULL;
}

static int start_proc(sv_exec *e, sv_container *c, char *msg, size_t mlen)
{
    long uid, gid;
    if (resolve_user(c, e->user, &uid, &gid, msg, mlen) < 0)
        return -1;
    char **argv = e->argv;
    char **wrapped = NULL;
    if (uid || gid) {
        /* The runtime runs commands as the sandbox's root; setpriv (util-linux,
         * in every Debian image) switches to the wanted ids inside. */
        char k;
        lis_error err = {0};
        const char *sp =
            lis_file_stat(c->sb, "/usr/bin/setpriv", &k, NULL, &err) == 0 ? "/usr/bin/setpriv"
            : lis_file_stat(c->sb, "/bin/setpriv", &k, NULL, &err) == 0   ? "/bin/setpriv"
                                                                          : NULL;
        if (!sp) {
            snprintf(msg, mlen, "unable to run as user %s: the image has no setpriv", e->user);
            return -1;
        }
        if (!(argv = wrapped = as_user(sp, uid, gid, e->argv))) {
            snprintf(msg, mlen, "out of memory");
            return -1;
        }
    }
    lis_exec_spec sp = {.argv = (const char *const *)argv,
                        .cwd = e->cwd,
                        .env = (const char *const *)e->env,
                        .in = e->attach_in ? LIS_STDIO_PIPE : LIS_STDIO_NULL,
                        .out = e->detach ? LIS_STDIO_NULL : LIS_STDIO_PIPE,
                        .err = e->detach ? LIS_STDIO_NULL : LIS_STDIO_PIPE,
                        .pty = e->tty,
                        .rows = 24,
                        .cols = 80};
    lis_error err = {0};
    e->proc = sv_proc_start(e->s->loop, c->sb, &sp, &exec_proc_ops, e, &err);
    sv_strv_free(wrapped);
    if (!e->proc) {
        snprintf(msg, mlen, "OCI runtime exec failed: %s: unknown", err.msg);
        return -1;
    }
    e->state = EXEC_RUNNING;
    e->pid = lis_proc_pid(sv_proc_lis(e->proc));
    e->child = (sv_child){.proc = sv_proc_lis(e->proc), .detach = child_detach, .owner = e};
    sv_container_add_child(c, &e->child);
    if (e->inlen || e->in_eof)
        in_flush(e);
    return 0;
}

static void upgraded(void *cls, struct MHD_Connection *conn, void *con_cls, const char *extra,
                     size_t nextra, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
    sv_exec *e = cls;
    e->st = sv_stream_new(e->s->loop, sock, urh, !e->tty, extra, nextra, &exec_ops, e);
    sv_container *c = sv_container_find(e->s, e->cid);
    char msg[600];
    if (!c || !c->main) {
        finish(e, 126, "container is not running");
        return;
    }
    if (start_proc(e, c, msg, sizeof msg) < 0)
        finish(e, 126, msg);
}

static enum MHD_Result start(sv_req *q, sv_exec *e)
{
    cJSON *b = q->len ? cJSON_ParseWithLength(q->body, q->len) : NULL;
    e->detach = sv_jbool(b, "Detach");
    if (cJSON_GetObjectItemCaseSensitive(b, "Tty"))
        e->tty = e->tty || sv_jbool(b, "Tty");
    cJSON_Delete(b);
    if (e->state != EXEC_CREATED)
        return sv_reply_error(q, 409, "Exec command %s has already run", e->id);
    sv_container *c = sv_container_find(q->s, e->cid);
    if (!c || !c->main)
        return sv_reply_error(q, 409, "Container %s is not running", e->cid);
    if (e->detach) {
        char msg[600];
        if (start_proc(e, c, msg, sizeof msg) < 0) {
            finish(e, 126, NULL);
            return sv_reply_error(q, 500, "%s", msg);
        }
        return sv_reply_status(q, 200);
    }
    struct MHD_Response *r = MHD_create_response_for_upgrade(upgraded, e);
    sv_resp_headers(r);
    MHD_add_response_header(r, "Content-Type", "application/vnd.docker.raw-stream");
    MHD_add_response_header(r, "Upgrade", "tcp");
    e->state = EXEC_RUNNING; /* a second start is refused from now */
    return sv_reply(q, 101, r);
}

static enum MHD_Result inspect(sv_req *q, sv_exec *e)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "ID", e->id);
    cJSON_AddBoolToObject(o, "Running", e->state == EXEC_RUNNING);
    if (e->state == EXEC_DONE)
        cJSON_AddNumberToObject(o, "ExitCode", e->exit_code);
    else
        cJSON_AddNullToObject(o, "ExitCode");
    cJSON *pc = cJSON_AddObjectToObject(o, "ProcessConfig");
    cJSON_AddBoolToObject(pc, "tty", e->tty);
    cJSON_AddStringToObject(pc, "entrypoint", e->argv[0]);
    cJSON *args = cJSON_AddArrayToObject(pc, "arguments");
    for (size_t i = 1; e->argv[i]; i++)
        cJSON_AddItemToArray(args, cJSON_CreateString(e->argv[i]));
    cJSON_AddBoolToObject(pc, "privileged", 0);
    if (e->user[0])
        cJSON_AddStringToObject(pc, "user", e->user);
    cJSON_AddBoolToObject(o, "OpenStdin", e->attach_in);
    cJSON_AddBoolToObject(o, "OpenStdout", e->attach_out);
    cJSON_AddBoolToObject(o, "OpenStderr", e->attach_err);
    cJSON_AddBoolToObject(o, "CanRemove", 0);
    cJSON_AddStringToObject(o, "ContainerID", e->cid);
    cJSON_AddStringToObject(o, "DetachKeys", "");
    cJSON_AddNumberToObject(o, "Pid", e->pid);
    return sv_reply_json(q, 200, o);
}

static enum MHD_Result resize(sv_req *q, sv_exec *e)
{
    const char *h = sv_arg(q, "h"), *w = sv_arg(q, "w");
    if (e->state == EXEC_RUNNING && e->tty && e->proc && h && w) {
        struct winsize ws = {.ws_row = (unsigned short)atoi(h), .ws_col = (unsigned short)atoi(w)};
        ioctl(lis_proc_pty_fd(sv_proc_lis(e->proc)), TIOCSWINSZ, &ws);
    }
    return sv_reply_status(q, 201);
}

/* rest: "ID/start", "ID/json", "ID/resize" */
enum MHD_Result sv_exec_route(sv_req *q, const char *rest)
{
    const char *op = strrchr(rest, '/');
    if (!op)
        return sv_reply_error(q, 404, "page not found");
    char id[128];
    snprintf(id, sizeof id, "%.*s", (int)(op - rest), rest);
    sv_exec *e = find(q->s, id);
    if (!e)
        return sv_reply_error(q, 404, "No such exec instance: %s", id);
    op++;
    if (!strcmp(op, "start") && !strcmp(q->method, "POST"))
        return start(q, e);
    if (!strcmp(op, "json") && !strcmp(q->method, "GET"))
        return inspect(q, e);
    if (!strcmp(op, "resize") && !strcmp(q->method, "POST"))
        return resize(q, e);
    return sv_reply_error(q, 404, "page not found");
}

void sv_execs_free(sv_server *s)
{
    while (s->execs) {
        sv_exec *e = s->execs;
        s->execs = e->next;
        if (e->proc) { /* its container was removed first, which detached it: not reached */
            lis_proc *p = sv_proc_detach(e->proc);
            lis_error err;
            lis_result r;
            lis_proc_signal(p, SIGKILL, &err);
            lis_proc_wait(p, &r, &err);
            lis_result_free(&r);
        }
        exec_free(e);
    }
}
