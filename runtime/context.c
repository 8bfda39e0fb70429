/* context.c - the lis_ctx: directories, the init helper, the seccomp program. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A private directory: ours, a real directory, mode 0700. Refuses a
 * directory planted by someone else (e.g. /tmp/lis-UID made by another user). */
static int private_dir(const char *path, uid_t uid, lis_error *err)
{
    if (lis_mkdir_p(path, 0700, err) < 0)
        return -1;
    struct stat st;
    if (lstat(path, &st) < 0)
        return lis_fail_errno(err, "stat %s", path);
    if (!S_ISDIR(st.st_mode) || st.st_uid != uid)
        return lis_fail(err, EPERM,
                        "%s is not a directory owned by uid %u; remove it or set "
                        "XDG_RUNTIME_DIR",
                        path, (unsigned)uid);
    if ((st.st_mode & 0077) && chmod(path, 0700) < 0)
        return lis_fail_errno(err, "chmod %s", path);
    return 0;
}

static const char *home_dir(char *buf, size_t len)
{
    const char *h = getenv("HOME");
    if (h && *h)
        return h;
    struct passwd pw, *res = NULL;
    char tmp[4096];
    if (getpwuid_r(getuid(), &pw, tmp, sizeof tmp, &res) == 0 && res) {
        snprintf(buf, len, "%s", pw.pw_dir);
        return buf;
    }
    return NULL;
}

static int find_init(lis_ctx *ctx, const char *given, lis_error *err)
{
    char exe[PATH_MAX];
    const char *env = getenv("LIS_INIT");
    if (given || (env && *env)) {
        snprintf(ctx->init_path, sizeof ctx->init_path, "%s", given ? given : env);
    } else {
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n < 0)
            return lis_fail_errno(err, "readlink /proc/self/exe");
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        *slash = 0;
        static const char *const rel[] = {"lis-init", "../lis-init", "../libexec/lis/lis-init",
                                          "../lib/lis/lis-init"};
        ctx->init_path[0] = 0;
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            char cand[PATH_MAX + 32];
            snprintf(cand, sizeof cand, "%s/%s", exe, rel[i]);
            if (access(cand, X_OK) == 0 && strlen(cand) < sizeof ctx->init_path) {
                snprintf(ctx->init_path, sizeof ctx->init_path, "%s", cand);
                break;
            }
        }
        if (!ctx->init_path[0])
            return lis_fail(err, ENOENT,
                            "helper lis-init not found next to %s; reinstall lis "
                            "or set LIS_INIT=/path/to/lis-init",
                            exe);
    }
    ctx->init_fd = open(ctx->init_path, O_PATH | O_CLOEXEC);
    if (ctx->init_fd < 0)
        return lis_fail(err, errno, "open helper %s: %s (set LIS_INIT)", ctx->init_path,
                        strerror(errno));
    return 0;
}

/* The subordinate id range of uid (or user) in /etc/subuid or /etc/subgid. */
static int subid_lookup(const char *file, uid_t uid, const char *user, lis_subid *out)
{
    FILE *f = fopen(file, "re");
    if (!f)
        return -1;
    char line[512], idstr[32];
    snprintf(idstr, sizeof idstr, "%u", (unsigned)uid);
    int found = -1;
    while (fgets(line, sizeof line, f)) {
        char *c1 = strchr(line, ':');
        if (!c1)
            continue;
        *c1 = 0;
        if (strcmp(line, idstr) != 0 && !(user && strcmp(line, user) == 0))
            continue;
        unsigned long start, count;
        if (sscanf(c1 + 1, "%lu:%lu", &start, &count) == 2 && count >= 65535) {
            out->start = start;
            out->count = count;
            found = 0;
            break;
        }
    }
    fclose(f);
    return found;
}

static void find_idmap_tools(lis_ctx *ctx)
{
    static const char *const dirs[] = {"/usr/bin", "/bin", "/usr/sbin", "/usr/local/bin"};
    ctx->newuidmap[0] = ctx->newgidmap[0] = 0;
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char u[64], g[64];
        snprintf(u, sizeof u, "%s/newuidmap", dirs[i]);
        snprintf(g, sizeof g, "%s/newgidmap", dirs[i]);
        if (access(u, X_OK) == 0 && access(g, X_OK) == 0) {
            memcpy(ctx->newuidmap, u, sizeof u);
            memcpy(ctx->newgidmap, g, sizeof g);
            break;
        }
    }
    struct passwd pw, *res = NULL;
    char tmp[4096];
    const char *user = NULL;
    if (getpwuid_r(ctx->uid, &pw, tmp, sizeof tmp, &res) == 0 && res)
        user = pw.pw_name;
    memset(&ctx->subuid, 0, sizeof ctx->subuid);
    memset(&ctx->subgid, 0, sizeof ctx->subgid);
    if (ctx->newuidmap[0] && ctx->uid != 0) {
        subid_lookup("/etc/subuid", ctx->uid, user, &ctx->subuid);
        subid_lookup("/etc/subgid", ctx->uid, user, &ctx->subgid);
    }
}

