/* test_batch_report.c - `lis report DIR` (batch/report*.c) opened in a real
 * browser: a small lis batch made against the scripted server (one episode
 * writing a PNG, a WAV, an HTML page and code; one hostile episode; one
 * plain one), then headless Chromium (Debian's chromium, as the test user)
 * loads report.html from file:// and the test reads the DOM it dumps after
 * the page's JS ran, and what the page logged to the console. The page
 * itself writes every JS error, failed load and alert() into #lis-errors.
 * A missing chromium fails the suite: CI installs it (scripts/deps.sh). */
#include "testlib.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void setup(void) { lis_ctx_free(t_ctx()); }
TestSuite(report, .init = setup);

/* 37x23 pixels, and 400 samples of 8 kHz 8-bit mono: what the model "made" */
#define PNG_B64                                                                                    \
    "iVBORw0KGgoAAAANSUhEUgAAACUAAAAXCAIAAAADThHyAAAANklEQVR42mPQiDoBRyc0NOCIRuIMo/ZR1z462IEs"     \
    "Pmofle0bzQ+j+W80P4zmv1H7RvPfILAPAG4I9lxE7DtaAAAAAElFTkSuQmCC"
#define WAV_B64                                                                                    \
    "UklGRrQBAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YZABAACAob/W4uLXwqSDYUIrHhwmO1h5m7rS"     \
    "4OPaxqqJZ0cvHxwkN1JzlbXP3+Pcy7CPbU0yIRwhMk1tj7DL3OPfz7WVc1I3JBwfL0dniarG2uPg0rqbeVg7Jhwe"     \
    "K0Jhg6TC1+Li1r+hf15AKR0dKD1bfJ691OHj2cSnhmRFLR8cJTlVdpi40ODj28itjGpKMCAcIzRPcJKyzd7k3s2y"     \
    "knBPNCMcIDBKaoytyNvj4NC4mHZVOSUcHy1FZIanxNnj4dS9nnxbPSgdHSlAXoChv9bi4tfCpINhQiseHCY7WHmb"     \
    "utLg49rGqolnRy8fHCQ3UnOVtc/f49zLsI9tTTIhHCEyTW2PsMvc49/PtZVzUjckHB8vR2eJqsba4+DSupt5WDsm"     \
    "HB4rQmGDpMLX4uLWv6GAXkApHR0oPVt8nr3U4ePZxKeGZEUtHxwlOVV2mLjQ4OPbyK2MakowIBwjNE9wkrLN3uTe"     \
    "zbKScE80IxwgMEpqjK3I2+Pg0LiYdlU5JRwfLUVkhqfE2ePh1L2efFs9KB0dKUBe"

#define HOSTILE_ID "evil\"><img src=x onerror=alert(2)>"
#define HOSTILE_FILE "<img src=x onerror=alert(1)>.html"
/* what a script injected by any of the payloads would write; the payloads
 * spell it in two halves, so it is in the DOM only if one of them ran */
#define PWN "PWN\"+\"ED"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    cr_assert(s);
    size_t got = fread(s, 1, (size_t)n, f);
    fclose(f);
    s[got] = 0;
    if (len)
        *len = got;
    return s;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static void need_chromium(void)
{
    int code = 0;
    free(t_host(&code, "command -v chromium"));
    cr_assert_eq(code, 0,
                 "chromium is not installed: this suite opens the report in headless "
                 "Chromium (apt-get install chromium; scripts/deps.sh installs it)");
}

/* Chromium's console lines (INFO:CONSOLE) of the last browse(). */
static char console[65536];

/* report.html#HASH in headless Chromium; returns the DOM after the page's JS ran. */
static char *browse(const char *html, const char *hash)
{
    char err[600], *dom;
    snprintf(err, sizeof err, "%s/chromium-stderr.txt", t_tmpdir());
    int code = 0;
    dom = t_host(&code,
                 "HOME=%s XDG_CONFIG_HOME=%s/.config XDG_CACHE_HOME=%s/.cache timeout 120 "
                 "chromium --headless --no-sandbox --disable-gpu --no-first-run "
                 "--user-data-dir=%s/chromium --virtual-time-budget=10000 --enable-logging=stderr "
                 "--v=0 --dump-dom 'file://%s%s' 2>%s",
                 t_tmpdir(), t_tmpdir(), t_tmpdir(), t_tmpdir(), html, hash, err);
    cr_assert_eq(code, 0, "chromium failed (exit %d) on %s%s", code, html, hash);
    char *o = t_host(NULL, "grep -a 'INFO:CONSOLE' %s", err);
    snprintf(console, sizeof console, "%s", o);
    free(o);
    cr_assert(strstr(dom, "data-ready=\"1\""), "the page did not finish rendering %s: %s", hash,
              dom);
    cr_expect(strstr(dom, "<pre id=\"lis-errors\"></pre>"), "the page logged errors on %s: %s",
              hash, strstr(dom, "lis-errors") ? strstr(dom, "lis-errors") : dom);
    return dom;
}

