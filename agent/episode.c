/* episode.c - one `lis run`: a fresh sandbox, the input copied in, the loop,
 * /testbed/output exported to <output-dir>/<timestamp>/files/, and
 * trajectory.json written next to it, whatever way the loop ended. */
#include "agent_internal.h"
#include "lis_net.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void agent_tool_env_init(lis_sandbox *sb, const agent_prompts *p, agent_tool_env *env)
{
    memset(env, 0, sizeof *env);
    env->sb = sb;
    env->workdir = p->working_dir;
    env->timeout = AGENT_CMD_TIMEOUT;
    env->capture_cap = AGENT_CAPTURE_CAP;
    env->obs_cap = AGENT_OBS_CAP;
    char kind = 0;
    lis_error ignore;
    env->shell = (lis_file_stat(sb, "/bin/bash", &kind, NULL, &ignore) == 0 ||
                  lis_file_stat(sb, "/usr/bin/bash", &kind, NULL, &ignore) == 0)
                     ? "bash"
                     : "sh";
}

int agent_prepare_sandbox(lis_sandbox *sb, const agent_prompts *p, agent_tool_env *env,
                          lis_error *err)
{
    agent_tool_env_init(sb, p, env);
    lis_error ignore;
    const char *mk[] = {"mkdir", "-p", p->working_dir, p->input_dir, p->output_dir, NULL};
    lis_exec_spec spec = {.argv = mk,
                          .out = LIS_STDIO_CAPTURE,
                          .err = LIS_STDIO_CAPTURE,
                          .timeout = 60};
    lis_result res = {0};
    if (lis_exec(sb, &spec, &res, err) < 0)
        return -1;
    int bad = res.exit_code != 0;
    if (bad)
        lis_fail(err, EIO, "mkdir -p %s %s %s in the sandbox failed: %.200s", p->working_dir,
                 p->input_dir, p->output_dir, res.err.data ? res.err.data : res.err_msg);
    lis_result_free(&res);
    if (bad)
        return -1;
    /* original: setup_env's git init, when the image has git */
    const char *gi[] = {"git", "init", "-q", NULL};
    lis_exec_spec g = {.argv = gi,
                       .cwd = p->working_dir,
                       .out = LIS_STDIO_NULL,
                       .err = LIS_STDIO_NULL,
                       .timeout = 60};
    if (lis_exec(sb, &g, &res, &ignore) == 0)
        lis_result_free(&res);
    return 0;
}

/* The run directory's parents, made by the runtime's mkdir -p (the files in
 * it are written with stdio below). */
static int mkdir_p(const char *path, lis_error *err) { return lis_host_mkdir_p(path, 0755, err); }

static int write_text(const char *path, const char *text, lis_error *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return lis_fail_errno(err, "cannot write %s", path);
    fputs(text, f);
    fputc('\n', f);
    if (fclose(f) != 0)
        return lis_fail_errno(err, "cannot write %s", path);
    return 0;
}

/* Copies the host directory so that its contents land in dst; when the image
 * already has dst, through a staging copy merged with cp -a inside the
 * sandbox. original: copy_dir_to_container. */
int agent_copy_input(lis_sandbox *sb, const char *host, const char *dst, lis_error *err)
{
    char kind = 0, stage[4200], src[4300];
    lis_error ign;
    if (lis_file_stat(sb, dst, &kind, NULL, &ign) < 0 || kind != 'd')
        return lis_copy_in(sb, host, dst, err);
    snprintf(stage, sizeof stage, "%s.lis-input", dst);
    if (lis_copy_in(sb, host, stage, err) < 0)
        return -1;
    snprintf(src, sizeof src, "%s/.", stage);
    const char *cp[] = {"cp", "-a", src, dst, NULL};
    const char *rm[] = {"rm", "-rf", stage, NULL};
    lis_exec_spec s = {.argv = cp, .out = LIS_STDIO_NULL, .err = LIS_STDIO_CAPTURE, .timeout = 600};
    lis_result r = {0};
    if (lis_exec(sb, &s, &r, err) < 0)
        return -1;
    int rc = 0;
    if (r.exit_code != 0)
        rc = lis_fail(err, EIO, "cp -a in the sandbox failed: %.200s",
                      r.err.data ? r.err.data : r.err_msg);
    lis_result_free(&r);
    s.argv = rm;
    if (lis_exec(sb, &s, &r, &ign) == 0)
        lis_result_free(&r);
    return rc;
}

