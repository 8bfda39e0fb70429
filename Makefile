# lis - build with `make`, test with `make test`.
#
# Outputs (all under build/):
#   lis                the CLI (runtime linked in; light libraries only, so it starts fast)
#   lis-init           the static PID 1 helper exec'd inside every sandbox
#   liblis-agent.so    agent/ + `lis run`/`lis batch` (libcurl, cJSON, libyaml), loaded on demand
#   liblis-rootfs.so   rootfs import/pull (libarchive, libcurl), loaded on demand
#   liblis-serve.so    serve/ + `lis serve` (libmicrohttpd, libarchive; the rootfs store), on demand
# libcurl and libarchive cost ~9 ms and ~4 ms of dynamic loading per process start,
# which would double `lis sandbox run`; hence the two plugins.

CC      ?= cc
PKG     ?= pkg-config
B       ?= build
CSTD    := -std=c11 -D_GNU_SOURCE
WARN    := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter -Wno-format-truncation
OPT     ?= -O2 -g
CFLAGS  += $(CSTD) $(WARN) $(OPT) -fPIC -Iruntime -Inet -Irootfs -Imonitor -Iagent -Ibatch -Irl -Iserve

RT_PKGS     := libseccomp libcjson
AGENT_PKGS  := libcurl libcjson yaml-0.1 libcrypto libmicrohttpd
ROOTFS_PKGS := libarchive libcurl libcjson libcrypto
TEST_PKGS   := criterion
SERVE_PKGS  := libmicrohttpd gnutls libarchive libcjson yaml-0.1

RT_CFLAGS     := $(shell $(PKG) --cflags $(RT_PKGS))
RT_LIBS       := $(shell $(PKG) --libs $(RT_PKGS)) -ldl
AGENT_CFLAGS  := $(shell $(PKG) --cflags $(AGENT_PKGS))
AGENT_LIBS    := $(shell $(PKG) --libs $(AGENT_PKGS))
ROOTFS_CFLAGS := $(shell $(PKG) --cflags $(ROOTFS_PKGS))
ROOTFS_LIBS   := $(shell $(PKG) --libs $(ROOTFS_PKGS))
SERVE_CFLAGS  := $(shell $(PKG) --cflags $(SERVE_PKGS))
SERVE_LIBS    := $(shell $(PKG) --libs $(SERVE_PKGS))
TEST_CFLAGS   := $(shell $(PKG) --cflags $(TEST_PKGS) 2>/dev/null)
TEST_LIBS     := $(shell $(PKG) --libs $(TEST_PKGS) 2>/dev/null)