/* Every console line is a blocked script of a sandboxed frame; returns how many. */
static int only_blocked_scripts(void)
{
    int n = 0;
    char *save = NULL;
    for (char *l = strtok_r(console, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        cr_expect(strstr(l, "Blocked script execution"), "a console message: %s", l);
        n++;
    }
    return n;
}

static void screenshot(const char *html, const char *hash, const char *png)
{
    int code = 0;
    char *o = t_host(&code,
                     "HOME=%s timeout 120 chromium --headless --no-sandbox --disable-gpu "
                     "--no-first-run --user-data-dir=%s/chromium --virtual-time-budget=10000 "
                     "--window-size=1280,900 --screenshot=%s 'file://%s%s' 2>/dev/null",
                     t_tmpdir(), t_tmpdir(), png, html, hash);
    free(o);
    size_t len = 0;
    char *s = slurp(png, &len);
    cr_assert(s && len > 1000 && !memcmp(s, "\x89PNG", 4), "no screenshot at %s (exit %d)", png,
              code);
    free(s);
    fprintf(stderr, "test_batch_report: screenshot of the report: %s\n", png);
}

/* The episode number of the table row whose data-id attribute is attr. */
static int ep_of(const char *dom, const char *attr)
{
    char pat[300];
    snprintf(pat, sizeof pat, "data-id=\"%s\"", attr);
    const char *p = strstr(dom, pat);
    cr_assert(p, "no table row %s", pat);
    const char *q = p;
    while (q > dom && strncmp(q, "data-ep=\"", 9))
        q--;
    cr_assert(q > dom);
    return atoi(q + 9);
}

static cJSON *entry(const char *content, const char *tool, const char *command)
{
    cJSON *e = cJSON_CreateObject(), *calls = cJSON_AddArrayToObject(e, "calls");
    if (content)
        cJSON_AddStringToObject(e, "content", content);
    cJSON *call = cJSON_CreateArray(), *args = cJSON_CreateObject();
    cJSON_AddItemToArray(call, cJSON_CreateString(tool));
    if (command)
        cJSON_AddStringToObject(args, "command", command);
    cJSON_AddItemToArray(call, args);
    cJSON_AddItemToArray(calls, call);
    cJSON *u = cJSON_AddArrayToObject(e, "usage");
    cJSON_AddItemToArray(u, cJSON_CreateNumber(120));
    cJSON_AddItemToArray(u, cJSON_CreateNumber(30));
    return e;
}

/* The scripted replies of the three rows, by the marker in their problem. */
static char *script(void)
{
    cJSON *s = cJSON_CreateObject(), *rows = cJSON_AddObjectToObject(s, "rows");
    cJSON *m = cJSON_AddArrayToObject(rows, "MARKMEDIA");
    cJSON_AddItemToArray(
        m, entry("I will make a picture, a sound, a page and code.", "execute_bash",
                 "cd /testbed/output && echo " PNG_B64 " | base64 -d > pic.png && echo " WAV_B64
                 " | base64 -d > tone.wav && printf '<h1>made by the model</h1>\\n' > page.html "
                 "&& printf 'def f():\\n    return 42\\n' > code.py && echo 42 > answer.txt"));
    cJSON_AddItemToArray(m,
                         entry("A long output, cut in the middle.", "execute_bash", "seq 1 200"));
    cJSON_AddItemToArray(m, entry(NULL, "submit", NULL));
    cJSON *h = cJSON_AddArrayToObject(rows, "MARKEVIL");
    cJSON_AddItemToArray(
        h, entry("</script><script>document.title=\"" PWN "\"</script>", "execute_bash",
                 "printf '<p>hi</p><script>parent.document.title=\"" PWN "\"</script>' > "
                 "'/testbed/output/" HOSTILE_FILE "'; echo '</script><script>document.title=\"" PWN
                 "\"</script><img src=x onerror=alert(3)>'; echo 1 > /testbed/output/answer.txt"));
    cJSON_AddItemToArray(h, entry(NULL, "submit", NULL));
    cJSON *p = cJSON_AddArrayToObject(rows, "MARKPLAIN");
    cJSON_AddItemToArray(p, entry(NULL, "execute_bash",
                                  "echo 7 > /testbed/output/answer.txt; "
                                  "exit 3"));
    cJSON_AddItemToArray(p, entry(NULL, "submit", NULL));
    char *text = cJSON_PrintUnformatted(s);
    cJSON_Delete(s);
    return text;
}

static int steps_in(const char *rdir, const char *key)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/trajectories/%s.json", rdir, key);
    char *t = slurp(p, NULL);
    cr_assert(t, "%s", p);
    cJSON *j = cJSON_Parse(t);
    free(t);
    int n = cJSON_GetArraySize(cJSON_GetObjectItem(j, "steps"));
    cJSON_Delete(j);
    return n;
}