/* s as one shell word: as it is, or in single quotes ('\'' for a quote). */
static void shell_word(FILE *f, const char *s)
{
    if (*s && !strpbrk(s, " \t\n'\"$`\\;&|<>()*?[]#~!{}=%")) {
        fputs(s, f);
        return;
    }
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputs("'\\''", f);
        else
            fputc(*s, f);
    }
    fputc('\'', f);
}

static void export_skipped(void *arg, const char *path, const char *why)
{
    agent_export_log *x = arg;
    char full[4200];
    snprintf(full, sizeof full, "%s%s%s", x->root, strcmp(path, ".") ? "/" : "",
             strcmp(path, ".") ? path : "");
    if (x->log)
        fprintf(x->log, "lis: warning: not exported: %s: %s\n", full, why);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "path", full);
    cJSON_AddStringToObject(e, "reason", why);
    if (!cJSON_AddItemToArray(x->skipped, e))
        cJSON_Delete(e);
}

int agent_export(lis_sandbox *sb, const char *path, const char *host_dst, uint64_t max_bytes,
                 agent_export_log *x, lis_error *err)
{
    lis_copy_opts o = {.max_bytes = max_bytes,
                       .data_filter = 1,
                       .skipped = export_skipped,
                       .arg = x};
    int rc = lis_copy_out_opts(sb, path, host_dst, &o, err);
    if (o.skipped_count && x->log)
        fprintf(x->log,
                "lis: warning: %llu files of %s (%llu bytes of data) were left out of the "
                "export by its cap of %llu bytes (--export-max; listed in "
                "trajectory.json's metadata.export_skipped)\n",
                (unsigned long long)o.skipped_count, path, (unsigned long long)o.skipped_bytes,
                (unsigned long long)(max_bytes ? max_bytes
                                     : lis_sandbox_limits(sb).disk_bytes
                                         ? lis_sandbox_limits(sb).disk_bytes
                                         : LIS_DEFAULT_DISK));
    return rc;
}