# runtime/ (minus the init helper) and the light part of rootfs/ (the store index)
RT_SRC      := $(wildcard runtime/*.c) rootfs/store.c
# net/: the egress proxy of --net proxy, on the runtime's public API (lis.h) only
NET_SRC     := $(wildcard net/*.c)
INIT_SRC    := $(wildcard runtime/init/*.c)
# monitor/: what each step did (docs/monitoring.md), for agent/, batch/ and serve/
MON_SRC     := $(wildcard monitor/*.c)
CLI_SRC     := cli/main.c cli/cmd_sandbox.c cli/cmd_doctor.c cli/cmd_state.c cli/cli_util.c cli/relay.c
# (batch/'s --fork-from-setup snapshots and removes them: rootfs/snapshot.c, admin.c)
AGENT_SRC   := $(MON_SRC) $(wildcard agent/*.c) $(wildcard batch/*.c) rootfs/snapshot.c rootfs/admin.c rootfs/util.c \
               cli/cmd_run.c cli/cmd_batch.c cli/batch_settings.c cli/cmd_report.c \
               cli/agent_image.c cli/agent_main.c cli/cli_util.c
ROOTFS_SRC  := $(filter-out rootfs/store.c,$(wildcard rootfs/*.c)) cli/cmd_rootfs.c cli/cmd_snapshot.c cli/cli_util.c
# serve/ links the rootfs store's admin code (tags, list, pull) as liblis-rootfs.so does
# rl/, the episodes API (docs/rl.md), runs agent/'s engine and batch/'s scorers inside
# lis serve: the serve plugin carries them (liblis-agent.so's objects but the CLI's)
RL_SRC      := $(wildcard rl/*.c)
SERVE_SRC   := $(MON_SRC) $(wildcard serve/*.c) $(RL_SRC) $(filter-out cli/% $(MON_SRC) rootfs/%,$(AGENT_SRC)) cli/cmd_serve.c

RT_OBJ      := $(RT_SRC:%.c=$(B)/obj/%.o)
INIT_OBJ    := $(INIT_SRC:%.c=$(B)/obj/%.o)
NET_OBJ     := $(NET_SRC:%.c=$(B)/obj/%.o)
CLI_OBJ     := $(CLI_SRC:%.c=$(B)/obj/%.o)
AGENT_OBJ   := $(AGENT_SRC:%.c=$(B)/pobj/%.o)
ROOTFS_OBJ  := $(ROOTFS_SRC:%.c=$(B)/pobj/%.o)
SERVE_OBJ   := $(SERVE_SRC:%.c=$(B)/pobj/%.o)
RL_OBJ      := $(RL_SRC:%.c=$(B)/pobj/%.o)

TEST_SRC    := $(wildcard tests/test_*.c tests/security/test_*.c)
TEST_BIN    := $(TEST_SRC:tests/%.c=$(B)/tests/%)
# root_*: run as root by scripts/test.sh; vm_*: run only inside the cgroup v2 VM (tests/vm/)
EXTRA_TEST_BIN := $(patsubst tests/%.c,$(B)/tests/%,$(wildcard tests/root_*.c tests/vm_*.c))

.PHONY: all clean test check tests test-bins bench test-asan fuzz fuzz-build check-layers layers-docs format-check format
all: $(B)/lis $(B)/lis-init $(B)/liblis-agent.so $(B)/liblis-rootfs.so $(B)/liblis-serve.so

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(RT_CFLAGS) -MMD -MP -c $< -o $@

$(B)/pobj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AGENT_CFLAGS) $(ROOTFS_CFLAGS) $(SERVE_CFLAGS) -MMD -MP -c $< -o $@

$(B)/libruntime.a: $(RT_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(B)/libnet.a: $(NET_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# The CLI exports its symbols so the plugins use the one runtime (and net/) inside it.
$(B)/lis: $(CLI_OBJ) $(B)/libnet.a $(B)/libruntime.a
	$(CC) $(LDFLAGS) -rdynamic -o $@ $(CLI_OBJ) -Wl,--whole-archive $(B)/libnet.a $(B)/libruntime.a -Wl,--no-whole-archive $(RT_LIBS)

# Static and small: one copy of its pages is shared by every sandbox. Its objects
# sit in $(B)/obj like the rest of runtime/, so check-layers sees its files too;
# they keep their own flags (no -fPIC, no sanitizer: ASan cannot link statically).
$(B)/obj/runtime/init/%.o: runtime/init/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -Os -Iruntime -MMD -MP -c $< -o $@

$(B)/lis-init: $(INIT_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -Os -static -o $@ $(INIT_OBJ)

# the reward.py worker is embedded in the library (.incbin, see batch/score_worker.c)
$(B)/pobj/batch/score_worker.o: batch/reward_worker.py
# and the page of `lis report` (batch/report_page.c)
$(B)/pobj/batch/report_page.o: batch/report_page.html

$(B)/liblis-agent.so: $(AGENT_OBJ)
	$(CC) $(LDFLAGS) -shared -o $@ $^ $(AGENT_LIBS)

$(B)/liblis-rootfs.so: $(ROOTFS_OBJ)
	$(CC) $(LDFLAGS) -shared -o $@ $^ $(ROOTFS_LIBS)

$(B)/liblis-serve.so: $(SERVE_OBJ) $(filter-out $(B)/pobj/cli/cmd_rootfs.o $(B)/pobj/cli/cmd_snapshot.o,$(ROOTFS_OBJ))
	$(CC) $(LDFLAGS) -shared -o $@ $^ $(SERVE_LIBS) $(ROOTFS_LIBS) $(AGENT_LIBS) -lpthread

# Test binaries link the runtime; those that use net/ (test_net, test_http_head, the
# agent's and the escape suites) also net/; test_agent* also the agent's objects and
# test_rootfs* the rootfs plugin's, so one area's work in progress cannot
# break another area's suites.
AGENT_LIBOBJ  := $(filter-out $(B)/pobj/cli/%,$(AGENT_OBJ))
ROOTFS_LIBOBJ := $(filter-out $(B)/pobj/cli/%,$(ROOTFS_OBJ))
MON_LIBOBJ    := $(MON_SRC:%.c=$(B)/pobj/%.o)
TESTLIB       := tests/testlib.c tests/testlib.h
uses_net  = $(filter test_net test_http_head test_agent% test_batch% test_score% test_rl% test_monitor% security/%,$(1))
# the escape suites run with the monitor on (tests/security/seclib.c)
uses_mon  = $(filter test_monitor% security/%,$(1))
test_objs = $(if $(filter test_agent% test_batch% test_score% test_rl%,$(1)),$(AGENT_LIBOBJ)) $(if $(filter test_rl%,$(1)),$(RL_OBJ)) $(if $(filter test_rootfs%,$(1)),$(ROOTFS_LIBOBJ)) \
            $(if $(call uses_mon,$(1)),$(MON_LIBOBJ)) $(if $(call uses_net,$(1)),$(B)/libnet.a)
test_libs = $(if $(filter test_agent% test_batch% test_score% test_rl%,$(1)),$(AGENT_LIBS)) $(if $(filter test_rootfs%,$(1)),$(ROOTFS_LIBS)) \
            $(if $(call uses_mon,$(1)),$(AGENT_LIBS))
# tests/security/test_* (the escape suites) also link their shared helpers
test_srcs = $(if $(filter security/%,$(1)),tests/security/seclib.c tests/security/seclib.h) \
            $(if $(filter test_monitor%,$(1)),tests/monitorlib.c tests/monitorlib.h)

.SECONDEXPANSION:
$(B)/tests/%: tests/%.c $(TESTLIB) $(B)/libruntime.a $$(call test_objs,$$*) $$(call test_srcs,$$*)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TEST_CFLAGS) $(RT_CFLAGS) $(AGENT_CFLAGS) $(ROOTFS_CFLAGS) -Itests -o $@ $< tests/testlib.c \
	  $(filter %.c,$(call test_srcs,$*)) \
	  $(call test_objs,$*) $(B)/libruntime.a $(TEST_LIBS) $(RT_LIBS) $(call test_libs,$*) -lpthread

$(B)/tests/bench_api: tests/bench_api.c $(B)/libruntime.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(RT_CFLAGS) -o $@ $< $(B)/libruntime.a $(RT_LIBS) -lpthread

$(B)/tests/bench_monitor: tests/bench_monitor.c $(B)/libruntime.a $(B)/libnet.a $(MON_LIBOBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(RT_CFLAGS) $(AGENT_CFLAGS) -o $@ $< $(MON_LIBOBJ) $(B)/libnet.a $(B)/libruntime.a $(RT_LIBS) $(AGENT_LIBS) -lpthread

$(B)/tests/bench_fork: tests/bench_fork.c $(B)/libruntime.a $(ROOTFS_LIBOBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(RT_CFLAGS) $(ROOTFS_CFLAGS) -o $@ $< $(ROOTFS_LIBOBJ) $(B)/libruntime.a $(RT_LIBS) $(ROOTFS_LIBS) -lpthread

$(B)/tests/bench_setup: tests/bench_setup.c $(B)/libruntime.a $(B)/libnet.a $(ROOTFS_LIBOBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(RT_CFLAGS) $(ROOTFS_CFLAGS) -o $@ $< $(ROOTFS_LIBOBJ) $(B)/libnet.a $(B)/libruntime.a $(RT_LIBS) $(ROOTFS_LIBS) -lpthread

$(B)/tests/sysprobe: tests/sysprobe.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O2 -static -pthread -o $@ $<

# the static helper the escape suites run inside sandboxes (tests/security/)
$(B)/tests/security/escape_probe: tests/security/escape_probe.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O2 -static -pthread -o $@ $<

# the static helper the monitor suites run inside sandboxes (tests/test_monitor*.c)
$(B)/tests/monitor_probe: tests/monitor_probe.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O2 -static -pthread -o $@ $<

tests: all $(TEST_BIN) $(EXTRA_TEST_BIN) $(B)/tests/sysprobe $(B)/tests/security/escape_probe \
       $(B)/tests/monitor_probe $(B)/tests/bench_monitor \
       $(B)/tests/bench_api $(B)/tests/bench_fork $(B)/tests/bench_setup

# The README's test command. As root it prepares fixtures, then runs the
# rootless suites as an unprivileged user (LIS_TEST_USER, default lis-test).
# With LIS_TEST_SUITES it builds only those suites' binaries (and the helpers
# they run), not every test binary.
TEST_HELPERS := $(B)/tests/sysprobe $(B)/tests/security/escape_probe $(B)/tests/monitor_probe
TEST_WANTED := $(if $(strip $(LIS_TEST_SUITES)),all $(TEST_HELPERS) \
    $(filter $(addprefix $(B)/tests/,$(LIS_TEST_SUITES)) \
             $(addprefix $(B)/tests/security/,$(LIS_TEST_SUITES)),$(TEST_BIN) $(EXTRA_TEST_BIN)),tests)
test check: test-bins
	B=$(B) bash scripts/test.sh
test-bins: $(TEST_WANTED)

# The one-way layers of docs/architecture.md (scripts/test.sh runs the same
# check first and counts it): prints each area's layers, then its self-test.
# The C style of .clang-format (docs/style.md); scripts/test.sh runs it too.
# docs/architecture.md's tables of each area's rows, from the build's call graph
layers-docs: all
	python3 scripts/check-layers.py --objdir $(B)/obj --objdir $(B)/pobj --write-docs docs/architecture.md

format-check:
	bash scripts/format-check.sh
format:
	bash scripts/format-check.sh --fix

check-layers: all
	python3 scripts/check-layers.py --objdir $(B)/obj --objdir $(B)/pobj --levels --docs docs/architecture.md
	python3 scripts/check-layers.py --self-test

# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer, in its own
# build dir. lis-init and the static test helpers keep their own flags (ASan
# cannot be linked statically), so they stay plain. Any finding fails the run:
# UBSan halts on the first error, ASan and LeakSanitizer (at exit) make the
# process exit non-zero, and scripts/test.sh counts every report file of any
# process (tests, the CLI, detached owners) as a failure (LIS_TEST_SANITIZE).
ASAN_B    ?= build-asan
ASAN_OPT  := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
ASAN_ENV  := LIS_TEST_SANITIZE=1 \
             ASAN_OPTIONS=detect_leaks=1:exitcode=86:strict_string_checks=1:detect_stack_use_after_return=1 \
             UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 LSAN_OPTIONS=print_suppressions=0
test-asan:
	$(MAKE) B=$(ASAN_B) OPT='$(ASAN_OPT)' LDFLAGS='-fsanitize=address,undefined' test-bins
	$(ASAN_ENV) B=$(ASAN_B) bash scripts/test.sh

bench: all
	bash scripts/bench-runtime.sh

clean:
	rm -rf $(B)/obj $(B)/pobj $(B)/tests $(B)/fuzz-replay $(B)/lis $(B)/lis-init $(B)/*.so $(B)/*.a

# ---- fuzzing (fuzz/, docs/security.md) -----------------------------------------------------
# `make fuzz`: libFuzzer targets (clang) in $(FUZZ_B), each run for FUZZ_SECONDS; a crash fails
# it and its reproducer stays in $(FUZZ_B)/crashes/. FUZZ_ONLY="sse llm" runs some of them.
# `make tests` links the same targets with fuzz/replay.c (gcc, ASan/UBSan) instead: the suite
# test_fuzz_regress replays fuzz/corpus and fuzz/regress (the findings) through them.
FUZZ_B       ?= build-fuzz
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := http_head textcalls sse llm settings extract notify
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS   = $(CSTD) -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter -g -O1 $(FUZZ_SAN) \
  -Iruntime -Inet -Irootfs -Imonitor -Iagent -Ifuzz $(AGENT_CFLAGS) $(ROOTFS_CFLAGS)
fuzz_src_http_head := net/http_head.c
fuzz_src_textcalls := agent/textcalls.c agent/util.c runtime/error.c runtime/util.c runtime/utf8.c
fuzz_src_sse       := agent/sse.c agent/llm.c agent/llm_tokens.c agent/anthropic.c agent/util.c runtime/error.c runtime/util.c runtime/utf8.c
fuzz_src_llm       := agent/sse.c agent/llm.c agent/llm_tokens.c agent/anthropic.c agent/util.c runtime/error.c runtime/util.c runtime/utf8.c
fuzz_src_settings  := agent/settings.c agent/prompts.c agent/llm.c agent/llm_tokens.c agent/anthropic.c agent/sse.c agent/util.c runtime/error.c runtime/util.c runtime/utf8.c
fuzz_src_extract   := rootfs/extract.c rootfs/util.c
fuzz_src_notify    := monitor/exec_read.c monitor/procmem.c monitor/records.c monitor/effects.c \
  monitor/layer.c monitor/scan.c monitor/watch.c monitor/udiff.c monitor/texts.c monitor/policy.c monitor/rules.c
fuzz_libs_textcalls := $(AGENT_LIBS)
fuzz_libs_sse       := $(AGENT_LIBS)
fuzz_libs_llm       := $(AGENT_LIBS)
fuzz_libs_settings  := $(AGENT_LIBS)
fuzz_libs_extract   := $(B)/libruntime.a $(ROOTFS_LIBS) $(RT_LIBS)
fuzz_dep_extract    := $(B)/libruntime.a
fuzz_libs_notify    := $(B)/libnet.a $(B)/libruntime.a $(RT_LIBS) -lcjson -lyaml -lpthread
fuzz_dep_notify     := $(B)/libruntime.a $(B)/libnet.a
FUZZ_BIN    := $(FUZZ_TARGETS:%=$(FUZZ_B)/fuzz_%)
FUZZ_REPLAY := $(FUZZ_TARGETS:%=$(B)/fuzz-replay/fuzz_%)

$(FUZZ_B)/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz.h $$(fuzz_src_$$*) $$(fuzz_dep_$$*)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(fuzz_src_$*) $(fuzz_libs_$*)

$(B)/fuzz-replay/fuzz_%: fuzz/fuzz_%.c fuzz/replay.c fuzz/fuzz.h $$(fuzz_src_$$*) $$(fuzz_dep_$$*)
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_CFLAGS) -Wno-format-truncation -o $@ $< fuzz/replay.c $(fuzz_src_$*) $(fuzz_libs_$*)

# the inputs travel with the build (scripts/test.sh copies $(B) for the test user)
$(B)/fuzz-replay/inputs.stamp: $(shell find fuzz/corpus fuzz/regress -type f 2>/dev/null)
	@mkdir -p $(dir $@)
	rm -rf $(B)/fuzz-replay/corpus $(B)/fuzz-replay/regress
	cp -r fuzz/corpus fuzz/regress $(B)/fuzz-replay/
	touch $@

tests: $(FUZZ_REPLAY) $(B)/fuzz-replay/inputs.stamp
ifneq ($(filter test_fuzz_regress,$(LIS_TEST_SUITES)),)
test-bins: $(FUZZ_REPLAY) $(B)/fuzz-replay/inputs.stamp
endif

# build only (CI): the libFuzzer targets still compile and link
fuzz-build: $(FUZZ_BIN)

fuzz: $(FUZZ_BIN)
	FUZZ_B=$(FUZZ_B) FUZZ_SECONDS=$(FUZZ_SECONDS) bash fuzz/run.sh $(or $(FUZZ_ONLY),$(FUZZ_TARGETS))

-include $(shell find $(B) -name '*.d' 2>/dev/null)
