/* test_batch_utf8.c - every file lis writes is strict UTF-8 JSON (issue 33,
 * item 3): a hostile episode through `lis batch` and `lis run` (scripted by
 * tests/fake_llm.py) makes file names, file contents, arguments and output
 * that are not UTF-8, a 600-byte argument of 3-byte characters (cut at the
 * monitor's 511-byte cap), edits a binary file; every .json and .jsonl file
 * of its output is then parsed by Python's json after a strict UTF-8 decode
 * (tests/strict_json.py), and the stated form round-trips: the base64 beside
 * a replaced string gives the original bytes back. */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void setup(void) { lis_ctx_free(t_ctx()); }
TestSuite(batch_utf8, .init = setup);

static cJSON *bash(const char *cmd)
{
    cJSON *e = cJSON_CreateObject(), *calls = cJSON_AddArrayToObject(e, "calls");
    cJSON *c = cJSON_CreateArray(), *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "command", cmd);
    cJSON_AddItemToArray(c, cJSON_CreateString(cmd ? "execute_bash" : "submit"));
    cJSON_AddItemToArray(c, p);
    cJSON_AddItemToArray(calls, c);
    if (!cmd)
        cJSON_DeleteItemFromObject(p, "command");
    return e;
}

/* The bytes of base64 text b64 into out (at most len); how many. */
static size_t unbase64(const char *b64, unsigned char *out, size_t len)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    unsigned v = 0, bits = 0;
    size_t n = 0;
    for (const char *p = b64; *p && *p != '='; p++) {
        const char *at = strchr(abc, *p);
        cr_assert(at && *p, "not base64: %s", b64);
        v = v << 6 | (unsigned)(at - abc);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            cr_assert_lt(n, len);
            out[n++] = (unsigned char)(v >> bits);
        }
    }
    return n;
}

/* 1 when the base64 text b64 is exactly the bytes want */
static int b64_is(const char *b64, const char *want)
{
    unsigned char buf[4096];
    size_t n = unbase64(b64 ? b64 : "", buf, sizeof buf);
    return n == strlen(want) && !memcmp(buf, want, n);
}

static const char *str(const cJSON *o, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(o, k));
    return s ? s : "";
}

#define ARG_BAD "arg\377\376end"
#define NAME_BAD "/testbed/bad_\377\376name"

/* The checks of one trajectory: the stated form of argv, paths, alerts and
 * binary files, and the long argument cut on a character boundary. */
static void check_trajectory(const char *path)
{
    cJSON *t = t_slurp_json(path);
    int argv_ok = 0, long_ok = 0, name_ok = 0, bin_ok = 0, latin_ok = 0, alert_ok = 0;
    const cJSON *st, *p, *f, *a;
    cJSON_ArrayForEach(st, cJSON_GetObjectItem(t, "steps"))
    {
        const cJSON *fx = cJSON_GetObjectItem(st, "effects");
        cJSON_ArrayForEach(p, cJSON_GetObjectItem(fx, "processes"))
        {
            const cJSON *argv = cJSON_GetObjectItem(p, "argv"), *map;
            const cJSON *b64 = cJSON_GetObjectItem(p, "argv_b64");
            cJSON_ArrayForEach(map, b64)
            {
                if (!b64_is(map->valuestring, ARG_BAD))
                    continue;
                const char *shown =
                    cJSON_GetStringValue(cJSON_GetArrayItem(argv, atoi(map->string)));
                cr_expect_str_eq(shown ? shown : "", "arg\xEF\xBF\xBD\xEF\xBF\xBD"
                                                     "end");
                argv_ok = 1;
            }
            const cJSON *arg;
            cJSON_ArrayForEach(arg, argv)
            {
                const char *s = arg->valuestring;
                if (strncmp(s, "\xE2\x95\x90", 3))
                    continue;
                /* 170 whole characters: the 511-byte cap, on a boundary */
                size_t n = strlen(s);
                cr_expect_eq(n, 510, "the long argument is %zu bytes", n);
                for (size_t i = 0; i + 3 <= n; i += 3)
                    cr_expect(!memcmp(s + i, "\xE2\x95\x90", 3), "byte %zu of %s", i, s);
                long_ok = 1;
            }
        }
        cJSON_ArrayForEach(f, cJSON_GetObjectItem(fx, "files"))
        {
            if (b64_is(str(f, "path_b64"), NAME_BAD)) {
                cr_expect_str_eq(str(f, "path"), "/testbed/bad_\xEF\xBF\xBD\xEF\xBF\xBDname");
                name_ok = 1;
            }
            int binary = cJSON_IsTrue(cJSON_GetObjectItem(f, "binary"));
            if (!strcmp(str(f, "path"), "/testbed/bin.dat") &&
                !strcmp(str(f, "change"), "modified"))
                bin_ok = binary && !cJSON_GetObjectItem(f, "diff");
            if (!strcmp(str(f, "path"), "/testbed/latin1.txt"))
                latin_ok = binary && !cJSON_GetObjectItem(f, "diff");
        }
        cJSON_ArrayForEach(a, cJSON_GetObjectItem(fx, "alerts"))
        {
            const char *what = str(a, "what"), *b = str(a, "what_b64");
            alert_ok |= strstr(what, "arg\xEF\xBF\xBD") && *b;
        }
    }
    char *txt = cJSON_PrintUnformatted(t);
    cr_expect(argv_ok, "no argv_b64 gives the argument back: %.4000s", txt);
    cr_expect(long_ok, "no long argument: %.4000s", txt);
    cr_expect(name_ok, "no path_b64 gives the file name back: %.4000s", txt);
    cr_expect(bin_ok, "the binary file's edit is not marked binary: %.4000s", txt);
    cr_expect(latin_ok, "the Latin-1 file is not marked binary: %.4000s", txt);
    cr_expect(alert_ok, "no alert text in the stated form: %.4000s", txt);
    free(txt);
    cJSON_Delete(t);
}

