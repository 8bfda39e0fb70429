/* test_batch_task.c - lis batch's data in: task folders and --tasks files
 * (batch/task.c): layouts, prompts, row errors, slicing, streaming. */
#include "testlib.h"
#include "task.h"
#include "agent_internal.h" /* agent_prompt_system/_instance: the prompts as sent */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---------------------------------------------------------- */

static char tmp_root[256];

static void mk_tmp(void) { t_mkdtemp(tmp_root, sizeof tmp_root, "lis-bt"); }
static void rm_tmp(void) { t_rmtree(tmp_root); }

TestSuite(batch_task, .init = mk_tmp, .fini = rm_tmp);

static const char *fixture(const char *name)
{
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s/batch-data/%s", t_src_dir(), name);
    return buf;
}

static const char *tpath(const char *name) { return t_under(tmp_root, name); }

static int one_line(const char *s) { return *s && !strchr(s, '\n'); }

static batch_task_opts dir_opts(const char *dir)
{
    return (batch_task_opts){.task_dir = dir, .start_id = -1, .end_id = -1};
}

static batch_task_opts file_opts(const char *file)
{
    return (batch_task_opts){.tasks_file = file, .start_id = -1, .end_id = -1};
}

/* Loads and expects a failure whose one-line message holds every needle. */
static void load_fails(batch_task_opts o, const char *n1, const char *n2)
{
    batch_task t;
    lis_error err = {0};
    cr_assert_eq(batch_task_load(&o, &t, &err), -1, "the load should have failed");
    cr_assert(one_line(err.msg), "not one line: %s", err.msg);
    cr_assert(strstr(err.msg, n1), "'%s' not in: %s", n1, err.msg);
    if (n2)
        cr_assert(strstr(err.msg, n2), "'%s' not in: %s", n2, err.msg);
}

static void load_ok(batch_task_opts o, batch_task *t)
{
    lis_error err = {0};
    cr_assert_eq(batch_task_load(&o, t, &err), 0, "%s", err.msg);
}

static const batch_row *row_by_id(const batch_task *t, const char *id)
{
    for (size_t i = 0; i < t->nrows; i++)
        if (!strcmp(t->rows[i].id, id))
            return &t->rows[i];
    cr_assert_fail("no row %s", id);
    return NULL;
}

/* ---- task folders ----------------------------------------------------- */

Test(batch_task, original_layout_with_prompts_and_dirs)
{
    batch_task t;
    load_ok(dir_opts(fixture("demo")), &t);
    cr_assert_str_eq(t.name, "demo");
    cr_assert_eq(t.nrows, 4);
    cr_assert_eq(t.total_rows, 4);
    cr_assert(strstr(t.data_path, "demo/data.json"));
    cr_assert(t.reward_py && strstr(t.reward_py, "demo/reward.py"));
    cr_assert_null(t.judge_py);
    cr_assert_null(t.vanilla_prompt_py);
    /* config.yaml's dirs are honoured (the original would use /testbed/documents) */
    cr_assert_str_eq(t.prompts.working_dir, "/testbed");
    cr_assert_str_eq(t.prompts.input_dir, "/testbed/input");
    cr_assert_str_eq(t.prompts.output_dir, "/testbed/output");
    cr_assert(strstr(t.prompts.system_prompt, "You solve small tasks."));
    char *inst = agent_prompt_instance(&t.prompts, t.rows[0].problem_statement);
    cr_assert(strstr(inst, "<problem>\nWhat is 2 + 3?\n</problem>"), "%s", inst);
    cr_assert(strstr(inst, "/testbed/output/answer.txt"), "%s", inst);
    free(inst);
    char *sys = agent_prompt_system(&t.prompts);
    cr_assert(strstr(sys, "Inputs: /testbed/input"), "%s", sys);
    free(sys);

    const batch_row *r1 = row_by_id(&t, "demo_001");
    cr_assert_str_eq(r1->error, "");
    cr_assert_null(r1->input_files, "an empty input_files object means none");
    cr_assert_str_eq(cJSON_GetStringValue(r1->ground_truth), "5");
    const batch_row *r2 = row_by_id(&t, "demo_002");
    cr_assert_str_eq(r2->error, "");
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(r2->input_files, "numbers.txt")),
                     "1\n2\n3\n4\n5\n");
    /* input_files as a JSON string (as HuggingFace stores it), with a subdir */
    const batch_row *r3 = row_by_id(&t, "demo_003");
    cr_assert_str_eq(r3->error, "");
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(r3->input_files, "notes/a.txt")),
                     "x\ny\n");
    cr_assert_eq(r3->ground_truth->valuedouble, 2);
    /* everything else stays in the row for the scorer */
    const batch_row *r4 = row_by_id(&t, "demo_004");
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(r4->json, "qa_type")), "mcq");
    cr_assert(cJSON_IsArray(r4->ground_truth));
    cr_assert_null(r4->input_files);
    batch_task_free(&t);
}