Test(report, batch_media_hostile_in_chromium, .timeout = 400)
{
    need_chromium();
    char d[600], tasks[700], html[1200];
    snprintf(d, sizeof d, "%s/report-batch", t_tmpdir());
    mkdir(d, 0755);
    snprintf(tasks, sizeof tasks, "%s/tasks.jsonl", d);
    cJSON *rows[3] = {cJSON_CreateObject(), cJSON_CreateObject(), cJSON_CreateObject()};
    const char *ids[] = {"media", HOSTILE_ID, "plain"},
               *marks[] = {"MARKMEDIA", "MARKEVIL", "MARKPLAIN"};
    const char *truth[] = {"42", "1", "42"};
    FILE *tf = fopen(tasks, "w");
    cr_assert(tf);
    for (int i = 0; i < 3; i++) {
        cJSON_AddStringToObject(rows[i], "id", ids[i]);
        cJSON_AddStringToObject(rows[i], "problem_statement", marks[i]);
        cJSON_AddStringToObject(rows[i], "ground_truth", truth[i]);
        char *line = cJSON_PrintUnformatted(rows[i]);
        fprintf(tf, "%s\n", line);
        free(line);
        cJSON_Delete(rows[i]);
    }
    fclose(tf);
    char *sc = script();
    t_fake f;
    t_fake_start(&f, sc);
    free(sc);
    int code = 0;
    char *out = t_lis(&code,
                      "batch --llm-name fake --llm-base-url %s --api-key k --rootfs %s "
                      "--net none --effects --tasks %s --scorer builtin:match --save-files "
                      "--concurrency 3 "
                      "--output-dir %s/out",
                      f.url, t_busybox(), tasks, d);
    t_fake_stop(&f);
    cr_assert_eq(code, 0, "%s", out);
    char *o = t_host(NULL, "ls -d %s/out/*/ | head -1 | tr -d '\\n'", d);
    char rdir[1000];
    snprintf(rdir, sizeof rdir, "%.*s", (int)strlen(o) - 1, o); /* without the last '/' */
    free(o);
    snprintf(html, sizeof html, "%s/report.html", rdir);
    char said[1300];
    snprintf(said, sizeof said, "lis: report: %s", html);
    cr_assert(strstr(out, said), "lis batch did not write the report: %s", out);
    free(out);

    /* the index: every episode, no error, no console message at all */
    char *dom = browse(html, "");
    only_blocked_scripts();
    cr_expect(!console[0], "console: %s", console);
    cr_expect_eq(count(dom, "<tr class=\"ep\""), 3, "%s", dom);
    cr_expect(strstr(dom, "<span id=\"shown\">3</span>"));
    cr_expect(strstr(dom, "<span id=\"total\">3</span>"));
    cr_expect(strstr(dom, "data-id=\"media\""));
    cr_expect(strstr(dom, "data-id=\"plain\""));
    cr_expect(strstr(dom, "evil\"&gt;&lt;img src=x onerror=alert(2)&gt;</td>"),
              "the hostile id is not shown as text: %s", dom);
    cr_expect(strstr(dom, "id=\"mem-chart\"") && strstr(dom, "id=\"time-chart\""));
    /* effects (--effects): the capability chart, the capability and alert columns */
    cr_expect(strstr(dom, "id=\"cap-chart\""), "no capability chart: %s", dom);
    cr_expect(strstr(dom, ">comp</th>") && strstr(dom, ">alerts</th>"), "%s", dom);
    cr_expect(!strstr(dom, "PWNED"), "a payload ran: %s", dom);
    int media = ep_of(dom, "media"), plain = ep_of(dom, "plain");
    int evil = 3 - media - plain; /* the episodes are 0, 1, 2 */
    free(dom);

    /* filters from the address: words, a field, a number */
    dom = browse(html, "#filter=media");
    cr_expect_eq(count(dom, "<tr class=\"ep\""), 1, "%s", dom);
    cr_expect(strstr(dom, "data-id=\"media\"") && strstr(dom, "<span id=\"shown\">1</span>"));
    free(dom);
    dom = browse(html, "#filter=score%3C1");
    cr_expect_eq(count(dom, "<tr class=\"ep\""), 1, "%s", dom);
    cr_expect(strstr(dom, "data-id=\"plain\""), "%s", dom);
    free(dom);
    dom = browse(html, "#filter=reason%3Dsubmitted%20-media");
    cr_expect_eq(count(dom, "<tr class=\"ep\""), 2, "%s", dom);
    cr_expect(!strstr(dom, "data-id=\"media\""), "%s", dom);
    free(dom);

    /* the media episode: every step, the cut, each file rendered by its type */
    char hash[64];
    snprintf(hash, sizeof hash, "#ep=%d", media);
    dom = browse(html, hash);
    int n = steps_in(rdir, "media");
    cr_expect_eq(n, 3);
    cr_expect_eq(count(dom, "<div class=\"step\""), n, "%s", dom);
    cr_expect(strstr(dom, "<span class=\"cutmark\">&lt;Observation truncated in middle for "
                          "saving context&gt;</span>"),
              "the 40+40 cut is not marked: %s", dom);
    cr_expect(strstr(dom, "\n40\n<span") && strstr(dom, "</span>161\n") && !strstr(dom, "\n100\n"),
              "not the first and last 40 lines");
    /* (lis batch --save-files keeps the output dir itself: files/ID/output/...) */
    cr_expect(strstr(dom, "pic.png\" data-natural=\"37x23\" data-shown=\"37x23\""),
              "the image is not at its natural size: %s", dom);
    cr_expect(strstr(dom, "<audio controls=\"\" preload=\"metadata\" src=\"files/media/"), "%s",
              dom);
    cr_expect(strstr(dom, "tone.wav\"></audio>"));
    cr_expect(strstr(dom, "<iframe class=\"html\" sandbox=\"\""), "%s", dom);
    cr_expect(strstr(dom, "page.html\"></iframe>"));
    cr_expect(strstr(dom, "<td class=\"ln\">2</td><td>    return 42</td>"),
              "code without line numbers: %s", dom);
    cr_expect(strstr(dom, "<span class=\"exit\">exit 0</span>"));
    /* each step's effects: what it did, its capability */
    cr_expect_eq(count(dom, "<div class=\"fx\""), n, "%s", dom);
    cr_expect(strstr(dom, "created /testbed/output/pic.png"), "the step's files: %s", dom);
    cr_expect(strstr(dom, "<span class=\"cap file\""), "%s", dom);
    cr_expect(!console[0], "console: %s", console);
    free(dom);
    char png[1300];
    snprintf(png, sizeof png, "%s/screenshot-episode.png", rdir);
    screenshot(html, hash, png);
    snprintf(hash, sizeof hash, "#ep=%d&at=files", media);
    snprintf(png, sizeof png, "%s/screenshot-files.png", rdir);
    screenshot(html, hash, png);
    snprintf(png, sizeof png, "%s/screenshot-index.png", rdir);
    screenshot(html, "", png);

    /* the hostile episode: its text shown as text, its page framed without
     * scripts (Chromium says it blocked them), and nothing of it ran */
    snprintf(hash, sizeof hash, "#ep=%d", evil);
    dom = browse(html, hash);
    cr_expect(!strstr(dom, "PWNED"), "a payload ran: %s", dom);
    cr_expect(strstr(dom, "&lt;/script&gt;&lt;script&gt;document.title=\"PWN\"+\"ED\""
                          "&lt;/script&gt;&lt;img src=x onerror=alert(3)&gt;"),
              "the observation is not shown as text: %s", dom);
    cr_expect(strstr(dom, "&lt;img src=x onerror=alert(1)&gt;.html</a>"),
              "the file name is not shown as text: %s", dom);
    cr_expect(strstr(dom, "created /testbed/output/&lt;img src=x onerror=alert(1)&gt;.html"),
              "the hostile file in the step's effects is not shown as text: %s", dom);
    cr_expect(strstr(dom, "sandbox=\"\""));
    cr_expect(strstr(dom, "%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E.html"),
              "the file's link is not URL-encoded: %s", dom);
    cr_expect(count(dom, "<img") == 0, "an <img> element from the data: %s", dom);
    char c2[sizeof console];
    snprintf(c2, sizeof c2, "%s", console);
    cr_expect(only_blocked_scripts() >= 1, "no blocked script reported");
    cr_expect(strstr(c2, "onerror%3Dalert(1)%3E.html"),
              "the hostile page's script was not "
              "blocked by the sandbox: %s",
              c2);
    free(dom);

    /* the plain one: its exit code */
    snprintf(hash, sizeof hash, "#ep=%d", plain);
    dom = browse(html, hash);
    cr_expect(strstr(dom, "<span class=\"exit bad\">exit 3</span>"), "%s", dom);
    cr_expect_eq(count(dom, "<div class=\"step\""), steps_in(rdir, "plain"));
    free(dom);
}