static void strict_json(const char *dir)
{
    int code = 0;
    char *o = t_host(&code, "python3 %s/strict_json.py %s 2>&1", t_src_dir(), dir);
    cr_expect_eq(code, 0, "not strict UTF-8 JSON under %s:\n%s", dir, o);
    free(o);
}

Test(batch_utf8, hostile_bytes_strict_json, .timeout = 240)
{
    static char root[700];
    snprintf(root, sizeof root, "%s/bbprobe", t_tmpdir());
    int code = 0;
    char *o = t_host(&code, "rm -rf %s && cp -a %s %s && cp %s %s/mprobe && chmod 755 %s/mprobe",
                     root, t_busybox(), root, t_build_file("tests/monitor_probe"), root, root);
    cr_assert_eq(code, 0, "%s", o);
    free(o);
    char d[600], tasks[700], pol[700], cmd[2048];
    snprintf(d, sizeof d, "%s/utf8", t_tmpdir());
    free(t_host(NULL, "rm -rf %s && mkdir -p %s/out", d, d));
    snprintf(tasks, sizeof tasks, "%s/tasks.jsonl", d);
    t_put(tasks, "{\"id\":\"u\",\"problem_statement\":\"UTF go\",\"ground_truth\":\"ans\"}\n");
    snprintf(pol, sizeof pol, "%s/policy.yaml", d);
    t_put(pol, "rules:\n  - name: odd-arg\n    on: exec\n    argv: \"*arg*\"\n    action: flag\n");
    /* 200 x U+2550 (600 bytes): the 511-byte cap of an argument falls inside one */
    char longarg[601] = "";
    for (int i = 0; i < 200; i++)
        strcat(longarg, "\xE2\x95\x90");
    snprintf(cmd, sizeof cmd,
             "printf x > \"/testbed/bad_$(printf '\\377\\376')name\"; "
             "printf 'caf\\351\\n' > /testbed/latin1.txt; "
             "printf '\\000\\001\\002\\377' > /testbed/bin.dat; "
             "/mprobe any \"$(printf 'arg\\377\\376end')\" %s; "
             "printf 'out\\377\\376\\000\\001 done\\n'",
             longarg);
    cJSON *s = cJSON_CreateObject(), *rows = cJSON_AddObjectToObject(s, "rows");
    cJSON *x = cJSON_AddArrayToObject(rows, "UTF");
    cJSON_AddItemToArray(x, bash(cmd));
    cJSON_AddItemToArray(x, bash("printf '\\000\\376' >> /testbed/bin.dat; "
                                 "printf 'caf\\351 2\\n' >> /testbed/latin1.txt; "
                                 "echo ans > /testbed/output/answer.txt"));
    cJSON_AddItemToArray(x, bash(NULL));
    char *script = cJSON_PrintUnformatted(s);
    cJSON_Delete(s);
    t_fake f;
    t_fake_start(&f, script);
    free(script);

    o = t_lis(&code,
              "batch --llm-name fake --llm-base-url %s --api-key k --rootfs %s --net none "
              "--policy %s --tasks %s --scorer builtin:match --output-dir %s/out",
              f.url, root, pol, tasks, d);
    cr_assert_eq(code, 0, "%s", o);
    free(o);
    char rdir[1024], traj[1200];
    t_run_dir(d, rdir, sizeof rdir);
    o = t_lis(&code, "batch report %s", rdir); /* the report's files too */
    cr_expect_eq(code, 0, "%s", o);
    free(o);
    strict_json(rdir);
    snprintf(traj, sizeof traj, "%s/trajectories/u.json", rdir);
    check_trajectory(traj);

    /* lis run: its trajectory.json */
    o = t_lis(&code,
              "run --query 'UTF go' --llm-name fake --llm-base-url %s --api-key k --rootfs %s "
              "--net none --policy %s --output-dir %s/run",
              f.url, root, pol, d);
    t_fake_stop(&f);
    cr_expect_eq(code, 0, "%s", o);
    free(o);
    snprintf(traj, sizeof traj, "%s/run", d);
    strict_json(traj);
    o = t_host(&code, "ls -d %s/run/*/trajectory.json | head -1 | tr -d '\\n'", d);
    check_trajectory(o);
    free(o);
}

