/* test_doctor.c - `lis doctor`'s user namespace check against fake sysctls
 * (a directory laid out like /proc/sys) and fake probe results, the live
 * probe on this host, and the shipped AppArmor profile through
 * apparmor_parser where it is installed. */
#include "internal.h"
#include "testlib.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A fake /proc/sys with the given values; NULL leaves a file out. */
static const char *fake_sys(const char *apparmor, const char *clone, const char *maxns)
{
    static char dir[512];
    snprintf(dir, sizeof dir, "%s/lis-doctor-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    cr_assert(mkdtemp(dir));
    const char *names[] = {"kernel/apparmor_restrict_unprivileged_userns",
                           "kernel/unprivileged_userns_clone", "user/max_user_namespaces"};
    const char *vals[] = {apparmor, clone, maxns};
    char p[700];
    snprintf(p, sizeof p, "%s/kernel", dir);
    cr_assert_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/user", dir);
    cr_assert_eq(mkdir(p, 0755), 0);
    for (int i = 0; i < 3; i++) {
        if (!vals[i])
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        FILE *f = fopen(p, "w");
        cr_assert(f, "%s", p);
        fprintf(f, "%s\n", vals[i]);
        fclose(f);
    }
    return dir;
}

static lis_check verdict(const char *sys, int unshare_err, int map_err, int mount_err)
{
    lis_userns_probe p = {.unshare_err = unshare_err, .map_err = map_err, .mount_err = mount_err};
    lis_check c;
    lis_doctor_userns(sys, &p, "/usr/local/bin/lis", &c);
    cr_assert_str_eq(c.name, "user namespaces");
    return c;
}

#define HAS(field, text) cr_assert(strstr(field, text), "no \"%s\" in: %s", text, field)

/* Ubuntu 23.10+/24.04: unshare works, the namespace has no capabilities */
Test(doctor, apparmor_restriction_is_named_with_its_fix)
{
    const char *sys = fake_sys("1", NULL, "63000");
    lis_check c = verdict(sys, 0, EPERM, 0);
    cr_assert_eq(c.level, LIS_CHECK_FAIL);
    HAS(c.detail, "AppArmor restricts unprivileged user namespaces");
    HAS(c.detail, "kernel.apparmor_restrict_unprivileged_userns=1");
    HAS(c.detail, "writing uid_map: Operation not permitted");
    HAS(c.fix, "sudo scripts/apparmor/install.sh /usr/local/bin/lis");
    HAS(c.fix, "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0");
    /* the map written, the mount refused: the same cause */
    c = verdict(sys, 0, 0, EPERM);
    cr_assert_eq(c.level, LIS_CHECK_FAIL);
    HAS(c.detail, "AppArmor restricts");
    HAS(c.detail, "mounting: Operation not permitted");
    /* AppArmor refusing the namespace itself */
    c = verdict(sys, EACCES, 0, 0);
    cr_assert_eq(c.level, LIS_CHECK_FAIL);
    HAS(c.detail, "AppArmor denies unprivileged user namespaces");
    HAS(c.fix, "scripts/apparmor/install.sh");
    cr_assert(lis_apparmor_restricts_userns(sys));
}

/* the same host once the profile is loaded: the probe works */
Test(doctor, apparmor_restriction_with_the_profile_is_ok)
{
    const char *sys = fake_sys("1", NULL, "63000");
    lis_check c = verdict(sys, 0, 0, 0);
    cr_assert_eq(c.level, LIS_CHECK_OK, "%s", c.detail);
    HAS(c.detail, "max_user_namespaces=63000");
    HAS(c.detail, "AppArmor restricts them on this host and lets lis through");
}

Test(doctor, debian_unprivileged_userns_clone_0)
{
    const char *sys = fake_sys("0", "0", "63000");
    lis_check c = verdict(sys, EPERM, 0, 0);
    cr_assert_eq(c.level, LIS_CHECK_FAIL);
    HAS(c.detail, "kernel.unprivileged_userns_clone=0");
    HAS(c.fix, "sudo sysctl -w kernel.unprivileged_userns_clone=1");
    HAS(c.fix, "/etc/sysctl.d/");
    cr_assert(!lis_apparmor_restricts_userns(sys));
}

Test(doctor, max_user_namespaces_0)
{
    const char *sys = fake_sys(NULL, NULL, "0");
    lis_check c = verdict(sys, ENOSPC, 0, 0);
    cr_assert_eq(c.level, LIS_CHECK_FAIL);
    HAS(c.detail, "user.max_user_namespaces=0: user namespaces are disabled");
    HAS(c.fix, "sudo sysctl -w user.max_user_namespaces=65536");
    /* a limit reached rather than zero */
    sys = fake_sys(NULL, NULL, "10");
    c = verdict(sys, ENOSPC, 0, 0);
    HAS(c.detail, "user.max_user_namespaces=10: the limit is reached");
}

/* neither sysctl explains it: a container's seccomp profile, or another LSM */
Test(doctor, other_causes_get_their_own_fix)
{
    const char *sys = fake_sys(NULL, NULL, NULL);
    lis_check c = verdict(sys, EPERM, 0, 0);
    cr_assert_eq(c.level, LIS_CHECK_FAIL);
    HAS(c.detail, "cannot create a user namespace: Operation not permitted");
    HAS(c.fix, "seccomp");
    cr_assert(!strstr(c.fix, "apparmor/install.sh"), "%s", c.fix);
    c = verdict(sys, 0, EPERM, 0);
    cr_assert_eq(c.level, LIS_CHECK_FAIL);
    HAS(c.detail, "a user namespace is created but writing uid_map in it fails");
    cr_assert(!strstr(c.detail, "AppArmor restricts"), "%s", c.detail);
}

/* This host lets the test user create user namespaces with capabilities
 * (every other suite depends on it): the live probe sees that, whatever the
 * sysctls claim. */
Test(doctor, live_probe_on_this_host)
{
    lis_userns_probe p;
    lis_userns_probe_run(&p);
    cr_assert_eq(p.unshare_err, 0, "%s", strerror(p.unshare_err));
    cr_assert_eq(p.map_err, 0, "%s", strerror(p.map_err));
    cr_assert_eq(p.mount_err, 0, "%s", strerror(p.mount_err));
    lis_check c;
    lis_doctor_userns(fake_sys("1", NULL, "100"), &p, "/x/lis", &c);
    cr_assert_eq(c.level, LIS_CHECK_OK, "%s", c.detail);
    /* lis_doctor itself runs the probe against the real /proc/sys */
    lis_check all[64];
    size_t n = lis_doctor(NULL, all, 64);
    int found = 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(all[i].name, "user namespaces")) {
            found = 1;
            cr_assert_eq(all[i].level, LIS_CHECK_OK, "%s", all[i].detail);
        }
    cr_assert(found);
}