/* lis run says how to make its report; the page opens on its one episode */
/* The index JSON inside a report.html's text (cut off in place). */
static char *index_text(char *html)
{
    cr_assert(html);
    const char *open = "<script id=\"lis-index\" type=\"application/json\">";
    char *a = strstr(html, open);
    cr_assert(a);
    a += strlen(open);
    char *b = strstr(a, "</script>");
    cr_assert(b);
    *b = 0;
    return a;
}

Test(report, lis_run_prints_the_command, .timeout = 200)
{
    need_chromium();
    t_fake f;
    t_fake_start(&f, "{\"replies\":[{\"calls\":[[\"execute_bash\",{\"command\":"
                     "\"echo 42 > /testbed/output/answer.txt; printf 'a,b\\\\n1,2\\\\n' > "
                     "/testbed/output/t.csv\"}]]},{\"calls\":[[\"submit\",{}]]}]}");
    int code = 0;
    char *out = t_lis(&code,
                      "run --llm-name fake --llm-base-url %s --api-key k --rootfs %s "
                      "--net none --query 'make a table' --output-dir %s/runs",
                      f.url, t_busybox(), t_tmpdir());
    t_fake_stop(&f);
    cr_assert_eq(code, 0, "%s", out);
    /* each step's effects in one line, as it ends */
    cr_expect(strstr(out, "lis: step 1 did: ") && strstr(out, "created /testbed/output/t.csv") &&
                  strstr(out, "no alert"),
              "no effects line: %s", out);
    /* the command as it runs: the lis that ran, `report`, the directory */
    char said[1200];
    snprintf(said, sizeof said, "lis: report: %s report ", t_lis_bin());
    const char *p = strstr(out, said);
    cr_assert(p, "lis run did not print the report command (%s): %s", said, out);
    char dir[1000];
    cr_assert_eq(sscanf(p + strlen(said), "%999s", dir), 1);
    free(out);
    out = t_lis(&code, "report %s", dir);
    cr_assert_eq(code, 0, "%s", out);
    char html[1100];
    snprintf(html, sizeof html, "%s/report.html", dir);
    cr_expect(strstr(out, html), "%s", out);
    free(out);
    /* the run's row as a batch row: submitted (not "submit" in orange), the
     * capability and alerts its effects give (issue 32 item 9) */
    char *page = slurp(html, NULL);
    char *a = index_text(page);
    cJSON *idx = cJSON_Parse(a);
    const cJSON *row0 = cJSON_GetArrayItem(cJSON_GetObjectItem(idx, "rows"), 0);
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(row0, "reason")), "submitted", "%s",
                     a);
    cr_expect(cJSON_IsObject(cJSON_GetObjectItem(row0, "capability")), "no capability: %s", a);
    cr_expect(cJSON_IsNumber(cJSON_GetObjectItem(row0, "alerts")), "no alerts: %s", a);
    /* the image as the user named it (here --rootfs DIR), not the store's blob path */
    const char *img = cJSON_GetStringValue(
        cJSON_GetObjectItem(cJSON_GetObjectItem(idx, "config"), "docker_image"));
    cr_expect(img && !strcmp(img, t_busybox()), "config.docker_image: %s", a);
    cJSON_Delete(idx);
    free(page);
    char *dom = browse(html, "");
    cr_expect(strstr(dom, "<h1 id=\"title\">lis run"), "%s", dom);
    cr_expect(strstr(dom, t_busybox()), "the page does not name the rootfs given: %s", dom);
    cr_expect_eq(count(dom, "<div class=\"step\""), 2, "%s", dom);
    cr_expect(strstr(dom, "<td class=\"ln\">2</td><td>1,2</td>"), "t.csv: %s", dom);
    cr_expect(!console[0], "console: %s", console);
    free(dom);
}

