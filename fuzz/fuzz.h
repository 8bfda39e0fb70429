/* fuzz.h - shared by the fuzz targets (one per file in fuzz/).
 *
 * Each target defines LLVMFuzzerTestOneInput. `make fuzz` links it with
 * libFuzzer (clang -fsanitize=fuzzer,address,undefined); `make tests` links
 * it with replay.c instead (gcc, ASan/UBSan), which runs it over the seed
 * corpus and the regression inputs as part of `make test`. */
#ifndef LIS_FUZZ_H
#define LIS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional one-time set-up (libFuzzer and replay.c call it first). */
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* An invariant of the code under test: a violation is a finding, as a crash is. */
#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz invariant violated: %s (%s:%d)\n", #cond, __FILE__, __LINE__);   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
