/* leftovers.c - what a running lis batch leaves in and beside its directory
 * (the control socket, live.url, the set-up template image noted in
 * template.json) and their removal by the next lis batch command that finds
 * the run dead (kill -9, a crash: results_report.c), so that no stale socket
 * or untagged image outlives it. */
#include "results.h"
#include "rootfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOTE_MAX (16u << 10) /* template.json */

void bleft_template_note(const char *dir, const char *data_dir, const char *digest)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "data_dir", data_dir);
    cJSON_AddStringToObject(j, "digest", digest);
    char *t = lis_json_print(j, 0); /* data_dir may hold any bytes */
    cJSON_Delete(j);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/template.json", dir);
    int fd = t ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600) : -1;
    if (fd >= 0) { /* a note only: without it, lis rootfs gc still finds the image */
        if (write(fd, t, strlen(t)) < 0)
            unlink(path);
        close(fd);
    }
    free(t);
}

void bleft_template_done(const char *dir)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/template.json", dir);
    unlink(path);
}

void bleft_remove(int dfd)
{
    unlinkat(dfd, "ctl.sock", 0);
    unlinkat(dfd, "live.url", 0);
    int fd = openat(dfd, "template.json", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return;
    char buf[NOTE_MAX];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    cJSON *j = n > 0 ? cJSON_ParseWithLength(buf, (size_t)n) : NULL;
    const char *data = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "data_dir"));
    const char *digest = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "digest"));
    lis_error ign = {0};
    if (data && digest && (lis_rootfs_rm(data, digest, NULL, &ign) == 0 || ign.code == ENOENT))
        unlinkat(dfd, "template.json", 0);
    cJSON_Delete(j);
}