/* No browser needed: what the files hold, and the bad inputs. */
Test(report, escaped_json_stale_files_and_bad_input)
{
    char d[600], p[800];
    snprintf(d, sizeof d, "%s/report-fixture", t_tmpdir());
    char *o =
        t_host(NULL, "mkdir -p %s/trajectories %s/report %s/files/a && cp -r %s/report-data/. %s/",
               d, d, d, t_src_dir(), d);
    free(o);
    /* a stale episode file of an earlier, bigger report */
    snprintf(p, sizeof p, "%s/report/ep-7.js", d);
    t_write_file(p, "lisEpisode(7,{});");
    snprintf(p, sizeof p, "%s/files/a/bin.dat", d);
    FILE *f = fopen(p, "wb");
    cr_assert(f);
    fwrite("\x00\x01\x02\xff", 1, 4, f);
    fclose(f);
    int code = 0;
    char *out = t_lis(&code, "report %s", d);
    cr_assert_eq(code, 0, "%s", out);
    free(out);
    snprintf(p, sizeof p, "%s/report/ep-7.js", d);
    cr_expect(access(p, F_OK) != 0, "a stale episode file stayed");
    /* the index: valid JSON with no '<' and no raw U+2028 anywhere in it */
    snprintf(p, sizeof p, "%s/report.html", d);
    char *html = slurp(p, NULL);
    char *a = index_text(html);
    cr_expect(!strchr(a, '<') && !strstr(a, "\xe2\x80\xa8"), "unescaped text in the index");
    cJSON *idx = cJSON_Parse(a);
    cr_assert(idx, "the index is not JSON: %s", a);
    cJSON *rows = cJSON_GetObjectItem(idx, "rows");
    cr_expect_eq(cJSON_GetArraySize(rows), 2, "the torn last line counts: %s", a);
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 0), "id")),
                     "</script><b>");
    cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 1), "score")),
                 0.5, "the judge's score replaces the row's");
    cJSON_Delete(idx);
    free(html);
    /* an episode file: the whole script, its text escaped the same way */
    snprintf(p, sizeof p, "%s/report/ep-0.js", d);
    char *js = slurp(p, NULL);
    cr_assert(js);
    cr_expect(!strncmp(js, "lisEpisode(0,{", 14), "%.40s", js);
    cr_expect(!strchr(js, '<') && !strstr(js, "\xe2\x80\xa8") && strstr(js, "\\u2028"),
              "unescaped text in ep-0.js");
    cr_expect(strstr(js, "\"path\":\"notes.txt\"") && strstr(js, "\"kind\":\"text\""));
    free(js);
    snprintf(p, sizeof p, "%s/report/ep-1.js", d);
    js = slurp(p, NULL);
    cr_assert(js);
    cr_expect(strstr(js, "not JSON"), "a broken trajectory is not said: %s", js);
    cr_expect(strstr(js, "\"path\":\"bin.dat\",\"size\":4,\"kind\":\"other\""), "%s", js);
    free(js);

    out = t_lis(&code, "report %s/nonexistent", d);
    cr_expect_eq(code, 125);
    cr_expect(strstr(out, "No such file or directory; give the output directory"), "%s", out);
    free(out);
    out = t_lis(&code, "report %s/files", d);
    cr_expect_eq(code, 125);
    cr_expect(strstr(out, "neither results.jsonl"), "%s", out);
    free(out);
    out = t_lis(&code, "report");
    cr_expect_eq(code, 2, "%s", out);
    free(out);
    out = t_lis(&code, "report --bogus");
    cr_expect_eq(code, 2);
    cr_expect(strstr(out, "unknown option '--bogus'"), "%s", out);
    free(out);
}

