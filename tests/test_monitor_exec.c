/* test_monitor_exec.c - exec rules against a hostile sandbox (issue 29):
 * every spelling of a denied program (links, "..", /proc fd links, a
 * shebang, a copy, a 1,200-byte path, a path built to cost the hub too
 * much), an allow-list with PATH searches, a keyword past the kept argv
 * (on_unknown), what ld.so loads, the allow-list enforced by the kernel
 * (Landlock), and the path race checked after the exec. */
#include "monitorlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Issue 29: a deny rule matches the file an exec runs, however it is
 * spelled: a symlink, "//", "/./", "..", a relative path, the process's own
 * root and fd links (/proc/self/root, /proc/self/fd/N, /dev/fd/N), a shebang
 * naming the program, a copy of it, a path of 1,200 bytes (once cut at 1 KiB,
 * then matched by its cut text). Each fails as a file without the execute
 * right. */
Test(monitor_exec, exec_deny_matches_every_spelling)
{
    lis_policy *pol;
    mfix f = mfix_policy("version: 1\n"
                         "rules:\n"
                         "  - name: no-probe\n"
                         "    on: exec\n"
                         "    path: /mprobe\n"
                         "    action: deny\n",
                         &pol);
    static const char cmd[] =
        "cd /tmp && ln -s /mprobe l && printf '#!/mprobe exit\\n' > s && chmod +x s && "
        "cp /mprobe c && "
        "exec 3</mprobe; n=0; "
        "for c in /tmp/l //mprobe /./mprobe /tmp/../mprobe ../mprobe /proc/self/root/mprobe "
        "/proc/self/fd/3 /proc/thread-self/fd/3 /tmp/s /tmp/c; do "
        "$c exit 0; echo \"$c rc=$?\"; n=$((n+1)); done; "
        "if [ -e /dev/fd/3 ]; then /dev/fd/3 exit 0; echo \"/dev/fd/3 rc=$?\"; n=$((n+1)); fi; "
        "p=/; for i in $(seq 600); do p=\"$p./\"; done; ${p}mprobe exit 0; "
        "echo \"long rc=$?\"; n=$((n+1)); "
        "echo n=$n";
    lis_result r;
    cJSON *s = step(f.m, f.sb, cmd, &r);
    const char *o = r.out.data;
    cr_assert_null(strstr(o, "rc=0"), "a spelling ran the denied program:\n%s%s", o, r.err.data);
    int n = 0;
    const char *at = strstr(o, "n=");
    cr_assert(at && (n = atoi(at + 2)) >= 11, "%s", o);
    for (const char *l = o; (l = strstr(l, " rc=")); l += 4)
        cr_expect(!strncmp(l, " rc=126", 7), "not refused as EACCES:\n%s%s", o, r.err.data);
    char *txt = cJSON_Print(cJSON_GetObjectItem(s, "processes"));
    cr_expect_geq(count_denied(s, "no-probe"), (size_t)n, "%d spellings, records:\n%s", n, txt);
    free(txt);
    lis_result_free(&r);
    cJSON_Delete(s);
    /* a path built to cost the hub more lookups than it gives one exec is
     * not resolved: the rule fires as "not evaluated" (on_unknown: alert), and
     * the check after the exec kills what ran */
    s = step(f.m, f.sb,
             "mkdir -p /tmp/a; p=/tmp; for i in $(seq 300); do p=$p/a/..; done; "
             "$p/../mprobe exit 0; echo \"deep rc=$?\"",
             &r);
    cr_expect(strstr(r.out.data, "deep rc=137"), "%s%s", r.out.data, r.err.data);
    const cJSON *a = cJSON_GetArrayItem(cJSON_GetObjectItem(s, "alerts"), 0);
    cr_expect(a && strstr(str(a, "what"), "not evaluated"), "%s",
              cJSON_PrintUnformatted(cJSON_GetObjectItem(s, "alerts")));
    lis_result_free(&r);
    cJSON_Delete(s);
    mfix_close(&f);
    lis_policy_free(pol);
}

/* An allow-list (deny everything except /bin): ".." cannot climb out of an
 * excepted directory, a copy of an allowed program elsewhere and a memfd
 * copy of an allowed one are refused,
 * and a PATH search through directories that do not exist still finds the
 * allowed program (a refusal is EACCES or ENOENT, never execvp's EPERM). */
