/* meta.c - <run_dir>/<name>/meta.json, the record of a sandbox with state:
 * written by its creator, read by every later process (open, ls, gc, the
 * holder search of userns.c); pid + start time name one process forever. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

int lis_meta_write(lis_sandbox *sb, lis_error *err)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "name", sb->name);
    cJSON_AddNumberToObject(j, "pid", sb->pid);
    char st[32];
    snprintf(st, sizeof st, "%llu", start_time(sb->pid));
    cJSON_AddStringToObject(j, "starttime", st);
    cJSON_AddStringToObject(j, "rootfs", sb->rootfs);
    cJSON_AddNumberToObject(j, "created", sb->created);
    cJSON_AddBoolToObject(j, "persist", sb->persist);
    cJSON_AddBoolToObject(j, "full_map", sb->full_map);
    cJSON_AddNumberToObject(j, "net", sb->net);
    cJSON_AddStringToObject(j, "layer_dir", sb->layer_dir);
    cJSON_AddStringToObject(j, "limits", sb->cg ? "cgroup" : "fallback");
    cJSON_AddBoolToObject(j, "paused", sb->paused);
    cJSON_AddNumberToObject(j, "scratch_fd", sb->scratch_fd);
    /* the limits as asked (0: default; 2^64-1 as 1.8e19: unlimited), a fork's default */
    cJSON *lim = cJSON_AddObjectToObject(j, "asked");
    static const char *const lk[] = {"memory", "pids", "cpu_millis", "disk"};
    const uint64_t lv[] = {sb->limits.memory_bytes, sb->limits.pids, sb->limits.cpu_millis,
                           sb->limits.disk_bytes};
    for (int i = 0; i < 4; i++)
        cJSON_AddNumberToObject(lim, lk[i], lv[i] == LIS_UNLIMITED ? 1.8e19 : (double)lv[i]);
    if (sb->disk_limit != LIS_UNLIMITED) /* absent: unlimited (2^64-1 is no JSON number) */
        cJSON_AddNumberToObject(j, "disk_limit", (double)sb->disk_limit);
    cJSON *env = cJSON_AddArrayToObject(j, "env");
    for (size_t i = 0; sb->env && sb->env[i]; i++)
        cJSON_AddItemToArray(env, cJSON_CreateString(sb->env[i]));
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    if (!text)
        return lis_oom(err);
    char tmp[PATH_MAX + 16], path[PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s/meta.json.tmp", sb->state_dir);
    snprintf(path, sizeof path, "%s/meta.json", sb->state_dir);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    size_t len = strlen(text);
    int ok = fd >= 0 && write(fd, text, len) == (ssize_t)len;
    int e = errno;
    if (fd >= 0)
        close(fd);
    free(text);
    if (!ok || rename(tmp, path) < 0)
        return lis_fail_errnum(err, ok ? errno : e, "writing %s", path);
    return 0;
}

cJSON *lis_meta_read(const char *state_dir)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/meta.json", state_dir);
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return cJSON_Parse(buf);
}

/* Alive and the same process that the metadata names. */
int lis_meta_alive(cJSON *m, pid_t *pid)
{
    cJSON *p = cJSON_GetObjectItem(m, "pid"), *s = cJSON_GetObjectItem(m, "starttime");
    if (!cJSON_IsNumber(p) || !cJSON_IsString(s))
        return 0;
    *pid = (pid_t)p->valuedouble;
    unsigned long long st = start_time(*pid);
    return st && st == strtoull(s->valuestring, NULL, 10);
}

int lis_meta_paused(lis_sandbox *sb)
{
    if (!sb->state_dir[0])
        return sb->paused;
    cJSON *m = lis_meta_read(sb->state_dir);
    if (!m)
        return sb->paused;
    sb->paused = cJSON_IsTrue(cJSON_GetObjectItem(m, "paused"));
    cJSON_Delete(m);
    return sb->paused;
}