/* ---- a run that did not finish says so everywhere (issue 20) ------------ */

static cJSON *json_in(const char *dir, const char *name)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    char *t = slurp(p, NULL);
    cr_assert(t, "%s is missing", p);
    cJSON *j = cJSON_Parse(t);
    cr_assert(j, "%s is not JSON: %s", p, t);
    free(t);
    return j;
}

static const char *jstr(const cJSON *j, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(j, k));
    return s ? s : "";
}

/* run.json, results.json, the summary and the page (in Chromium) all say the
 * run's status, why, how many rows were not run and the command that finishes
 * it; the command is the lis that ran, `batch --resume`, the directory. */
static void says_so_everywhere(const char *rdir, const char *summary, const char *status,
                               const char *reason, int not_run)
{
    cJSON *run = json_in(rdir, "run.json"), *res = json_in(rdir, "results.json");
    const cJSON *files[] = {run, res};
    const char *names[] = {"run.json", "results.json"};
    for (int i = 0; i < 2; i++) {
        cr_expect_str_eq(jstr(files[i], "status"), status, "%s", names[i]);
        cr_expect_str_eq(jstr(files[i], "status_reason"), reason, "%s", names[i]);
        cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(files[i], "rows_not_run")), not_run,
                     "%s: rows_not_run", names[i]);
        cr_expect(*jstr(files[i], "status_message"), "%s: no status_message", names[i]);
    }
    const char *fin = jstr(run, "finish_command");
    cr_expect_str_eq(jstr(res, "finish_command"), fin);
    char want[1300];
    snprintf(want, sizeof want, "%s batch --resume ", t_lis_bin());
    cr_expect(!strncmp(fin, want, strlen(want)) && strstr(fin, rdir),
              "the finish command is not the lis that ran, resuming %s: %s", rdir, fin);
    /* no finished row: no mean, not a 0 */
    double done = cJSON_GetNumberValue(cJSON_GetObjectItem(res, "rows_done"));
    cr_expect_eq(cJSON_IsNull(cJSON_GetObjectItem(res, "mean_score")), done == 0,
                 "mean_score with %g rows done", done);
    /* the summary */
    snprintf(want, sizeof want, "  %-22s %s", "status", status);
    cr_expect(strstr(summary, want), "the summary does not say '%s': %s", want, summary);
    snprintf(want, sizeof want, "%-22s %s", "finish with", fin);
    cr_expect(strstr(summary, want), "the summary does not give the command: %s", summary);
    /* the page */
    char html[1200];
    snprintf(html, sizeof html, "%s/report.html", rdir);
    char *dom = browse(html, "");
    snprintf(want, sizeof want, "data-status=\"%s\"", status);
    cr_expect(strstr(dom, "id=\"run-status\"") && strstr(dom, want), "the page does not say %s: %s",
              status, dom);
    snprintf(want, sizeof want, "data-not-run=\"%d\"", not_run);
    cr_expect(strstr(dom, want), "the page does not say %d rows not run: %s", not_run, dom);
    snprintf(want, sizeof want, "<code id=\"finish-command\">%s</code>", fin);
    cr_expect(strstr(dom, want), "the page does not give the command: %s", dom);
    free(dom);
    cJSON_Delete(run);
    cJSON_Delete(res);
}