Test(monitor_exec, exec_allow_list_holds_and_path_search_works)
{
    lis_policy *pol;
    mfix f = mfix_policy("version: 1\n"
                         "rules:\n"
                         "  - name: only-bin\n"
                         "    on: exec\n"
                         "    path: '*'\n"
                         "    except: ['/bin/*', '/mprobe']\n"
                         "    action: deny\n",
                         &pol);
    lis_result r;
    cJSON *s = step(f.m, f.sb,
                    "cp /bin/busybox /tmp/evil; /bin/../tmp/evil true; echo \"dotdot rc=$?\"; "
                    "/bin/../../../tmp/evil true; echo \"up rc=$?\"; "
                    "PATH=/nonexistent:/usr/local/bin:/bin; export PATH; "
                    "env true; echo \"path rc=$?\"; /mprobe memfd; echo \"memfd rc=$?\"",
                    &r);
    const char *o = r.out.data;
    cr_expect(strstr(o, "dotdot rc=126"), "%s%s", o, r.err.data);
    cr_expect(strstr(o, "up rc=126"), "%s%s", o, r.err.data);
    cr_expect(strstr(o, "path rc=0"), "a PATH search broke:\n%s%s", o, r.err.data);
    cr_expect(strstr(o, "memfd rc=1\n"), "the memfd ran (7):\n%s%s", o, r.err.data);
    cr_expect_geq(count_denied(s, "only-bin"), (size_t)3);
    lis_result_free(&r);
    cJSON_Delete(s);
    mfix_close(&f);
    lis_policy_free(pol);
}

/* A rule that cannot be evaluated never passes silently: a keyword after the
 * 64 arguments a record keeps fires the rule as "not evaluated", and with
 * on_unknown: stop the exec is refused and the episode told to stop. */
Test(monitor_exec, exec_rule_past_the_kept_argv_follows_on_unknown)
{
    lis_policy *pol;
    mfix f = mfix_policy("version: 1\n"
                         "on_unknown: stop\n"
                         "rules:\n"
                         "  - name: no-forbidden\n"
                         "    on: exec\n"
                         "    argv: '*forbidden*'\n"
                         "    action: deny\n",
                         &pol);
    lis_result r;
    cJSON *s = step(f.m, f.sb,
                    "k=forbid; k=${k}den; set -- $(seq 70); /mprobe exit 0 \"$@\" $k; "
                    "echo \"far rc=$?\"; "
                    "/mprobe any near; echo \"near rc=$?\"",
                    &r);
    cr_expect(strstr(r.out.data, "far rc=126"), "%s%s", r.out.data, r.err.data);
    cr_expect(strstr(r.out.data, "near rc=0"), "%s%s", r.out.data, r.err.data);
    const cJSON *a = cJSON_GetArrayItem(cJSON_GetObjectItem(s, "alerts"), 0);
    cr_assert(a, "no alert");
    cr_expect_str_eq(str(a, "rule"), "no-forbidden");
    cr_expect_str_eq(str(a, "action"), "stop");
    cr_expect(strstr(str(a, "what"), "not evaluated"), "%s", str(a, "what"));
    char rule[64];
    cr_expect_eq(lis_monitor_take_action(f.m, rule, sizeof rule), LIS_ACT_STOP);
    lis_result_free(&r);
    cJSON_Delete(s);
    mfix_close(&f);
    lis_policy_free(pol);
}

/* ld.so asked to run a denied program runs nothing (Debian fixture: a
 * dynamic loader and programs it can load). */
Test(monitor_exec, exec_deny_sees_what_ld_so_loads)
{
    const char *deb = t_debian();
    static const char yaml[] = "rules:\n"
                               "  - {name: no-true, on: exec, path: /usr/bin/true, action: deny}\n";
    lis_error err = {0};
    lis_policy *pol = lis_policy_parse(yaml, sizeof yaml - 1, "p.yaml", &err);
    cr_assert(pol, "%s", err.msg);
    lis_ctx *ctx = t_ctx();
    lis_monitor_hub *hub = lis_monitor_hub_new(&err);
    lis_sandbox_spec spec = {.rootfs = deb,
                             .upper = LIS_UPPER_TMPFS,
                             .monitor = lis_monitor_spec_flags(LIS_NET_NONE)};
    lis_sandbox *sb = NULL;
    cr_assert_eq(lis_sandbox_create(ctx, &spec, &sb, &err), 0, "create: %s", err.msg);
    lis_monitor *m = mon(hub, sb, pol);
    lis_result r;
    cJSON *s = step(m, sb,
                    "ld=$(ls /lib64/ld-linux-*.so.* /lib/ld-linux-*.so.* 2>/dev/null | head -n1); "
                    "$ld /usr/bin/true; echo \"ld rc=$?\"; "
                    "$ld --argv0 x /bin/true; echo \"argv0 rc=$?\"; "
                    "$ld /usr/bin/echo allowed; echo \"echo rc=$?\"",
                    &r);
    cr_expect(strstr(r.out.data, "ld rc=126"), "%s%s", r.out.data, r.err.data);
    cr_expect(strstr(r.out.data, "argv0 rc=126"), "%s%s", r.out.data, r.err.data);
    cr_expect(strstr(r.out.data, "allowed\necho rc=0"), "%s%s", r.out.data, r.err.data);
    cr_expect_geq(count_denied(s, "no-true"), (size_t)2);
    lis_result_free(&r);
    cJSON_Delete(s);
    lis_sandbox_destroy(sb, &err);
    lis_monitor_free(m);
    lis_monitor_hub_free(hub);
    lis_policy_free(pol);
    lis_ctx_free(ctx);
}