int lis_ctx_prepare_spawn(lis_ctx *ctx, lis_error *err)
{
    pthread_mutex_lock(&ctx->prep_lock);
    int rc = 0;
    if (!ctx->prepared) {
        rc = lis_seccomp_compile(&ctx->seccomp, err);
        if (rc == 0) {
            find_idmap_tools(ctx);
            /* An owner holds two fds per sandbox: 512 sandboxes need more
             * than the usual soft limit of 1024, so use the hard limit. */
            struct rlimit rl;
            if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max > (1u << 20) ? (1u << 20) : rl.rlim_max;
                setrlimit(RLIMIT_NOFILE, &rl);
            }
            ctx->prepared = 1;
        }
    }
    pthread_mutex_unlock(&ctx->prep_lock);
    return rc;
}

lis_ctx *lis_ctx_new(const lis_ctx_opts *opts, lis_error *err)
{
    lis_ctx_opts none = {0};
    if (!opts)
        opts = &none;
    lis_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        lis_oom(err);
        return NULL;
    }
    ctx->init_fd = -1;
    ctx->seccomp.main_fd = ctx->seccomp.cmd_fd = -1;
    for (int i = 0; i < 4; i++)
        ctx->seccomp.notify_fd[i] = -1;
    ctx->holder_fd = -1;
    pthread_mutex_init(&ctx->holder_lock, NULL);
    pthread_mutex_init(&ctx->prep_lock, NULL);
    ctx->uid = getuid();
    ctx->gid = getgid();

    const char *xdg = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    if (opts->run_dir)
        snprintf(ctx->run_dir, sizeof ctx->run_dir, "%s", opts->run_dir);
    else if (xdg && *xdg == '/' && stat(xdg, &st) == 0 && st.st_uid == ctx->uid &&
             access(xdg, W_OK) == 0)
        snprintf(ctx->run_dir, sizeof ctx->run_dir, "%s/lis", xdg);
    else
        snprintf(ctx->run_dir, sizeof ctx->run_dir, "/tmp/lis-%u", (unsigned)ctx->uid);

    char hbuf[PATH_MAX];
    const char *xdata = getenv("XDG_DATA_HOME");
    const char *home = home_dir(hbuf, sizeof hbuf);
    if (opts->data_dir)
        snprintf(ctx->data_dir, sizeof ctx->data_dir, "%s", opts->data_dir);
    else if (xdata && *xdata == '/')
        snprintf(ctx->data_dir, sizeof ctx->data_dir, "%s/lis", xdata);
    else if (home && *home == '/')
        snprintf(ctx->data_dir, sizeof ctx->data_dir, "%s/.local/share/lis", home);
    else
        snprintf(ctx->data_dir, sizeof ctx->data_dir, "/var/tmp/lis-%u", (unsigned)ctx->uid);

    if (private_dir(ctx->run_dir, ctx->uid, err) < 0 || lis_mkdir_p(ctx->data_dir, 0700, err) < 0 ||
        find_init(ctx, opts->init_path, err) < 0) {
        lis_ctx_free(ctx);
        return NULL;
    }
    /* The mount point of each sandbox's private set-up tmpfs. */
    char mnt[PATH_MAX + 8];
    snprintf(mnt, sizeof mnt, "%s/.mnt", ctx->run_dir);
    if (mkdir(mnt, 0700) < 0 && errno != EEXIST) {
        lis_fail_errno(err, "mkdir %s", mnt);
        lis_ctx_free(ctx);
        return NULL;
    }
    ctx->warn = opts->warn;
    ctx->warn_arg = opts->warn_arg;
    return ctx;
}

void lis_ctx_free(lis_ctx *ctx)
{
    if (!ctx)
        return;
    if (ctx->ext_release) /* net/: stops its proxy thread before anything else goes */
        ctx->ext_release(ctx->ext);
    if (ctx->init_fd >= 0)
        close(ctx->init_fd);
    if (ctx->holder_fd >= 0)
        close(ctx->holder_fd);
    pthread_mutex_destroy(&ctx->holder_lock);
    pthread_mutex_destroy(&ctx->prep_lock);
    lis_seccomp_close(&ctx->seccomp);
    lis_cg_ctx_free(ctx);
    free(ctx);
}

const char *lis_ctx_run_dir(const lis_ctx *ctx) { return ctx->run_dir; }
const char *lis_ctx_data_dir(const lis_ctx *ctx) { return ctx->data_dir; }
