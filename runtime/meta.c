/* meta.c - <run_dir>/<name>/meta.json, the record of a sandbox with state:
 * one struct (lis_meta), one reader, one writer (write then rename), one
 * iterator over the run dir. Written by its creator (and by rename and
 * pause), read by every later process (open, ls, gc, the holder search of
 * userns.c); pid + start time name one process forever. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A meta.json is a few hundred bytes plus the environment: a larger file is
 * not one lis wrote. */
#define META_MAX 65536

/* "asked": the limits as asked, by name; 2^64-1 (unlimited) is stored as 1.8e19. */
static const char *const asked_keys[] = {"memory", "pids", "cpu_millis", "disk"};
#define ASKED_N 4

static uint64_t *asked_field(lis_limits *l, int i)
{
    uint64_t *f[ASKED_N] = {&l->memory_bytes, &l->pids, &l->cpu_millis, &l->disk_bytes};
    return f[i];
}

/* Field 22 of /proc/<pid>/stat: with the pid it names one process forever. */
static unsigned long long start_time(pid_t pid)
{
    char buf[1024];
    char *p = lis_proc_stat(pid, buf, sizeof buf);
    /* a zombie PID 1 is a dead sandbox whose parent has not reaped it yet */
    if (!p || p[0] == 'Z' || p[0] == 'X')
        return 0;
    unsigned long long v = 0;
    /* field 22 (starttime); p is at field 3 */
    if (sscanf(p,
               "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d "
               "%*d %llu",
               &v) != 1)
        return 0;
    return v;
}

void lis_meta_release(lis_meta *m)
{
    if (m) {
        lis_env_free(m->env);
        m->env = NULL;
    }
}

/* ---- the writer ---------------------------------------------------------- */

static cJSON *to_json(const lis_meta *m)
{
    cJSON *j = cJSON_CreateObject();
    if (!j)
        return NULL;
    cJSON_AddStringToObject(j, "name", m->name);
    cJSON_AddNumberToObject(j, "pid", m->pid);
    char st[32];
    snprintf(st, sizeof st, "%llu", m->starttime);
    cJSON_AddStringToObject(j, "starttime", st);
    cJSON_AddStringToObject(j, "rootfs", m->rootfs);
    cJSON_AddNumberToObject(j, "created", m->created);
    cJSON_AddBoolToObject(j, "persist", m->persist);
    cJSON_AddBoolToObject(j, "full_map", m->full_map);
    cJSON_AddNumberToObject(j, "net", m->net);
    cJSON_AddStringToObject(j, "layer_dir", m->layer_dir);
    cJSON_AddStringToObject(j, "limits", m->cgroup ? "cgroup" : "fallback");
    cJSON_AddBoolToObject(j, "paused", m->paused);
    cJSON_AddNumberToObject(j, "scratch_fd", m->scratch_fd);
    /* the limits as asked (0: default), a fork's default */
    cJSON *lim = cJSON_AddObjectToObject(j, "asked");
    lis_limits asked = m->asked;
    for (int i = 0; i < ASKED_N; i++) {
        uint64_t v = *asked_field(&asked, i);
        cJSON_AddNumberToObject(lim, asked_keys[i], v == LIS_UNLIMITED ? 1.8e19 : (double)v);
    }
    if (m->disk_limit != LIS_UNLIMITED) /* absent: unlimited (2^64-1 is no JSON number) */
        cJSON_AddNumberToObject(j, "disk_limit", (double)m->disk_limit);
    cJSON *env = cJSON_AddArrayToObject(j, "env");
    for (size_t i = 0; m->env && m->env[i]; i++)
        cJSON_AddItemToArray(env, cJSON_CreateString(m->env[i]));
    return j;
}