Test(batch_task, legacy_prompt_config_and_original_data_path)
{
    batch_task t;
    load_ok(dir_opts(fixture("legacy")), &t);
    cr_assert_str_eq(t.name, "legacy");
    cr_assert_eq(t.nrows, 2, "the blank line is no row");
    cr_assert_str_eq(t.prompts.system_prompt, "Legacy system prompt in {working_dir}");
    cr_assert_str_eq(t.prompts.instance_prompt, "Legacy: {problem_statement}");
    cr_assert_str_eq(t.prompts.working_dir, "/work");
    cr_assert_str_eq(t.prompts.input_dir, "/work/in");
    cr_assert_str_eq(t.prompts.output_dir, "/work/out");
    cr_assert(t.judge_py && strstr(t.judge_py, "legacy/judge.py"));
    /* number ids become text, as the original's f"{problem_id}.txt" */
    cr_assert_str_eq(t.rows[0].id, "1");
    cr_assert_str_eq(t.rows[1].id, "2");
    cr_assert(cJSON_IsObject(cJSON_GetObjectItem(t.rows[1].json, "extra")));
    batch_task_free(&t);
}

Test(batch_task, defaults_and_data_file_list)
{
    batch_task t;
    load_ok(dir_opts(fixture("plain")), &t);
    cr_assert_eq(t.nrows, 3);
    cr_assert_str_eq(t.rows[0].id, "p1");
    cr_assert_str_eq(t.rows[2].id, "p3", "the second file (a JSON array) follows the first");
    cr_assert(strstr(t.data_path, "part1.jsonl") && strstr(t.data_path, "part2.json"));
    agent_prompts def;
    cr_assert_eq(agent_prompts_default(&def), 0);
    cr_assert_str_eq(t.prompts.system_prompt, def.system_prompt);
    cr_assert_str_eq(t.prompts.instance_prompt, def.instance_prompt);
    agent_prompts_free(&def);
    /* a task folder's defaults are the original's runner's */
    cr_assert_str_eq(t.prompts.working_dir, "/testbed");
    cr_assert_str_eq(t.prompts.input_dir, "/testbed/documents");
    cr_assert_str_eq(t.prompts.output_dir, "/testbed");
    batch_task_free(&t);
}

Test(batch_task, prompt_config_flag_overrides_the_folder)
{
    t_put(tpath("p.yaml"), "instance_prompt: \"Only: {problem_statement}\"\noutput_dir: /out\n");
    batch_task_opts o = dir_opts(fixture("demo"));
    o.prompt_config = tpath("p.yaml");
    batch_task t;
    load_ok(o, &t);
    cr_assert(strstr(t.prompts.system_prompt, "You solve small tasks."), "kept");
    cr_assert_str_eq(t.prompts.instance_prompt, "Only: {problem_statement}");
    cr_assert_str_eq(t.prompts.output_dir, "/out");
    cr_assert_str_eq(t.prompts.input_dir, "/testbed/input");
    batch_task_free(&t);
}