/* n rows of a --tasks file, each one command of `sleep S` then submit. */
static void tasks_file(const char *d, int n, char *path, size_t len)
{
    snprintf(path, len, "%s/tasks.jsonl", d);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    for (int i = 0; i < n; i++)
        fprintf(f, "{\"id\":\"r%d\",\"problem_statement\":\"p\",\"ground_truth\":\"ok\"}\n", i);
    fclose(f);
}

#define SLEEPER(s)                                                                                 \
    "{\"rows\":{},\"default\":[{\"calls\":[[\"execute_bash\",{\"command\":\"sleep " s "; echo ok " \
    "> /testbed/output/answer.txt\"}]]},{\"calls\":[[\"submit\",{}]]}]}"

/* lis batch in the background, its output in d/log; returns its pid. */
static pid_t batch_bg(const t_fake *f, const char *d, const char *tasks, int conc)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "XDG_RUNTIME_DIR=%s/run XDG_DATA_HOME=%s/data exec %s batch --llm-name fake "
             "--llm-base-url %s --rootfs %s --net none --effects --tasks %s --scorer "
             "builtin:match --concurrency %d --output-dir %s/out >%s/log 2>&1",
             t_tmpdir(), t_tmpdir(), t_lis_bin(), f->url, t_busybox(), tasks, conc, d, d);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) { /* its own group, which a terminal's Ctrl-C goes to */
        setsid();
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static void the_run_dir(const char *d, char *rdir, size_t len)
{
    char *o = t_host(NULL, "ls -d %s/out/*/ 2>/dev/null | head -1 | tr -d '\\n'", d);
    snprintf(rdir, len, "%.*s", o[0] ? (int)strlen(o) - 1 : 0, o);
    free(o);
}

static int rows_in(const char *rdir)
{
    cJSON *r = t_results_rows(rdir);
    int n = cJSON_GetArraySize(r);
    cJSON_Delete(r);
    return n;
}

Test(report, ctrl_c_partial_says_so_and_its_command_finishes_it, .timeout = 300)
{
    need_chromium();
    char d[600], tasks[700], rdir[1000];
    snprintf(d, sizeof d, "%s/status-ctrlc", t_tmpdir());
    mkdir(d, 0755);
    tasks_file(d, 8, tasks, sizeof tasks);
    t_fake f;
    t_fake_start(&f, SLEEPER("3"));
    pid_t pid = batch_bg(&f, d, tasks, 4);
    for (int t = 0; t < 300 && t_fake_count(&f) < 4; t++) /* four in their 3 s command */
        usleep(100000);
    usleep(500000);
    kill(-pid, SIGINT); /* Ctrl-C: the four finish, nothing new starts */
    int st = 0;
    waitpid(pid, &st, 0);
    char *log = t_host(NULL, "cat %s/log", d);
    cr_expect_eq(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 1, "%s", log);
    the_run_dir(d, rdir, sizeof rdir);
    cr_assert(rdir[0], "no run directory: %s", log);
    cr_assert_eq(rows_in(rdir), 4, "%s", log);
    says_so_everywhere(rdir, log, "partial", "interrupted", 4);
    free(log);
    /* the command, as printed, finishes the run: every row, complete */
    cJSON *run = json_in(rdir, "run.json");
    int code = 0;
    char *out = t_host(&code, "XDG_RUNTIME_DIR=%s/run XDG_DATA_HOME=%s/data %s 2>&1", t_tmpdir(),
                       t_tmpdir(), jstr(run, "finish_command"));
    cJSON_Delete(run);
    cr_expect_eq(code, 0, "%s", out);
    cr_expect_eq(rows_in(rdir), 8, "%s", out);
    run = json_in(rdir, "run.json");
    cr_expect_str_eq(jstr(run, "status"), "complete");
    cr_expect(cJSON_IsNull(cJSON_GetObjectItem(run, "finish_command")));
    cJSON_Delete(run);
    free(out);
    char html[1200];
    snprintf(html, sizeof html, "%s/report.html", rdir);
    char *dom = browse(html, "");
    cr_expect(strstr(dom, "data-status=\"complete\"") && !strstr(dom, "id=\"finish-command\""),
              "%s", dom);
    free(dom);
    t_fake_stop(&f);
}

Test(report, kill9_partial_is_found_by_lis_batch_report, .timeout = 300)
{
    need_chromium();
    char d[600], tasks[700], rdir[1000] = "";
    snprintf(d, sizeof d, "%s/status-kill", t_tmpdir());
    mkdir(d, 0755);
    tasks_file(d, 12, tasks, sizeof tasks);
    t_fake f;
    t_fake_start(&f, SLEEPER("1"));
    pid_t pid = batch_bg(&f, d, tasks, 3);
    int n = 0;
    for (int t = 0; t < 600 && n < 3; t++) {
        usleep(100000);
        if (!rdir[0])
            the_run_dir(d, rdir, sizeof rdir);
        n = rdir[0] ? rows_in(rdir) : 0;
    }
    cr_assert_geq(n, 3, "no progress before the kill");
    /* while it runs, lis batch report says it is a run in progress */
    int code = 0;
    char *out = t_lis(&code, "batch report %s", rdir);
    cr_expect_eq(code, 0, "%s", out);
    cr_expect(strstr(out, "is a run in progress"), "%s", out);
    free(out);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    n = rows_in(rdir);
    cr_assert_lt(n, 12, "every row finished before the kill");
    /* no process is left to say it: the next lis batch report finds it */
    out = t_lis(&code, "batch report %s", rdir);
    cr_expect_eq(code, 0, "%s", out);
    cr_expect(!strstr(out, "in progress"), "%s", out);
    says_so_everywhere(rdir, out, "partial", "killed", 12 - n);
    free(out);
    t_fake_stop(&f);
}

Test(report, http_404_stopped_with_no_mean, .timeout = 200)
{
    need_chromium();
    char d[600], tasks[700], rdir[1000];
    snprintf(d, sizeof d, "%s/status-404", t_tmpdir());
    mkdir(d, 0755);
    tasks_file(d, 5, tasks, sizeof tasks);
    t_fake f;
    t_fake_start(&f, "{\"rows\":{},\"default\":[{\"fail\":1000,\"fail_status\":404}]}");
    int code = 0;
    char *out = t_lis(&code,
                      "batch --llm-name fake --llm-base-url %s --rootfs %s --net none --tasks "
                      "%s --scorer builtin:match --concurrency 2 --output-dir %s/out",
                      f.url, t_busybox(), tasks, d);
    t_fake_stop(&f);
    cr_expect_neq(code, 0, "%s", out);
    cr_expect(strstr(out, "not an OpenAI-compatible endpoint at") && strstr(out, "(HTTP 404"), "%s",
              out);
    the_run_dir(d, rdir, sizeof rdir);
    cr_assert(rdir[0], "%s", out);
    cr_expect_eq(rows_in(rdir), 0);
    says_so_everywhere(rdir, out, "stopped", "http_404", 5);
    free(out);
}