int lis_meta_write(const char *state_dir, const lis_meta *m, lis_error *err)
{
    cJSON *j = to_json(m);
    char *text = j ? lis_json_print(j, 1) : NULL;
    cJSON_Delete(j);
    if (!text)
        return lis_oom(err);
    char tmp[PATH_MAX + 16], path[PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s/meta.json.tmp", state_dir);
    snprintf(path, sizeof path, "%s/meta.json", state_dir);
    size_t len = strlen(text);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int ok = fd >= 0 && write(fd, text, len) == (ssize_t)len;
    int e = errno;
    if (fd >= 0)
        close(fd);
    free(text);
    if (!ok || rename(tmp, path) < 0)
        return lis_fail_errnum(err, ok ? errno : e, "writing %s", path);
    return 0;
}

int lis_meta_save(lis_sandbox *sb, lis_error *err)
{
    lis_meta m = {
        .pid = sb->pid,
        .starttime = start_time(sb->pid),
        .created = sb->created,
        .persist = sb->persist,
        .full_map = sb->full_map,
        .paused = sb->paused,
        .net = sb->net,
        .cgroup = sb->cg != NULL,
        .scratch_fd = sb->scratch_fd,
        .asked = sb->limits,
        .disk_limit = sb->disk_limit,
        .env = sb->env, /* borrowed: m is not released */
    };
    snprintf(m.name, sizeof m.name, "%s", sb->name);
    snprintf(m.rootfs, sizeof m.rootfs, "%s", sb->rootfs);
    snprintf(m.layer_dir, sizeof m.layer_dir, "%s", sb->layer_dir);
    return lis_meta_write(sb->state_dir, &m, err);
}

/* ---- the reader ---------------------------------------------------------- */

static const char *jstr(const cJSON *j, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(j, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static int jtrue(const cJSON *j, const char *k) { return cJSON_IsTrue(cJSON_GetObjectItem(j, k)); }

static int from_json(const cJSON *j, lis_meta *m)
{
    const cJSON *v;
    snprintf(m->name, sizeof m->name, "%s", jstr(j, "name"));
    snprintf(m->rootfs, sizeof m->rootfs, "%s", jstr(j, "rootfs"));
    snprintf(m->layer_dir, sizeof m->layer_dir, "%s", jstr(j, "layer_dir"));
    v = cJSON_GetObjectItem(j, "pid");
    m->pid = cJSON_IsNumber(v) ? (pid_t)v->valuedouble : 0;
    m->starttime = strtoull(jstr(j, "starttime"), NULL, 10);
    v = cJSON_GetObjectItem(j, "created");
    m->created = cJSON_IsNumber(v) ? v->valuedouble : 0;
    m->persist = jtrue(j, "persist");
    m->full_map = jtrue(j, "full_map");
    m->paused = jtrue(j, "paused");
    v = cJSON_GetObjectItem(j, "net");
    m->net = cJSON_IsNumber(v) ? (int)v->valuedouble : LIS_NET_NONE;
    m->cgroup = !strcmp(jstr(j, "limits"), "cgroup");
    v = cJSON_GetObjectItem(j, "scratch_fd");
    m->scratch_fd = cJSON_IsNumber(v) ? (int)v->valuedouble : -1;
    const cJSON *lim = cJSON_GetObjectItem(j, "asked");
    for (int i = 0; i < ASKED_N; i++) {
        v = cJSON_GetObjectItem(lim, asked_keys[i]);
        if (cJSON_IsNumber(v) && v->valuedouble >= 0)
            *asked_field(&m->asked, i) =
                v->valuedouble >= 1.8e19 ? LIS_UNLIMITED : (uint64_t)v->valuedouble;
    }
    v = cJSON_GetObjectItem(j, "disk_limit");
    m->disk_limit = cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 9e18
                        ? (uint64_t)v->valuedouble
                        : LIS_UNLIMITED;
    const cJSON *env = cJSON_GetObjectItem(j, "env");
    size_t n = (size_t)cJSON_GetArraySize(env);
    m->env = calloc(n + 1, sizeof *m->env);
    if (!m->env)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const cJSON *e = cJSON_GetArrayItem(env, (int)i);
        if (!(m->env[i] = strdup(cJSON_IsString(e) ? e->valuestring : "X=")))
            return -1;
    }
    return 0;
}

int lis_meta_read(const char *state_dir, lis_meta *m, lis_error *err)
{
    memset(m, 0, sizeof *m);
    m->scratch_fd = -1;
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/meta.json", state_dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return lis_fail_errno(err, "%s", path);
    char *buf = malloc(META_MAX + 1);
    if (!buf) {
        close(fd);
        return lis_oom(err);
    }
    size_t n = 0;
    ssize_t got;
    while (n < META_MAX &&
           ((got = read(fd, buf + n, META_MAX - n)) > 0 || (got < 0 && errno == EINTR)))
        n += got > 0 ? (size_t)got : 0;
    close(fd);
    buf[n] = 0;
    cJSON *j = cJSON_Parse(buf);
    free(buf);
    if (!j)
        return lis_fail(err, EINVAL, "%s: not a sandbox record lis wrote", path);
    int rc = from_json(j, m);
    cJSON_Delete(j);
    if (rc < 0) {
        lis_meta_release(m);
        return lis_oom(err);
    }
    return 0;
}

int lis_meta_alive(const lis_meta *m)
{
    unsigned long long st = m->pid > 0 ? start_time(m->pid) : 0;
    return st && st == m->starttime;
}

int lis_meta_paused(lis_sandbox *sb)
{
    if (!sb->state_dir[0])
        return sb->paused;
    lis_meta m;
    lis_error ignore;
    if (lis_meta_read(sb->state_dir, &m, &ignore) < 0)
        return sb->paused;
    sb->paused = m.paused;
    lis_meta_release(&m);
    return sb->paused;
}

/* ---- the iterator -------------------------------------------------------- */

int lis_meta_each(const char *run_dir, lis_meta_fn fn, void *arg, lis_error *err)
{
    DIR *d = opendir(run_dir);
    if (!d)
        return lis_fail_errno(err, "opendir %s", run_dir);
    int rc = 0;
    struct dirent *e;
    while (!rc && (e = readdir(d))) {
        if (e->d_name[0] == '.' || !lis_valid_name(e->d_name))
            continue;
        char dir[PATH_MAX + 80];
        snprintf(dir, sizeof dir, "%s/%s", run_dir, e->d_name);
        lis_meta m;
        lis_error ignore;
        int have = lis_meta_read(dir, &m, &ignore) == 0;
        rc = fn(dir, e->d_name, have ? &m : NULL, arg);
        if (have)
            lis_meta_release(&m);
    }
    closedir(d);
    return rc;
}