Test(batch_task, tasks_file_jsonl_and_array_detected_by_content)
{
    /* JSONL named .json, with a BOM; a JSON array named .jsonl */
    t_put(tpath("rows.json"), "\xEF\xBB\xBF{\"id\":\"a\",\"problem_statement\":\"pa\"}\r\n"
                              "{\"id\":\"b\",\"problem_statement\":\"pb\"}\n");
    t_put(tpath("arr.jsonl"), "  \n [ {\"id\":\"x\",\"problem_statement\":\"px\"},\n"
                              "{\"id\":\"y\",\"problem_statement\":\"py\"} ]\n");
    t_put(tpath("p.yaml"), "system_prompt: S\ninstance_prompt: I {problem_statement}\n");
    batch_task t;
    batch_task_opts o = file_opts(tpath("rows.json"));
    o.prompt_config = tpath("p.yaml");
    load_ok(o, &t);
    cr_assert_str_eq(t.name, "rows");
    cr_assert_null(t.dir);
    cr_assert_null(t.reward_py);
    cr_assert_eq(t.nrows, 2);
    cr_assert_str_eq(t.rows[1].problem_statement, "pb");
    cr_assert_str_eq(t.prompts.system_prompt, "S");
    cr_assert_str_eq(t.prompts.instance_prompt, "I {problem_statement}");
    /* not a task folder: lis run's dirs */
    cr_assert_str_eq(t.prompts.input_dir, "/testbed/input");
    batch_task_free(&t);

    load_ok(file_opts(tpath("arr.jsonl")), &t);
    cr_assert_str_eq(t.name, "arr");
    cr_assert_eq(t.nrows, 2);
    cr_assert_str_eq(t.rows[0].id, "x");
    cr_assert_str_eq(t.rows[1].id, "y");
    agent_prompts def;
    agent_prompts_default(&def);
    cr_assert_str_eq(t.prompts.system_prompt, def.system_prompt);
    agent_prompts_free(&def);
    batch_task_free(&t);
}

