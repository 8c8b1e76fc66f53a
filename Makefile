# ramster - GNU Makefile. `make` builds everything into $(BUILD); `make check`
# runs the unit and integration tests; `make asan` the same under
# ASan+UBSan (in build-asan/), `make tsan` under ThreadSanitizer (build-tsan/);
# `make bench`, `make fuzz`, `make demo`, `make install PREFIX=DIR`,
# `make deps` (the Debian packages). See README.md.

BUILD   ?= build
PREFIX  ?= /usr/local
CC      ?= cc
SAN     ?=
OPT     ?= -O2 -g
WARN    := -Wall -Wextra -Wshadow -Wformat=2 -Wstrict-prototypes -Wmissing-prototypes \
           -Wwrite-strings -Wundef -Wno-unused-parameter
WERROR  ?=

# CPPFLAGS, CFLAGS and LDFLAGS are the user's: they come after what the build
# needs (Redis's FINAL_CFLAGS), so `make CFLAGS=-O0` changes the optimisation
# and keeps -std, -pthread, -fPIC, the warnings and the include paths.
# tests/integration/test_build.sh checks it.
FINAL_CPPFLAGS = -I. -Iinclude -I$(BUILD)/gen -D_GNU_SOURCE -DRAMSTER_RDMA=$(RDMA_ON) \
                 -DRAMSTER_VERSION=\"$(VERSION)\" $(PKG_CFLAGS) $(CPPFLAGS)
FINAL_CFLAGS   = -std=gnu11 -fPIC -pthread $(OPT) $(WARN) $(WERROR) $(SAN) $(CFLAGS)
FINAL_LDFLAGS  = -pthread $(SAN) $(LDFLAGS)

# pkg-config runs on first use, once a variable (after `make deps` installed
# the packages).
pc = $(eval $(1) := $(shell pkg-config $(2) 2>/dev/null))$($(1))
PKG_CFLAGS    = $(call pc,PKG_CFLAGS,--cflags libprotobuf-c libsodium inih gnutls)
PROTOBUF_LIBS = $(call pc,PROTOBUF_LIBS,--libs libprotobuf-c)
SODIUM_LIBS   = $(call pc,SODIUM_LIBS,--libs libsodium)
INIH_LIBS     = $(call pc,INIH_LIBS,--libs inih)
GNUTLS_LIBS   = $(call pc,GNUTLS_LIBS,--libs gnutls)
# Each binary links what its objects use, no more (test_build.sh checks
# ramsterctl's): proto/ and lib/ need protobuf-c; tmem/ liblzo2; node/ and
# transport/ libev, libsodium, libinih, libmicrohttpd, libsystemd, GnuTLS (NBD over TLS)
# and (RDMA=1) the RDMA libraries; the tools that print JSON jansson.
WIRE_LIBS = $(PROTOBUF_LIBS)
# libramster itself: its far-memory regions keep a cache of evicted pages in LZ4
# (lib/region_zcache.c); what links only its client calls does not need it
LIBRAMSTER_LIBS = $(WIRE_LIBS) -llz4
TIER_LIBS = -llzo2 -llz4
# node/ erasure-codes pages (ISA-L: node/remote/erasure.c), serves /metrics (libmicrohttpd), talks to systemd (libsystemd) and
# serves NBD over TLS (GnuTLS: node/nbd/nbd_tls.c)
NODE_LIBS = -lev -lisal $(SODIUM_LIBS) $(INIH_LIBS) $(GNUTLS_LIBS) $(RDMA_LIBS) -lmicrohttpd $(SYSTEMD_LIBS)
# the tools' JSON (jansson)
JSON_LIBS = -ljansson
TEST_LIBS = -lcmocka
# RDMA=1 (default): transport/rdma.c with rdma_cm + verbs; RDMA=0 builds it as
# stubs (transport_rdma_new fails with ENOTSUP) and links no RDMA library.
RDMA    ?= 1
ifeq ($(RDMA),1)
RDMA_ON   = 1
RDMA_LIBS = -lrdmacm -libverbs
else
RDMA_ON   = 0
RDMA_LIBS =
endif
# libsystemd: sd_notify and the watchdog (node/notify.c), the journal (node/log.c)
SYSTEMD_LIBS = -lsystemd