/* Issue 29: doctor says what a policy's rules guarantee here, from the
 * kernel's own answer (Landlock's ABI). */
Test(doctor, policy_rule_guarantees_follow_landlock)
{
    lis_check all[64];
    size_t n = lis_doctor(NULL, all, 64);
    const lis_check *k = NULL;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(all[i].name, "policy rules"))
            k = &all[i];
    cr_assert(k, "no 'policy rules' check");
    int abi = lis_landlock_abi();
    cr_assert_eq(k->level, abi ? LIS_CHECK_OK : LIS_CHECK_WARN, "%s", k->detail);
    cr_assert(strstr(k->detail, abi ? "enforced by the kernel" : "not by the kernel"), "%s",
              k->detail);
    cr_assert(strstr(k->detail, "checked after"), "%s", k->detail);
}

static const char *parser(void)
{
    const char *c[] = {"/usr/sbin/apparmor_parser", "/sbin/apparmor_parser"};
    for (int i = 0; i < 2; i++)
        if (access(c[i], X_OK) == 0)
            return c[i];
    cr_skip_test("apparmor_parser is not installed (apt-get install apparmor)");
    return NULL;
}

/* scripts/apparmor/lis parses (test.sh copies scripts/apparmor next to the
 * tests); the same check fails on a broken copy, so it checks something. */
Test(doctor, shipped_apparmor_profile_parses)
{
    parser();
    char dir[600];
    snprintf(dir, sizeof dir, "%s/apparmor", t_src_dir());
    int code;
    char *out = t_host(&code, "%s/install.sh --check /usr/local/bin/lis 2>&1", dir);
    cr_assert_eq(code, 0, "%s", out);
    cr_assert(strstr(out, "profile for /usr/local/bin/lis parses"), "%s", out);
    free(out);
    out = t_host(&code, "%s/install.sh --check '/opt/lis/build/{lis,tests/test_*}' 2>&1", dir);
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    out = t_host(&code, "%s/install.sh --check 'relative/lis' 2>&1", dir);
    cr_assert_eq(code, 2, "%s", out);
    free(out);

    char tmp[] = "/tmp/lis-aa-XXXXXX";
    cr_assert(mkdtemp(tmp));
    out = t_host(&code,
                 "cp %s/install.sh %s/ && sed 's/^profile lis /profile lis {/' %s/lis > "
                 "%s/lis && %s/install.sh --check /usr/local/bin/lis 2>&1",
                 dir, tmp, dir, tmp, tmp);
    cr_assert_neq(code, 0, "a broken profile passed the check: %s", out);
    cr_assert(strstr(out, "does not parse"), "%s", out);
    free(out);
    free(t_host(&code, "rm -rf %s", tmp));
}

/* The CLI: a bottom line saying what the host can do, the agent image named,
 * no warning about /dev/net/tun (lis does not need it); lis sandbox --help. */
Test(doctor, cli_bottom_line_image_and_no_tun_warning)
{
    lis_ctx_free(t_ctx()); /* a private data dir: no agent image in it */
    int code = 0;
    char *out = t_lis(&code, "doctor");
    cr_expect(code == 0 || code == 1, "exit %d: %s", code, out);
    cr_expect(strstr(out, "\nthis host can run sandboxes, lis run and lis batch") ||
                  strstr(out, "\nthis host cannot run sandboxes yet"),
              "no bottom line: %s", out);
    cr_expect(strstr(out, "limits: ") || strstr(out, "cannot"), "%s", out);
    cr_expect(strstr(out, "agent image            lis-agent:latest is not built yet"), "%s", out);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "%s image build\n", t_lis_bin());
    cr_expect(strstr(out, cmd), "not the command as it runs: %s", out);
    cr_expect_null(strstr(out, "WARN /dev/net/tun"), "%s", out);
    free(out);
    out = t_lis(&code, "doctor --json");
    cJSON *j = cJSON_Parse(out);
    cr_assert(cJSON_IsArray(j), "%s", out);
    const cJSON *last = cJSON_GetArrayItem(j, cJSON_GetArraySize(j) - 1);
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(last, "check")), "bottom line");
    cJSON_Delete(j);
    free(out);
    out = t_lis(&code, "sandbox --help");
    cr_expect_eq(code, 0, "%s", out);
    cr_expect(strstr(out, "usage: lis sandbox COMMAND") && strstr(out, "  exec NAME"), "%s", out);
    free(out);
    out = t_lis(&code, "image --help");
    cr_expect_eq(code, 0, "%s", out);
    cr_expect(strstr(out, "usage: lis image build [--rebuild]"), "%s", out);
    free(out);
}