Test(batch_task, bad_rows_are_row_errors_not_load_failures)
{
    t_put(tpath("d.jsonl"),
          "{\"id\":\"ok\",\"problem_statement\":\"p\",\"input_files\":{\"a/b.txt\":\"x\"}}\n"
          "{\"id\":\"badjson\",\"problem_statement\":\"p\",\"input_files\":\"{not json\"}\n"
          "{\"id\":\"up\",\"problem_statement\":\"p\",\"input_files\":{\"../x\":\"x\"}}\n"
          "{\"id\":\"abs\",\"problem_statement\":\"p\",\"input_files\":\"{\\\"/etc/x\\\":\\\"x\\\"}\"}\n"
          "{\"id\":\"mid\",\"problem_statement\":\"p\",\"input_files\":{\"a/../../x\":\"x\"}}\n"
          "{\"id\":\"num\",\"problem_statement\":\"p\",\"input_files\":{\"n.txt\":5}}\n"
          "{\"id\":\"arr\",\"problem_statement\":\"p\",\"input_files\":[\"x\"]}\n"
          "{\"id\":\"nops\",\"ground_truth\":\"g\"}\n"
          "{\"id\":\"emptystr\",\"problem_statement\":\"p\",\"input_files\":\"\"}\n"
          "{\"id\":\"nullc\",\"problem_statement\":\"p\",\"input_files\":{\"n.txt\":null}}\n"
          "{\"id\":\"trail\",\"problem_statement\":\"p\",\"input_files\":\"{} x\"}\n");
    batch_task t;
    load_ok(file_opts(tpath("d.jsonl")), &t);
    cr_assert_eq(t.nrows, 11);
    cr_assert_str_eq(row_by_id(&t, "ok")->error, "");
    static const struct {
        const char *id, *needle;
    } bad[] = {
        {"badjson", "not valid JSON"},
        {"up", "leaves the input directory"},
        {"abs", "leaves the input directory"},
        {"mid", "leaves the input directory"},
        {"num", "must be text"},
        {"arr", "must be an object"},
        {"nops", "problem_statement"},
        {"trail", "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const batch_row *r = row_by_id(&t, bad[i].id);
        cr_assert(strstr(r->error, bad[i].needle), "%s: %s", bad[i].id, r->error);
        cr_assert(strstr(r->error, "d.jsonl:"), "names the line: %s", r->error);
    }
    cr_assert(strstr(row_by_id(&t, "badjson")->error, "d.jsonl:2"));
    cr_assert_str_eq(row_by_id(&t, "nops")->problem_statement, "");
    cr_assert_str_eq(row_by_id(&t, "emptystr")->error, "");
    cr_assert_null(row_by_id(&t, "emptystr")->input_files);
    cr_assert_str_eq(row_by_id(&t, "nullc")->error, "",
                     "a null content is skipped, as the "
                     "original");
    batch_task_free(&t);
}

/* A file of rows written as text, and where and why its load fails. */
static const struct broken {
    const char *file, *text, *where, *why;
} BROKEN[] = {
    {"a.jsonl", "{\"id\":\"a\",\"problem_statement\":\"p\"}\n\n{\"id\": \"b\",\n",
     "a.jsonl:3:", "not valid JSON"},
    {"b.jsonl", "{\"id\":\"a\"}\n[1]\n", "b.jsonl:2:", "must be a JSON object"},
    {"c.json", "[\n{\"id\":\"a\"},\n{\"id\":true}\n]", "c.json:3:", "id must be"},
    {"p.json", "[\n  {\n    \"id\": \"a\"\n  },\n  {\n    \"id\": \"b\",\n    \"x\": tru\n  }\n]\n",
     "p.json:7:", "not valid JSON"},
    {"d.json", "[\n{\"id\":\"a\"}\n{\"id\":\"b\"}\n]", "d.json:3:", "expected ','"},
    {"e.json", "[{\"id\":\"a\"}", "e.json:1:", "not closed"},
    {"f.json", "[{\"id\":\"a\"}] x", "f.json:1:", "after the closing"},
    {"g.jsonl", "{\"id\":\"a\"} {\"id\":\"b\"}\n", "g.jsonl:1:", "more than one"},
    {"empty.jsonl", "\n\n", "empty.jsonl", "no rows"},
    {"h.jsonl", "{\"id\":\"\"}\n", "h.jsonl:1:", "non-empty"},
};

Test(batch_task, broken_files_fail_with_file_and_line)
{
    for (size_t i = 0; i < sizeof BROKEN / sizeof BROKEN[0]; i++) {
        t_put(tpath(BROKEN[i].file), BROKEN[i].text);
        load_fails(file_opts(tpath(BROKEN[i].file)), BROKEN[i].where, BROKEN[i].why);
    }
    strbuf longid = {0};
    strbuf_puts(&longid, "{\"id\":\"");
    for (int i = 0; i < BATCH_ID_MAX; i++)
        strbuf_putc(&longid, 'x');
    strbuf_puts(&longid, "\"}\n");
    t_put(tpath("long.jsonl"), longid.s);
    strbuf_release(&longid);
    load_fails(file_opts(tpath("long.jsonl")), "long.jsonl:1:", "id longer than");
    load_fails(file_opts(tpath("missing.jsonl")), "missing.jsonl", "No such file");

    batch_task_opts both = dir_opts(fixture("demo"));
    both.tasks_file = tpath("a.jsonl");
    load_fails(both, "not both", NULL);
    load_fails((batch_task_opts){.start_id = -1, .end_id = -1}, "--task DIR", "--tasks FILE");
    load_fails(dir_opts(tmp_root), "no config.yaml", "data_files");
    mkdir(tpath("t1"), 0755);
    t_put(tpath("t1/config.yaml"), "dataset: json\nsystem_prompt: x\n");
    load_fails(dir_opts(tpath("t1")), "config.yaml: no data_files", NULL);
    t_put(tpath("t1/config.yaml"), "dataset: json\ndata_files: nothere.json\n");
    load_fails(dir_opts(tpath("t1")), "nothere.json", "data_files");
    t_put(tpath("t1/config.yaml"), "dataset: json\ndata_files: [a.json\n");
    load_fails(dir_opts(tpath("t1")), "config.yaml", "YAML");
    t_put(tpath("t1/config.yaml"), "dataset: json\ndata_files: d.jsonl\nsystem_prompt: [1, 2]\n");
    t_put(tpath("t1/d.jsonl"), "{\"id\":1,\"problem_statement\":\"p\"}\n");
    load_fails(dir_opts(tpath("t1")), "system_prompt must be text", NULL);
    t_put(tpath("t1/config.yaml"), "dataset: json\ndata_files: d.jsonl\nprompt_config: no.yaml\n");
    load_fails(dir_opts(tpath("t1")), "no.yaml", "cannot be read");
}

Test(batch_task, huggingface_dataset_is_refused_with_the_export)
{
    batch_task_opts o = dir_opts(fixture("hf"));
    load_fails(o, "HuggingFace", "offline");
    load_fails(o,
               "load_dataset('daixuancheng/llm-in-sandbox-bench', 'math', split='test')"
               ".to_json(",
               "dataset: json, data_files: data.jsonl");
}

Test(batch_task, duplicate_ids_name_both_lines)
{
    t_put(tpath("d.jsonl"), "{\"id\":\"a\",\"problem_statement\":\"p\"}\n"
                            "{\"id\":\"b\",\"problem_statement\":\"p\"}\n\n"
                            "{\"id\":\"c\",\"problem_statement\":\"p\"}\n"
                            "{\"id\":\"b\",\"problem_statement\":\"p\"}\n");
    load_fails(file_opts(tpath("d.jsonl")), "d.jsonl:5: duplicate id \"b\"", "d.jsonl:2");
    /* in a pretty-printed array the lines are those of the rows */
    t_put(tpath("d.json"), "[\n  {\n    \"id\": 7,\n    \"problem_statement\": \"p\"\n  },\n"
                           "  {\n    \"id\": \"7\"\n  }\n]\n");
    load_fails(file_opts(tpath("d.json")), "d.json:6: duplicate id \"7\"", "d.json:2");
    /* across data_files */
    mkdir(tpath("t"), 0755);
    t_put(tpath("t/config.yaml"), "dataset: json\ndata_files: [x.jsonl, y.jsonl]\n");
    t_put(tpath("t/x.jsonl"), "{\"id\":\"q\",\"problem_statement\":\"p\"}\n");
    t_put(tpath("t/y.jsonl"), "{\"id\":\"r\",\"problem_statement\":\"p\"}\n"
                              "{\"id\":\"q\",\"problem_statement\":\"p\"}\n");
    load_fails(dir_opts(tpath("t")), "y.jsonl:2: duplicate id \"q\"", "x.jsonl:1");
}

Test(batch_task, missing_ids_are_positions_and_numbers_are_text)
{
    t_put(tpath("d.jsonl"), "{\"problem_statement\":\"p0\"}\n"
                            "{\"id\":null,\"problem_statement\":\"p1\"}\n"
                            "{\"id\":1.5,\"problem_statement\":\"p2\"}\n"
                            "{\"id\":1234567,\"problem_statement\":\"p3\"}\n"
                            "{\"id\":-3,\"problem_statement\":\"p4\"}\n");
    batch_task t;
    load_ok(file_opts(tpath("d.jsonl")), &t);
    cr_assert_str_eq(t.rows[0].id, "0");
    cr_assert_str_eq(t.rows[1].id, "1");
    cr_assert_str_eq(t.rows[2].id, "1.5");
    cr_assert_str_eq(t.rows[3].id, "1234567");
    cr_assert_str_eq(t.rows[4].id, "-3");
    batch_task_free(&t);
    /* a missing id that collides with a given one is a duplicate */
    t_put(tpath("e.jsonl"), "{\"id\":\"1\",\"problem_statement\":\"p\"}\n"
                            "{\"problem_statement\":\"p\"}\n");
    load_fails(file_opts(tpath("e.jsonl")), "e.jsonl:2: duplicate id \"1\"", "e.jsonl:1");
}

Test(batch_task, start_end_slicing_as_python)
{
    strbuf b = {0};
    for (int i = 0; i < 10; i++)
        strbuf_printf(&b, "{\"id\":\"r%d\",\"problem_statement\":\"p\"}\n", i);
    t_put(tpath("d.jsonl"), b.s);
    strbuf_release(&b);
    /* start, start given, end, end given -> Python's list(range(10))[start:end] */
    static const struct {
        long s;
        int ss;
        long e;
        int es;
        int lo, n;
    } cases[] = {
        {-1, 0, -1, 0, 0, 10},  {2, 1, 5, 1, 2, 3},    {3, 1, -1, 0, 3, 7},  {-1, 0, 4, 1, 0, 4},
        {-3, 1, -1, 0, 7, 3},   {-1, 1, -1, 0, 9, 1},  {0, 1, -2, 1, 0, 8},  {-1, 1, -1, 1, 9, 0},
        {5, 1, 2, 1, 5, 0},     {20, 1, 30, 1, 10, 0}, {-20, 1, 3, 1, 0, 3}, {3, 1, 100, 1, 3, 7},
        {0, 1, 0, 1, 0, 10},                        /* the original's `end_id or len(problems)` */
        {-15, 1, -12, 1, 0, 0}, {2, 0, 5, 0, 2, 3}, /* -1 sentinels only: plain values need no _set */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        batch_task_opts o = file_opts(tpath("d.jsonl"));
        o.start_id = cases[i].s, o.start_set = cases[i].ss;
        o.end_id = cases[i].e, o.end_set = cases[i].es;
        batch_task t;
        load_ok(o, &t);
        cr_assert_eq(t.total_rows, 10);
        cr_assert_eq(t.nrows, (size_t)cases[i].n, "case %zu: %zu rows", i, t.nrows);
        if (cases[i].n) {
            char want[16];
            snprintf(want, sizeof want, "r%d", cases[i].lo);
            cr_assert_str_eq(t.rows[0].id, want, "case %zu", i);
            snprintf(want, sizeof want, "r%d", cases[i].lo + cases[i].n - 1);
            cr_assert_str_eq(t.rows[t.nrows - 1].id, want, "case %zu", i);
        }
        batch_task_free(&t);
    }
}

Test(batch_task, hundred_thousand_rows_stream)
{
    FILE *f = fopen(tpath("big.jsonl"), "w");
    cr_assert_not_null(f);
    for (int i = 0; i < 100000; i++)
        fprintf(f,
                "{\"id\":\"row-%06d\",\"problem_statement\":\"What is %d+1?\","
                "\"ground_truth\":\"%d\",\"domain\":\"math\"}\n",
                i, i, i + 1);
    fclose(f);
    batch_task_opts o = file_opts(tpath("big.jsonl"));
    o.start_id = 99990;
    batch_task t;
    load_ok(o, &t);
    cr_assert_eq(t.total_rows, 100000);
    cr_assert_eq(t.nrows, 10);
    cr_assert_str_eq(t.rows[0].id, "row-099990");
    cr_assert_str_eq(cJSON_GetStringValue(t.rows[9].ground_truth), "100000");
    batch_task_free(&t);
}