/* The same allow-list enforced by the kernel (Landlock), with no monitor at
 * all: a copy of an allowed program elsewhere and ".." out of an allowed
 * directory cannot be executed; the allowed ones can. (A memfd is outside
 * Landlock's sight: the hub refuses it, exec_allow_list_holds_...) */
Test(monitor_exec, exec_allow_list_enforced_by_the_kernel)
{
    if (!lis_landlock_abi())
        cr_skip_test("this kernel has no Landlock");
    lis_error err = {0};
    static const char yaml[] = "rules:\n"
                               "  - name: only\n"
                               "    on: exec\n"
                               "    path: '*'\n"
                               "    except: ['/bin/*', '/mprobe']\n"
                               "    action: deny\n";
    lis_policy *pol = lis_policy_parse(yaml, sizeof yaml - 1, "p.yaml", &err);
    cr_assert(pol, "%s", err.msg);
    const char *const *allow = lis_policy_exec_allow(pol);
    cr_assert(allow && allow[0] && allow[1] && !allow[2]);
    cr_assert_str_eq(allow[0], "/bin");
    cr_assert_str_eq(allow[1], "/mprobe");
    static const char glob_yaml[] = "rules:\n"
                                    "  - {name: g, on: exec, path: '*', except: ['/b*n/*'], "
                                    "action: deny}\n";
    lis_policy *gp = lis_policy_parse(glob_yaml, sizeof glob_yaml - 1, "g.yaml", &err);
    cr_assert(gp, "%s", err.msg);
    cr_assert_null(lis_policy_exec_allow(gp), "a glob Landlock cannot express became a rule");
    lis_policy_free(gp);
    lis_ctx *ctx = t_ctx();
    lis_bind b = {.host_path = probe(), .path = "/mprobe", .read_only = 1};
    lis_sandbox_spec spec = {.rootfs = t_busybox(),
                             .upper = LIS_UPPER_TMPFS,
                             .binds = &b,
                             .nbinds = 1,
                             .exec_allow = allow};
    lis_sandbox *sb = NULL;
    cr_assert_eq(lis_sandbox_create(ctx, &spec, &sb, &err), 0, "create: %s", err.msg);
    lis_result r;
    t_sh(sb,
         "cp /bin/busybox /tmp/evil; /tmp/evil true; echo \"copy rc=$?\"; "
         "/bin/../tmp/evil true; echo \"dotdot rc=$?\"; "
         "/bin/true; echo \"bin rc=$?\"; /mprobe exit 3; echo \"probe rc=$?\"",
         &r);
    const char *o = r.out.data;
    cr_expect(strstr(o, "copy rc=126"), "%s%s", o, r.err.data);
    cr_expect(strstr(o, "dotdot rc=126"), "%s%s", o, r.err.data);
    cr_expect(strstr(o, "bin rc=0"), "%s%s", o, r.err.data);
    cr_expect(strstr(o, "probe rc=3"), "%s%s", o, r.err.data);
    lis_result_free(&r);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
    lis_policy_free(pol);
}

/* A write allow-list enforced by the kernel (Landlock), no monitor at all:
 * writes, new files, removals and renames beneath the excepted paths and to
 * /dev/null work; anywhere else they fail before they happen. A write deny
 * of another shape is refused when the policy is read. */
