/* test_fuzz_regress.c - replays the fuzz targets' inputs (fuzz/corpus/T, the
 * hand-made seeds, and fuzz/regress/T, every input a fuzzer found a bug with)
 * through the targets built without libFuzzer (build/fuzz-replay/fuzz_T: gcc,
 * ASan and UBSan, each target's invariants checked). A crash, a sanitizer
 * report or a violated invariant fails the test. `make fuzz` does the
 * fuzzing itself (docs/security.md). */
#include "testlib.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void replay_dir(char *out, size_t len)
{
    char bin[4096];
    snprintf(bin, sizeof bin, "%s", t_lis_bin());
    snprintf(out, len, "%s/fuzz-replay", dirname(bin));
}

static void replay(const char *target)
{
    char dir[4096];
    replay_dir(dir, sizeof dir);
    int code;
    char *files = t_host(&code,
                         "cd '%s' && find corpus/%s regress/%s -type f ! -name '.*' "
                         "2>/dev/null | wc -l",
                         dir, target, target);
    int want = atoi(files);
    free(files);
    cr_assert_gt(want, 0, "no inputs for %s in %s", target, dir);
    char *out = t_host(&code,
                       "cd '%s' && ./fuzz_%s corpus/%s $(test -d regress/%s && echo "
                       "regress/%s) 2>&1",
                       dir, target, target, target, target);
    const char *tail = strlen(out) > 3000 ? out + strlen(out) - 3000 : out;
    cr_assert_eq(code, 0, "fuzz_%s failed on an input:\n%s", target, tail);
    char line[64];
    snprintf(line, sizeof line, "replayed %d inputs\n", want);
    cr_assert(strstr(out, line), "fuzz_%s: expected '%s':\n%s", target, line, tail);
    free(out);
}

TestSuite(fuzz_regress, .timeout = 300);

Test(fuzz_regress, http_head) { replay("http_head"); }
Test(fuzz_regress, textcalls) { replay("textcalls"); }
Test(fuzz_regress, sse) { replay("sse"); }
Test(fuzz_regress, llm) { replay("llm"); }
Test(fuzz_regress, settings) { replay("settings"); }
Test(fuzz_regress, extract) { replay("extract"); }
Test(fuzz_regress, notify) { replay("notify"); }

/* The replayer itself fails loudly: a missing input is an error, not 0 inputs. */
Test(fuzz_regress, replay_of_a_missing_input_fails)
{
    char dir[4096];
    replay_dir(dir, sizeof dir);
    int code;
    char *out = t_host(&code, "cd '%s' && ./fuzz_http_head corpus/no-such-target 2>&1", dir);
    cr_assert_neq(code, 0, "%s", out);
    free(out);
}
