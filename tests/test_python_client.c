/* test_python_client.c - the Python client python/lis (with its DockerRuntime
 * drop-in) through its pytest suite tests/python, which starts a real
 * `lis serve` as this (unprivileged) user with the Debian fixture imported
 * (tests/python/conftest.py). Fails when a Python test fails, is skipped or
 * goes missing, and when pytest itself is missing. */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* test functions in tests/python/test_*.py: a test dropped from the suite shows here */
#define PY_TESTS 77

Test(python_client, pytest_suite, .timeout = 900)
{
    t_debian(); /* skips without the fixture, as the suites of lis serve do */
    t_lis_bin();
    int code;
    char *out = t_host(&code, "python3 -c 'import pytest' 2>&1");
    cr_assert_eq(code, 0,
                 "pytest is missing (apt-get install -y python3-pytest; scripts/deps.sh "
                 "installs it): %s",
                 out);
    free(out);
    /* from LIS_TEST_SRC, where test.sh puts python/lis beside tests/python */
    /* a test stuck for 120 s prints every thread's traceback (faulthandler),
     * and the whole run is ended with SIGINT before this test's own timeout,
     * so a hang shows where it is instead of a bare "Timed out" */
    out = t_host(&code,
                 "cd %s && PYTHONDONTWRITEBYTECODE=1 timeout -s INT -k 20 780 python3 -m "
                 "pytest -q -rs --tb=short -o faulthandler_timeout=120 -p no:cacheprovider "
                 "python 2>&1",
                 t_src_dir());
    char want[64];
    snprintf(want, sizeof want, "\n%d passed in ", PY_TESTS); /* pytest -q's summary line */
    const char *why = code != 0            ? "pytest failed"
                      : !strstr(out, want) ? "not all the tests passed"
                      : strstr(out, "skipped") || strstr(out, "error")
                          ? "a test was skipped or erred"
                          : NULL;
    /* the output's end on the stack, so that a failure (which leaves this
     * function at once) does not also leak the buffer (a LeakSanitizer report) */
    enum { KEEP = 48 * 1024 };
    char tail[KEEP + 1];
    size_t n = strlen(out);
    snprintf(tail, sizeof tail, "%s", n > KEEP ? out + n - KEEP : out);
    free(out);
    cr_assert(!why, "%s (exit %d, %d tests expected):\n%s", why, code, PY_TESTS, tail);
}

/* python/README.md's offline install under PEP 668, as written: a venv with the
 * system's build tools, pip install --no-build-isolation --no-index ./python,
 * then `import lis` from the venv (outside the checkout). */
Test(python_client, installs_in_a_venv, .timeout = 300)
{
    int code;
    char *out = t_host(&code, "python3 -c 'import venv, setuptools, wheel' 2>&1");
    if (code != 0) {
        free(out);
        cr_skip_test("python3-venv, python3-setuptools or python3-wheel is missing "
                     "(scripts/deps.sh installs them with the test extras)");
    }
    free(out);
    lis_ctx_free(t_ctx()); /* for t_tmpdir() */
    out = t_host(&code,
                 "cd %s && cp -r %s/python src && python3 -m venv --system-site-packages venv && "
                 "venv/bin/pip install -q --no-build-isolation --no-index ./src 2>&1 && "
                 "rm -rf src && cd / && %s/venv/bin/python -c "
                 "'import lis; print(lis.__version__, lis.__file__)' 2>&1",
                 t_tmpdir(), t_src_dir(), t_tmpdir());
    cr_assert_eq(code, 0, "the README's venv install: %s", out);
    char want[600];
    snprintf(want, sizeof want, "%s/venv/lib", t_tmpdir());
    cr_assert(strstr(out, want), "lis came from elsewhere than the venv: %s", out);
    free(out);
}