VERSION := 0.1.0

# ---- sources -----------------------------------------------------------------
PROTOS     := $(wildcard proto/*.proto)
PROTO_C    := $(patsubst %.proto,$(BUILD)/gen/%.pb-c.c,$(PROTOS))
PROTO_H    := $(PROTO_C:.c=.h)
TIER_SRC   := $(wildcard tmem/*.c)
# common/: helpers under every layer (sockets, frame header); linked into each
# library that uses them (libwire, libnode, libramster)
COMMON_SRC := $(wildcard common/*.c)
WIRE_SRC   := $(wildcard proto/*.c) $(PROTO_C)
TRANS_SRC  := $(wildcard transport/*.c)
# node/: the daemon's own files, and one folder a layer (client/, nbd/,
# remote/, cluster/, stats/: docs/design.md, "Layers"); tools/check-layout.sh
# checks the folders' rules before libnode.a is made
# node/remote/holder_lie.c (a lying holder, for the hostile tests) is linked
# into the test daemon $(BUILD)/tests/ramsterd-lie only, never into ramsterd
NODE_SRC   := $(filter-out node/main.c node/remote/holder_lie.c,$(wildcard node/*.c node/*/*.c))
LIB_SRC    := $(wildcard lib/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(patsubst $(BUILD)/%,%,$(1)))

TIER_OBJ   := $(call obj,$(TIER_SRC))
COMMON_OBJ := $(call obj,$(COMMON_SRC))
WIRE_OBJ   := $(call obj,$(WIRE_SRC))
TRANS_OBJ  := $(call obj,$(TRANS_SRC))
NODE_OBJ   := $(call obj,$(NODE_SRC))
LIB_OBJ    := $(call obj,$(LIB_SRC))
# the test and benchmark pages (tools/pagegen.c): linked into ramster-bench,
# ramster-netbench and every integration test; not a program of its own
PAGEGEN_OBJ := $(call obj,tools/pagegen.c)
# the tools' JSON reports (tools/jout.c, jansson): not a program of its own either
JOUT_OBJ := $(call obj,tools/jout.c)
# the tools' progress lines (tools/progress.c)
PROGRESS_OBJ := $(call obj,tools/progress.c)
# the tools' quantiles and medians (tools/figures.c)
FIGURES_OBJ := $(call obj,tools/figures.c)
# the client library needs only the client protocol
LIBWIRE_OBJ := $(call obj,proto/wire.c $(BUILD)/gen/proto/client.pb-c.c) $(COMMON_OBJ)

BINS := $(BUILD)/bin/ramsterd $(BUILD)/bin/ramsterctl $(BUILD)/bin/ramster-bench \
        $(BUILD)/bin/ramster-netbench $(BUILD)/bin/ramster-drill $(BUILD)/bin/ramster-run
LIBRAMSTER := $(BUILD)/lib/libramster.so $(BUILD)/lib/libramster.a $(BUILD)/lib/libramster-preload.so

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(UNIT_SRC))
INTEG_SRC := $(wildcard tests/integration/test_*.c)
INTEG_BIN := $(patsubst tests/integration/%.c,$(BUILD)/tests/integration/%,$(INTEG_SRC))

.PHONY: all check check-suite unit integration bench perf-check fuzz fuzz-run install demo asan tsan clean \
        format deps deps-if-missing
all: $(BINS) $(LIBRAMSTER)

# Debian packages: `make deps` installs what is missing (apt-get). Nothing
# else runs it, except `make check` and `make demo` on a machine that lacks a
# package (tools/deps.sh --check is a dpkg query, no network, no root).
deps:
	@tools/deps.sh
deps-if-missing:
	@tools/deps.sh --check >/dev/null || tools/deps.sh