/* A task id that is not UTF-8 is refused (results and --resume key on it). */
Test(batch_utf8, task_id_not_utf8)
{
    char tasks[600];
    snprintf(tasks, sizeof tasks, "%s/bad-id.jsonl", t_tmpdir());
    t_put(tasks, "{\"id\":\"a\xff\",\"problem_statement\":\"p\"}\n");
    int code = 0;
    char *o = t_lis(&code,
                    "batch --llm-name fake --llm-base-url http://127.0.0.1:9 --api-key k "
                    "--rootfs %s --tasks %s --output-dir %s/bad-out",
                    t_busybox(), tasks, t_tmpdir());
    cr_expect_neq(code, 0, "%s", o);
    cr_expect(strstr(o, "bad-id.jsonl:1: id is not valid UTF-8"), "%s", o);
    free(o);
}

/* lis_json_print itself: valid text is printed as cJSON prints it, and the
 * stated form of a member string, of strings in (nested) arrays and of keys;
 * the cuts of lis_utf8_cut. */
Test(batch_utf8, stated_form_unit)
{
    cJSON *j = cJSON_Parse("{\"a\":\"caf\\u00e9\",\"n\":[1,\"x\"],\"o\":{\"k\":true}}");
    char *want = cJSON_PrintUnformatted(j), *got = lis_json_print(j, 0);
    cr_expect_str_eq(got, want);
    free(want), free(got);
    cJSON_Delete(j);

    j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "s",
                            "a\xff"
                            "b");
    cJSON_AddStringToObject(j, "s_b64", "stale");
    cJSON *arr = cJSON_AddArrayToObject(j, "argv"), *in = cJSON_CreateArray();
    cJSON_AddItemToArray(arr, cJSON_CreateString("ok"));
    cJSON_AddItemToArray(arr, cJSON_CreateString("\xc3"));
    cJSON_AddItemToArray(in, cJSON_CreateString("\xed\xa0\x80")); /* a surrogate */
    cJSON_AddItemToArray(arr, in);
    cJSON_AddStringToObject(j, "k\xfe", "v");
    got = lis_json_print(j, 0);
    cr_expect_str_eq(got, "{\"s\":\"a\xEF\xBF\xBD"
                          "b\",\"argv\":[\"ok\",\"\xEF\xBF\xBD\","
                          "[\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"]],\"k\xEF\xBF\xBD\":\"v\","
                          "\"s_b64\":\"Yf9i\",\"argv_b64\":{\"1\":\"ww==\",\"2.0\":\"7aCA\"},"
                          "\"_b64_keys\":{\"k\xEF\xBF\xBD\":\"a/4=\"}}");
    free(got);
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(j, "s")),
                     "a\xff"
                     "b",
                     "the printed tree was changed");
    cJSON_Delete(j);

    /* a root array or string keeps no bytes but is valid; a root's own key is not printed */
    j = cJSON_CreateArray();
    cJSON_AddItemToArray(j, cJSON_CreateString("\xff"));
    got = lis_json_print(j, 0);
    cr_expect_str_eq(got, "[\"\xEF\xBF\xBD\"]");
    free(got);
    cJSON_Delete(j);
    j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "n\xff", 1);
    got = lis_json_print(cJSON_GetArrayItem(j, 0), 0);
    cr_expect_str_eq(got, "1");
    free(got);
    cJSON_Delete(j);

    /* bytes with a NUL and a length: the same form */
    j = cJSON_CreateObject();
    cr_assert_eq(lis_json_add_bytes(j, "out", "ok\0\xff!", 5), 0);
    cr_assert_eq(lis_json_add_bytes(j, "fine", "caf\xC3\xA9 and more", 5), 0);
    got = lis_json_print(j, 0);
    cr_expect_str_eq(got, "{\"out\":\"ok\xEF\xBF\xBD\xEF\xBF\xBD!\",\"out_b64\":\"b2sA/yE=\","
                          "\"fine\":\"caf\xC3\xA9\"}");
    free(got);
    cJSON_Delete(j);
    char small[6];
    lis_utf8_copy(small, sizeof small, "ab\xE2\x95\x90\xE2\x95\x90");
    cr_expect_str_eq(small, "ab\xE2\x95\x90");

    cr_expect_eq(lis_utf8_cut("ab\xE2\x95", 4), 2);
    cr_expect_eq(lis_utf8_cut("ab\xE2\x95\x90", 5), 5);
    cr_expect_eq(lis_utf8_cut("ab\xF0\x9F\x98", 5), 2);
    cr_expect_eq(lis_utf8_cut("ab\xff", 3), 3);
    cr_expect(!lis_utf8_valid("\xc0\xaf", 2) && lis_utf8_valid("\xf4\x8f\xbf\xbf", 4));
}