int agent_episode(lis_ctx *ctx, const agent_run *r, agent_outcome *res, char *run_dir,
                  size_t run_dir_len, lis_error *err)
{
    memset(res, 0, sizeof *res);
    const agent_opts *o = &r->opts;
    const agent_prompts *p = o->prompts;
    FILE *log = o->progress;

    /* the run directory first: a failure here should cost no LLM tokens */
    char dir[4096];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char ts[32];
    strftime(ts, sizeof ts, "%Y%m%d_%H%M%S", &tm);
    snprintf(dir, sizeof dir, "%s/%s", r->output_dir ? r->output_dir : "output", ts);
    if (mkdir_p(dir, err) < 0)
        return -1;
    if (run_dir)
        snprintf(run_dir, run_dir_len, "%s", dir);

    lis_sandbox_spec spec = {.rootfs = r->rootfs, .upper = LIS_UPPER_DISK, .net = r->net};
    spec.limits.memory_bytes = r->memory_bytes ? r->memory_bytes : 200ull << 20;
    spec.limits.disk_bytes = r->disk_bytes;
    lis_sandbox *sb = NULL;
    lis_monitor *mon = NULL;
    if (log)
        fprintf(log, "lis: starting a sandbox on %s\n", r->image ? r->image : r->rootfs);
    /* --net proxy: net/; effects: its monitor attached (watch.c) */
    if (agent_sandbox_create(ctx, &spec, r->watch, &sb, &mon, err) < 0)
        return -1;
    agent_tool_env env;
    lis_error e2 = {0};
    if (r->input_dir && *r->input_dir &&
        agent_copy_input(sb, r->input_dir, p->input_dir, err) < 0) {
        lis_sandbox_destroy(sb, &e2);
        lis_monitor_free(mon);
        return lis_fail(err, err->code, "copying --input-dir %s into the sandbox: %s", r->input_dir,
                        err->msg);
    }
    if (agent_prepare_sandbox(sb, p, &env, err) < 0) {
        lis_sandbox_destroy(sb, &e2);
        lis_monitor_free(mon);
        return -1;
    }
    agent_watch_setup_done(mon); /* the model's first step is step 1 */
    env.mon = mon;

    cJSON *traj = agent_loop(&env, o, res);
    if (res->unreached) { /* an empty run: no files, no trajectory, no paths to print */
        cJSON_Delete(traj);
        lis_sandbox_destroy(sb, &e2);
        lis_monitor_free(mon); /* after its sandbox */
        rmdir(dir);
        if (run_dir)
            run_dir[0] = 0;
        return lis_fail(err, EHOSTUNREACH, "%s", res->error);
    }

    /* outputs and trajectory are saved however the loop ended; nothing that
     * points at the host (links out, devices, fifos, sockets) is exported */
    char files[4200], tpath[4200];
    snprintf(files, sizeof files, "%s/files", dir);
    agent_export_log x = {.log = log, .root = p->output_dir, .skipped = cJSON_CreateArray()};
    if (agent_export(sb, p->output_dir, files, r->export_max, &x, &e2) < 0) {
        if (log)
            fprintf(log, "lis: warning: could not copy %s out of the sandbox: %s\n", p->output_dir,
                    e2.msg);
    }
    mkdir_p(files, &e2); /* also when the output dir itself was not exported */
    char answer_path[4200];
    snprintf(answer_path, sizeof answer_path, "%s/answer.txt", p->output_dir);
    char *answer = NULL;
    size_t alen = 0;
    lis_file_read(sb, answer_path, 1u << 20, &answer, &alen, &e2);
    lis_sandbox_destroy(sb, &e2);
    lis_monitor_free(mon); /* after its sandbox */

    snprintf(tpath, sizeof tpath, "%s/trajectory.json", dir);
    cJSON *md = cJSON_GetObjectItem(traj, "metadata");
    if (md) /* the image as the user named it, not the store's blob path */
        cJSON_AddStringToObject(md, "docker_image", r->image ? r->image : r->rootfs);
    if (md && x.skipped)
        cJSON_AddItemToObject(md, "export_skipped", x.skipped);
    else
        cJSON_Delete(x.skipped);
    char *json = traj ? agent_json_pretty(traj) : NULL;
    cJSON_Delete(traj);
    int rc = 0;
    if (!json)
        rc = lis_fail(err, ENOMEM, "out of memory writing the trajectory");
    else if (write_text(tpath, json, err) < 0)
        rc = -1;
    free(json);

    if (log) {
        fprintf(log, "lis: finished after %d steps (%s%s%s)\n", res->steps,
                agent_stop_name(res->stop), res->error[0] ? ": " : "", res->error);
        fprintf(log, "lis: output files: %s\nlis: trajectory:   %s\n", files, tpath);
        /* a command that runs as printed: the lis that ran, the directory */
        char self[4096];
        ssize_t sn = readlink("/proc/self/exe", self, sizeof self - 1);
        self[sn > 0 ? sn : 0] = 0;
        fputs("lis: report: ", log);
        shell_word(log, sn > 0 ? self : "lis");
        fputs(" report ", log);
        shell_word(log, dir);
        fputc('\n', log);
    }
    if (answer && r->out) {
        fwrite(answer, 1, alen, r->out);
        if (alen && answer[alen - 1] != '\n')
            fputc('\n', r->out);
        fflush(r->out);
    } else if (log) {
        fprintf(log, "lis: no %s was written\n", answer_path);
    }
    free(answer);
    return rc;
}