Test(monitor_exec, write_allow_list_enforced_by_the_kernel)
{
    if (!lis_landlock_abi())
        cr_skip_test("this kernel has no Landlock");
    lis_error err = {0};
    static const char yaml[] = "rules:\n"
                               "  - name: only-work\n"
                               "    on: write\n"
                               "    path: '*'\n"
                               "    except: ['/testbed/*', '/tmp/*']\n"
                               "    action: deny\n";
    lis_policy *pol = lis_policy_parse(yaml, sizeof yaml - 1, "p.yaml", &err);
    cr_assert(pol, "%s", err.msg);
    const char *const *allow = lis_policy_write_allow(pol);
    cr_assert(allow && allow[0] && allow[1] && !allow[2]);
    cr_assert_str_eq(allow[0], "/testbed");
    static const char bad_yaml[] = "rules:\n"
                                   "  - {name: b, on: write, path: /etc/*, action: deny}\n";
    lis_policy *bp = lis_policy_parse(bad_yaml, sizeof bad_yaml - 1, "b.yaml", &err);
    cr_assert_null(bp, "a write deny that is no allow-list was accepted");
    cr_assert(strstr(err.msg, "b.yaml:2:") && strstr(err.msg, "allow-list"), "%s", err.msg);
    lis_ctx *ctx = t_ctx();
    lis_sandbox_spec spec = {.rootfs = t_busybox(), .upper = LIS_UPPER_TMPFS, .write_allow = allow};
    lis_sandbox *sb = NULL;
    cr_assert_eq(lis_sandbox_create(ctx, &spec, &sb, &err), 0, "create: %s", err.msg);
    lis_result r;
    t_sh(sb,
         "echo a > /testbed/a && echo ok1; echo b > /tmp/b && echo ok2; echo c > /dev/null && "
         "echo ok3; mkdir /tmp/d && mv /tmp/b /testbed/b && rm /testbed/a && echo ok4; "
         "echo x > /etc/x || echo no1; mkdir /root/y || echo no2; rm /etc/hostname 2>/dev/null "
         "|| echo no3; mv /testbed/b /etc/b || echo no4; cat /dev/null > /etc/passwd || echo no5",
         &r);
    const char *o = r.out.data;
    for (int i = 1; i <= 4; i++) {
        char want[8];
        snprintf(want, sizeof want, "ok%d\n", i);
        cr_expect(strstr(o, want), "%s missing:\n%s%s", want, o, r.err.data);
    }
    for (int i = 1; i <= 5; i++) {
        char want[8];
        snprintf(want, sizeof want, "no%d\n", i);
        cr_expect(strstr(o, want), "a write outside the list went through (%s):\n%s%s", want, o,
                  r.err.data);
    }
    lis_result_free(&r);
    lis_sandbox_destroy(sb, &err);
    lis_ctx_free(ctx);
    lis_policy_free(pol);
}

/* The race the check of a path cannot win: a second thread flips the path
 * between an allowed and a denied program while the first execs it. What
 * ran is checked after the exec: the denied program is killed before it
 * does anything (it sleeps 300 ms, then leaves a mark), and its record names
 * what ran, the spelling the check saw kept as the decoy. (/tmp/bad is a
 * byte longer than /mprobe: not a copy of it, which the rule would refuse.) */
Test(monitor_exec, exec_race_checked_after_the_exec, .timeout = 120)
{
    lis_policy *pol;
    mfix f = mfix_policy("version: 1\n"
                         "rules:\n"
                         "  - name: no-bad\n"
                         "    on: exec\n"
                         "    path: /tmp/bad\n"
                         "    action: deny\n",
                         &pol);
    lis_result r;
    cJSON *s = step(f.m, f.sb,
                    "cp /mprobe /tmp/bad && echo >> /tmp/bad && ln -s /bin/busybox /tmp/okk && "
                    "/mprobe race 300; "
                    "sleep 1; ls /tmp/ran 2>/dev/null; echo done",
                    &r);
    cr_assert(strstr(r.out.data, "done"), "%s%s", r.out.data, r.err.data);
    cr_expect_null(strstr(r.out.data, "/tmp/ran"), "the denied program ran to its end");
    size_t after = 0, named = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItem(s, "processes"))
    {
        const char *path = str(p, "path");
        if (cJSON_IsTrue(cJSON_GetObjectItem(p, "killed_after_exec"))) {
            after++;
            named += path && !strcmp(path, "/tmp/bad") && str(p, "decoy") &&
                     !strcmp(str(p, "decoy"), "/tmp/okk");
        }
    }
    cr_log_info("race: %zu of 300 execs ran /tmp/bad after a check that saw /tmp/okk "
                "(killed after), %zu denied at the check",
                after, count_denied(s, "no-bad") - after);
    cr_expect_eq(named, after, "a killed record does not name what ran");
    /* the flipper shows /tmp/bad to about half of the checks: the race ran */
    cr_expect_geq(count_denied(s, "no-bad"), (size_t)1, "the race never ran");
    lis_result_free(&r);
    cJSON_Delete(s);
    mfix_close(&f);
    lis_policy_free(pol);
}