# ---- generated protobuf-c code ----------------------------------------------
$(BUILD)/gen/proto/%.pb-c.c $(BUILD)/gen/proto/%.pb-c.h: proto/%.proto
	@mkdir -p $(BUILD)/gen
	protoc-c --c_out=$(BUILD)/gen $<

# every object may include a generated header
$(BUILD)/obj/%.o: %.c | $(PROTO_H)
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_CPPFLAGS) $(FINAL_CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_CPPFLAGS) $(FINAL_CFLAGS) -Wno-missing-prototypes -MMD -MP -c -o $@ $<

# ---- libraries ---------------------------------------------------------------
$(BUILD)/lib/libtier.a: $(TIER_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@; ar rcs $@ $^
$(BUILD)/lib/libwire.a: $(WIRE_OBJ) $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@; ar rcs $@ $^
$(BUILD)/lib/libnode.a: $(NODE_OBJ) $(TRANS_OBJ) $(COMMON_OBJ) tools/check-layout.sh
	@mkdir -p $(dir $@)
	@tools/check-layout.sh
	rm -f $@; ar rcs $@ $(filter %.o,$^)
$(BUILD)/lib/libramster.a: $(LIB_OBJ) $(LIBWIRE_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@; ar rcs $@ $^
$(BUILD)/lib/libramster.so: $(LIB_OBJ) $(LIBWIRE_OBJ) lib/ramster.map
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libramster.so.0 -Wl,--version-script=lib/ramster.map $(FINAL_LDFLAGS) \
	  -o $@ $(LIB_OBJ) $(LIBWIRE_OBJ) $(LIBRAMSTER_LIBS)
	ln -sf libramster.so $(BUILD)/lib/libramster.so.0

# ramster-run's LD_PRELOAD shim: the library's objects again, exporting only what it interposes
$(BUILD)/lib/libramster-preload.so: $(call obj,tools/ramster-preload.c) $(LIB_OBJ) $(LIBWIRE_OBJ) tools/ramster-preload.map
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,--version-script=tools/ramster-preload.map $(FINAL_LDFLAGS) \
	  -o $@ $(call obj,tools/ramster-preload.c) $(LIB_OBJ) $(LIBWIRE_OBJ) $(LIBRAMSTER_LIBS) -ldl

# ---- programs ----------------------------------------------------------------
$(BUILD)/bin/ramsterd: $(call obj,node/main.c) $(BUILD)/lib/libnode.a $(BUILD)/lib/libtier.a $(BUILD)/lib/libwire.a
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(NODE_LIBS) $(TIER_LIBS) $(WIRE_LIBS)
$(BUILD)/bin/ramsterctl: $(call obj,tools/ramsterctl.c) $(PROGRESS_OBJ) $(BUILD)/lib/libramster.a
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(WIRE_LIBS) $(JSON_LIBS)
$(BUILD)/bin/ramster-bench: $(call obj,tools/ramster-bench.c) $(PAGEGEN_OBJ) $(JOUT_OBJ) $(PROGRESS_OBJ) $(FIGURES_OBJ) $(BUILD)/lib/libramster.a $(BUILD)/lib/libtier.a
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(TIER_LIBS) $(WIRE_LIBS) $(JSON_LIBS)
# ramster-netbench: tools/netbench/, one file a noun (tools/netbench/netbench.h)
NETBENCH_OBJ := $(call obj,$(wildcard tools/netbench/*.c))
$(BUILD)/bin/ramster-netbench: $(NETBENCH_OBJ) $(PAGEGEN_OBJ) $(JOUT_OBJ) $(FIGURES_OBJ) $(BUILD)/lib/libramster.a
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(WIRE_LIBS) $(JSON_LIBS)
$(BUILD)/bin/ramster-run: $(call obj,tools/ramster-run.c) $(BUILD)/lib/libramster.a
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(LIBRAMSTER_LIBS)
# ramster-drill: tools/drill/, one file a job (tools/drill/drill.h)
DRILL_OBJ := $(call obj,$(wildcard tools/drill/*.c))
$(BUILD)/bin/ramster-drill: $(DRILL_OBJ) $(JOUT_OBJ) $(PROGRESS_OBJ) $(FIGURES_OBJ) $(BUILD)/lib/libramster.a
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(WIRE_LIBS) $(JSON_LIBS)
# the test daemon: ramsterd with the lying holder (test_holder)
$(BUILD)/tests/ramsterd-lie: $(call obj,node/main.c) $(call obj,node/remote/holder_lie.c) $(BUILD)/lib/libnode.a $(BUILD)/lib/libtier.a $(BUILD)/lib/libwire.a
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(NODE_LIBS) $(TIER_LIBS) $(WIRE_LIBS)

# ---- tests -------------------------------------------------------------------
$(BUILD)/tests/unit/%: $(call obj,tests/unit/%.c) $(BUILD)/lib/libnode.a $(BUILD)/lib/libtier.a $(BUILD)/lib/libwire.a
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(NODE_LIBS) $(TIER_LIBS) $(WIRE_LIBS) $(TEST_LIBS)
# the cases every pageframe allocator passes, over struct zalloc_ops (not a test of its own)
$(BUILD)/tests/unit/test_zbud $(BUILD)/tests/unit/test_zdense: $(call obj,tests/unit/zalloc_suite.c)
# test_million compresses its pages as the node would (liblzo2)
$(BUILD)/tests/integration/test_million: INTEG_LIBS = $(TIER_LIBS)
# every integration test: the harness (one daemon) and the collective (several)
$(BUILD)/tests/integration/%: $(call obj,tests/integration/%.c) $(call obj,tests/integration/harness.c) \
  $(call obj,tests/integration/collective.c) $(PAGEGEN_OBJ) $(BUILD)/lib/libramster.a
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(INTEG_LIBS) $(LIBRAMSTER_LIBS) $(TEST_LIBS)
.SECONDARY:

unit: $(UNIT_BIN)
	@tests/run-tests $(UNIT_BIN)

integration: all $(INTEG_BIN) $(BUILD)/tests/ramsterd-lie $(BUILD)/tools/far-workload $(BUILD)/tools/uffd-floor
	@RAMSTER_BIN=$(BUILD)/bin tests/run-tests $(INTEG_BIN) $(wildcard tests/integration/test_*.sh)

# make check also runs the VM tests (tests/vm/, docs/vm.md) when qemu can run
# here; check-vm.sh says "check-vm: SKIP: why" when it cannot. CHECK_VM=0 leaves
# them out (make asan does: the guest runs the plain build's binaries).
CHECK_VM ?= 1
check: deps-if-missing
	@$(MAKE) --no-print-directory check-suite
check-suite: all unit integration
ifneq ($(CHECK_VM),0)
	@$(MAKE) --no-print-directory BUILD=$(BUILD) check-vm
else
	@echo "check: VM tests left out (CHECK_VM=0)"
endif

# ---- sanitizers: the whole suite again, in its own build tree ---------------
asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -g" \
	  SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	  RAMSTER_TEST_SLOW=$${RAMSTER_TEST_SLOW:-2} RAMSTER_DRILLS=$${RAMSTER_DRILLS:-quick} CHECK_VM=0 check

# ThreadSanitizer: the unit and integration suites, in build-tsan/ (the
# daemons and drills the tests start are the TSan build's too). Every report
# of every process goes to build-tsan/tsan-reports/tsan.PID: a process that
# raced exits 66 (a daemon then fails its test's clean stop), and any report
# at all fails the target, also one from a daemon whose exit nobody checks.
# tests/tsan.supp lists the library false positives, each with its reason.
# RAMSTER_TEST_SLOW=3: the collective's tests and the drills stretch their
# heartbeats and dead_after_ms threefold (TSan runs 5-15x slower; at the
# drills' 1 s a live peer was once declared dead on a loaded machine).
TSAN_REPORTS := build-tsan/tsan-reports
tsan:
	@rm -rf $(TSAN_REPORTS); mkdir -p $(TSAN_REPORTS)
	@TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp log_path=$(CURDIR)/$(TSAN_REPORTS)/tsan \
	  second_deadlock_stack=1 $${TSAN_OPTIONS:-}" RAMSTER_TEST_SLOW=$${RAMSTER_TEST_SLOW:-3} \
	  RAMSTER_DRILLS=$${RAMSTER_DRILLS:-quick} \
	  $(MAKE) BUILD=build-tsan OPT="-O1 -g" SAN="-fsanitize=thread" CHECK_VM=0 check; rc=$$?; \
	if ls $(TSAN_REPORTS)/tsan.* >/dev/null 2>&1; then \
	  cat $(TSAN_REPORTS)/tsan.*; \
	  echo "tsan: $$(ls $(TSAN_REPORTS) | wc -l) process(es) reported (above; $(TSAN_REPORTS)/)"; \
	  exit 1; \
	fi; \
	[ $$rc -eq 0 ] && echo "tsan: no reports" ; exit $$rc

# ---- fuzzing (clang libFuzzer) ----------------------------------------------
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(patsubst tests/fuzz/%.c,build-fuzz/%,$(FUZZ_SRC))
FUZZ_TIME ?= 60
fuzz:
	$(MAKE) BUILD=build-fuzz CC=clang OPT="-O1 -g" \
	  SAN="-fsanitize=fuzzer-no-link,address,undefined" fuzz-bins
fuzz-bins: $(FUZZ_BIN)
build-fuzz/fuzz_%: $(call obj,tests/fuzz/fuzz_%.c) $(BUILD)/lib/libwire.a $(BUILD)/lib/libnode.a $(BUILD)/lib/libtier.a
	$(CC) $(FINAL_LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(BUILD)/lib/libwire.a $(NODE_LIBS) $(TIER_LIBS) $(WIRE_LIBS)
# one target a fuzzer, so that `make -j2 fuzz-run` runs two at once (each is
# one process on one core); the output of each comes in one piece at its end
FUZZ_RUNS := $(patsubst build-fuzz/%,fuzz-run-%,$(FUZZ_BIN))
.PHONY: $(FUZZ_RUNS)
fuzz-run: $(FUZZ_RUNS)
$(FUZZ_RUNS): fuzz-run-%: fuzz
	@mkdir -p build-fuzz/corpus/$*
	@build-fuzz/$* -max_total_time=$(FUZZ_TIME) -print_final_stats=1 build-fuzz/corpus/$* \
	  tests/fuzz/seeds/$* 2>build-fuzz/$*.log || { tail -50 build-fuzz/$*.log; exit 1; }
	@echo "fuzz: $* for $(FUZZ_TIME)s:" \
	  $$(grep -E 'stat::number_of_executed_units|Done' build-fuzz/$*.log | tail -2)

# ---- benchmarks ---------------------------------------------------------------
bench: all $(BUILD)/tools/far-workload $(BUILD)/tools/uffd-floor
	tools/bench.sh $(BUILD)/bin

# a guard against CPU and latency regressions (issue 20): idle cost and a short
# collective benchmark's ratios, with loose limits (tools/perf-check.sh)
perf-check: all
	tools/perf-check.sh $(BUILD)/bin

# bench-far.sh's workload and the userfaultfd floor beside it (not installed)
$(BUILD)/tools/far-workload: $(call obj,tools/far-workload.c)
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^

$(BUILD)/tools/uffd-floor: $(call obj,tools/uffd-floor.c)
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ -lpthread

# ---- demo: the README's first command ----------------------------------------
demo: deps-if-missing
	@$(MAKE) --no-print-directory all
	tools/demo.sh $(BUILD)/bin

# ---- man pages (scdoc sources in man/) ---------------------------------------
MAN_SRC   := $(wildcard man/*.scd)
MAN_PAGES := $(patsubst man/%.scd,$(BUILD)/man/%,$(MAN_SRC))
.PHONY: man uninstall
all: $(MAN_PAGES)
man: $(MAN_PAGES)
$(BUILD)/man/%: man/%.scd
	@mkdir -p $(dir $@)
	@command -v scdoc >/dev/null || { echo "scdoc missing: make deps installs it" >&2; exit 1; }
	scdoc < $< > $@.tmp && mv $@.tmp $@
# ramster.conf(5)'s key lists are the daemon's table of keys (node/config_keys.c):
# `ramsterd --help-config=scd` spliced into the page's "; @config-keys SECTION"
# lines, so the page cannot miss a key or give another default than the parser
$(BUILD)/man/ramster.conf.5: man/ramster.conf.5.scd $(BUILD)/bin/ramsterd tools/config-man.sh
	@mkdir -p $(dir $@)
	@command -v scdoc >/dev/null || { echo "scdoc missing: make deps installs it" >&2; exit 1; }
	tools/config-man.sh $(BUILD)/bin/ramsterd $< > $@.scd
	scdoc < $@.scd > $@.tmp && mv $@.tmp $@ && rm -f $@.scd

# ---- install -----------------------------------------------------------------
# Every file install puts is in INSTALLED (under $(DESTDIR)$(PREFIX)), so
# uninstall removes exactly those, and no directory (others may share them).
UNITDIR     := lib/systemd/system
UNITS       := ramsterd.service ramsterd@.service
INSTALLED = $(addprefix bin/,$(notdir $(BINS))) lib/libramster.a lib/libramster.so.0 \
            lib/libramster.so lib/libramster-preload.so include/ramster.h lib/pkgconfig/ramster.pc \
            $(addprefix $(UNITDIR)/,$(UNITS)) lib/sysusers.d/ramster.conf \
            $(foreach m,$(notdir $(MAN_PAGES)),share/man/man$(subst .,,$(suffix $(m)))/$(m))
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include
	install -m 755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(BUILD)/lib/libramster.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/lib/libramster.so $(DESTDIR)$(PREFIX)/lib/libramster.so.0
	install -m 755 $(BUILD)/lib/libramster-preload.so $(DESTDIR)$(PREFIX)/lib/
	ln -sf libramster.so.0 $(DESTDIR)$(PREFIX)/lib/libramster.so
	install -m 644 include/ramster.h $(DESTDIR)$(PREFIX)/include/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' ramster.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/ramster.pc
	install -d $(DESTDIR)$(PREFIX)/$(UNITDIR) $(DESTDIR)$(PREFIX)/lib/sysusers.d
	for u in $(UNITS); do sed -e 's|@PREFIX@|$(PREFIX)|g' systemd/$$u.in \
	  > $(DESTDIR)$(PREFIX)/$(UNITDIR)/$$u && chmod 644 $(DESTDIR)$(PREFIX)/$(UNITDIR)/$$u || exit 1; done
	install -m 644 systemd/ramster.sysusers $(DESTDIR)$(PREFIX)/lib/sysusers.d/ramster.conf
	for m in $(MAN_PAGES); do s=$${m##*.}; install -d $(DESTDIR)$(PREFIX)/share/man/man$$s && \
	  install -m 644 $$m $(DESTDIR)$(PREFIX)/share/man/man$$s/ || exit 1; done

uninstall:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/,$(INSTALLED))

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build build-asan build-tsan build-fuzz

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# ---- VM tests: soft-RoCE and kernel NBD in a qemu guest (tests/vm/, docs/vm.md)
.PHONY: check-vm
check-vm: all
	@tools/deps-vm.sh || echo "check-vm: tools/deps-vm.sh failed; trying with what is installed"
	@tests/vm/check-vm.sh

# the kernel-swap test's workload, built for the guest
$(BUILD)/tests/vm/memhog: tests/vm/memhog.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Wextra -o $@ $<
# the erasure-coding test's client (test-ec-rdma.sh): one pool, commands on stdin
$(BUILD)/tests/vm/ec-pages: $(call obj,tests/vm/ec-pages.c) $(PAGEGEN_OBJ) $(BUILD)/lib/libramster.a
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(LIBRAMSTER_LIBS)
check-vm: $(BUILD)/tests/vm/memhog $(BUILD)/tests/vm/ec-pages $(INTEG_BIN) $(UNIT_BIN)
