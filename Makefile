# ramster - GNU Makefile. `make` builds everything into $(BUILD); `make check`
# runs the unit and integration tests; `make asan check` the same under
# ASan+UBSan (in build-asan/); `make bench`, `make fuzz`, `make demo`,
# `make install PREFIX=DIR`. See README.md.

BUILD   ?= build
PREFIX  ?= /usr/local
CC      ?= cc
SAN     ?=
OPT     ?= -O2 -g
WARN    := -Wall -Wextra -Wshadow -Wformat=2 -Wstrict-prototypes -Wmissing-prototypes \
           -Wwrite-strings -Wundef -Wno-unused-parameter
WERROR  ?=
CPPFLAGS += -I. -Iinclude -I$(BUILD)/gen -D_GNU_SOURCE
CFLAGS  ?= $(OPT)
CFLAGS  += -std=gnu11 -fPIC -pthread $(WARN) $(WERROR) $(SAN)
LDFLAGS += -pthread $(SAN)

# pkg-config runs on first use (after `deps` installed the packages), once.
PKGS    := libprotobuf-c libsodium inih
PKG_CFLAGS = $(eval PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null))$(PKG_CFLAGS)
PKG_LIBS   = $(eval PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null))$(PKG_LIBS)
CPPFLAGS += $(PKG_CFLAGS)
LIBS    = -lev -llzo2 -llz4 $(PKG_LIBS) -lm
TEST_LIBS = -lcmocka
# the node's Prometheus endpoint (node/metrics.c) and the tools' JSON (jansson)
NODE_LIBS = -lmicrohttpd
JSON_LIBS = -ljansson
# RDMA=1 (default): transport/rdma.c with rdma_cm + verbs; RDMA=0 builds it as
# stubs (transport_rdma_new fails with ENOTSUP) and links no RDMA library.
RDMA    ?= 1
ifeq ($(RDMA),1)
CPPFLAGS += -DRAMSTER_RDMA=1
RDMA_LIBS = -lrdmacm -libverbs
else
CPPFLAGS += -DRAMSTER_RDMA=0
RDMA_LIBS =
endif
# libsystemd: sd_notify and the watchdog (node/notify.c), the journal (node/log.c)
SYSTEMD_LIBS = -lsystemd

VERSION := 0.1.0
CPPFLAGS += -DRAMSTER_VERSION=\"$(VERSION)\"

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
NODE_SRC   := $(filter-out node/main.c,$(wildcard node/*.c))
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
# the client library needs only the client protocol
LIBWIRE_OBJ := $(call obj,proto/wire.c $(BUILD)/gen/proto/client.pb-c.c) $(COMMON_OBJ)

BINS := $(BUILD)/bin/ramsterd $(BUILD)/bin/ramsterctl $(BUILD)/bin/ramster-bench \
        $(BUILD)/bin/ramster-netbench $(BUILD)/bin/ramster-drill
LIBRAMSTER := $(BUILD)/lib/libramster.so $(BUILD)/lib/libramster.a

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(UNIT_SRC))
INTEG_SRC := $(wildcard tests/integration/test_*.c)
INTEG_BIN := $(patsubst tests/integration/%.c,$(BUILD)/tests/integration/%,$(INTEG_SRC))

.PHONY: all check unit integration bench fuzz fuzz-run install demo asan clean format deps
all: $(BINS) $(LIBRAMSTER)

# Debian packages: installed when missing (apt-get), checked on every build.
deps:
	@tools/deps.sh

# ---- generated protobuf-c code ----------------------------------------------
$(BUILD)/gen/proto/%.pb-c.c $(BUILD)/gen/proto/%.pb-c.h: proto/%.proto | deps
	@mkdir -p $(BUILD)/gen
	protoc-c --c_out=$(BUILD)/gen $<

# every object may include a generated header
$(BUILD)/obj/%.o: %.c | deps $(PROTO_H)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Wno-missing-prototypes -MMD -MP -c -o $@ $<

# ---- libraries ---------------------------------------------------------------
$(BUILD)/lib/libtier.a: $(TIER_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@; ar rcs $@ $^
$(BUILD)/lib/libwire.a: $(WIRE_OBJ) $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@; ar rcs $@ $^
$(BUILD)/lib/libnode.a: $(NODE_OBJ) $(TRANS_OBJ) $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@; ar rcs $@ $^
$(BUILD)/lib/libramster.a: $(LIB_OBJ) $(LIBWIRE_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@; ar rcs $@ $^
$(BUILD)/lib/libramster.so: $(LIB_OBJ) $(LIBWIRE_OBJ) lib/ramster.map
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libramster.so.0 -Wl,--version-script=lib/ramster.map $(LDFLAGS) \
	  -o $@ $(LIB_OBJ) $(LIBWIRE_OBJ) $(PKG_LIBS)
	ln -sf libramster.so $(BUILD)/lib/libramster.so.0

# ---- programs ----------------------------------------------------------------
$(BUILD)/bin/ramsterd: $(call obj,node/main.c) $(BUILD)/lib/libnode.a $(BUILD)/lib/libtier.a $(BUILD)/lib/libwire.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS) $(NODE_LIBS) $(RDMA_LIBS) $(SYSTEMD_LIBS)
$(BUILD)/bin/ramsterctl: $(call obj,tools/ramsterctl.c) $(PROGRESS_OBJ) $(BUILD)/lib/libramster.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS) $(JSON_LIBS)
$(BUILD)/bin/ramster-bench: $(call obj,tools/ramster-bench.c) $(PAGEGEN_OBJ) $(JOUT_OBJ) $(PROGRESS_OBJ) $(BUILD)/lib/libramster.a $(BUILD)/lib/libtier.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS) $(JSON_LIBS)
$(BUILD)/bin/ramster-netbench: $(call obj,tools/ramster-netbench.c) $(PAGEGEN_OBJ) $(JOUT_OBJ) $(BUILD)/lib/libramster.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS) $(JSON_LIBS)
$(BUILD)/bin/ramster-drill: $(call obj,tools/ramster-drill.c) $(JOUT_OBJ) $(PROGRESS_OBJ) $(BUILD)/lib/libramster.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS) $(JSON_LIBS)

# ---- tests -------------------------------------------------------------------
$(BUILD)/tests/unit/%: $(call obj,tests/unit/%.c) $(BUILD)/lib/libnode.a $(BUILD)/lib/libtier.a $(BUILD)/lib/libwire.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS) $(NODE_LIBS) $(RDMA_LIBS) $(SYSTEMD_LIBS) $(TEST_LIBS)
$(BUILD)/tests/integration/%: $(call obj,tests/integration/%.c) $(call obj,tests/integration/harness.c) $(PAGEGEN_OBJ) $(BUILD)/lib/libramster.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS) $(TEST_LIBS)
.SECONDARY:

unit: $(UNIT_BIN)
	@tests/run-tests $(UNIT_BIN)

integration: all $(INTEG_BIN)
	@RAMSTER_BIN=$(BUILD)/bin tests/run-tests $(INTEG_BIN) $(wildcard tests/integration/test_*.sh)

# make check also runs the VM tests (tests/vm/, docs/vm.md) when qemu can run
# here; check-vm.sh says "check-vm: SKIP: why" when it cannot. CHECK_VM=0 leaves
# them out (make asan does: the guest runs the plain build's binaries).
CHECK_VM ?= 1
check: all unit integration
ifneq ($(CHECK_VM),0)
	@$(MAKE) --no-print-directory BUILD=$(BUILD) check-vm
else
	@echo "check: VM tests left out (CHECK_VM=0)"
endif

# ---- sanitizers: the whole suite again, in its own build tree ---------------
asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -g" \
	  SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	  RAMSTER_SLOW=$${RAMSTER_SLOW:-0} CHECK_VM=0 check

# ---- fuzzing (clang libFuzzer) ----------------------------------------------
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(patsubst tests/fuzz/%.c,build-fuzz/%,$(FUZZ_SRC))
FUZZ_TIME ?= 60
fuzz:
	$(MAKE) BUILD=build-fuzz CC=clang OPT="-O1 -g" \
	  SAN="-fsanitize=fuzzer-no-link,address,undefined" fuzz-bins
fuzz-bins: $(FUZZ_BIN)
build-fuzz/fuzz_%: $(call obj,tests/fuzz/fuzz_%.c) $(BUILD)/lib/libwire.a $(BUILD)/lib/libnode.a $(BUILD)/lib/libtier.a
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(LIBS) $(NODE_LIBS) $(RDMA_LIBS) $(SYSTEMD_LIBS)
fuzz-run: fuzz
	@for f in $(FUZZ_BIN); do n=$$(basename $$f); mkdir -p build-fuzz/corpus/$$n; \
	  echo "fuzz: $$n for $(FUZZ_TIME)s"; \
	  $$f -max_total_time=$(FUZZ_TIME) -print_final_stats=1 build-fuzz/corpus/$$n tests/fuzz/seeds/$$n \
	    2>build-fuzz/$$n.log || { tail -50 build-fuzz/$$n.log; exit 1; }; \
	  grep -E 'stat::number_of_executed_units|Done' build-fuzz/$$n.log | tail -2; done

# ---- benchmarks ---------------------------------------------------------------
bench: all
	tools/bench.sh $(BUILD)/bin

# ---- demo: the README's first command ----------------------------------------
demo: all
	tools/demo.sh $(BUILD)/bin

# ---- man pages (scdoc sources in man/) ---------------------------------------
MAN_SRC   := $(wildcard man/*.scd)
MAN_PAGES := $(patsubst man/%.scd,$(BUILD)/man/%,$(MAN_SRC))
.PHONY: man uninstall
all: $(MAN_PAGES)
man: $(MAN_PAGES)
$(BUILD)/man/%: man/%.scd | deps
	@mkdir -p $(dir $@)
	scdoc < $< > $@.tmp && mv $@.tmp $@

# ---- install -----------------------------------------------------------------
# Every file install puts is in INSTALLED (under $(DESTDIR)$(PREFIX)), so
# uninstall removes exactly those, and no directory (others may share them).
UNITDIR     := lib/systemd/system
UNITS       := ramsterd.service ramsterd@.service
INSTALLED = $(addprefix bin/,$(notdir $(BINS))) lib/libramster.a lib/libramster.so.0 \
            lib/libramster.so include/ramster.h lib/pkgconfig/ramster.pc \
            $(addprefix $(UNITDIR)/,$(UNITS)) lib/sysusers.d/ramster.conf \
            $(foreach m,$(notdir $(MAN_PAGES)),share/man/man$(subst .,,$(suffix $(m)))/$(m))
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include
	install -m 755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(BUILD)/lib/libramster.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/lib/libramster.so $(DESTDIR)$(PREFIX)/lib/libramster.so.0
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
	rm -rf build build-asan build-fuzz

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
check-vm: $(BUILD)/tests/vm/memhog $(INTEG_BIN) $(UNIT_BIN)
