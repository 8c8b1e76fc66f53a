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
LIBS    = -lev -llzo2 $(PKG_LIBS) -lm
TEST_LIBS = -lcmocka
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

VERSION := 0.1.0
CPPFLAGS += -DRAMSTER_VERSION=\"$(VERSION)\"

# ---- sources -----------------------------------------------------------------
PROTOS     := $(wildcard proto/*.proto)
PROTO_C    := $(patsubst %.proto,$(BUILD)/gen/%.pb-c.c,$(PROTOS))
PROTO_H    := $(PROTO_C:.c=.h)
TIER_SRC   := $(wildcard tmem/*.c)
WIRE_SRC   := $(wildcard proto/*.c) $(PROTO_C)
TRANS_SRC  := $(wildcard transport/*.c)
NODE_SRC   := $(filter-out node/main.c,$(wildcard node/*.c))
LIB_SRC    := $(wildcard lib/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(patsubst $(BUILD)/%,%,$(1)))

TIER_OBJ   := $(call obj,$(TIER_SRC))
WIRE_OBJ   := $(call obj,$(WIRE_SRC))
TRANS_OBJ  := $(call obj,$(TRANS_SRC))
NODE_OBJ   := $(call obj,$(NODE_SRC))
LIB_OBJ    := $(call obj,$(LIB_SRC))
# the test and benchmark pages (tools/pagegen.c): linked into ramster-bench,
# ramster-netbench and every integration test; not a program of its own
PAGEGEN_OBJ := $(call obj,tools/pagegen.c)
# the client library needs only the client protocol
LIBWIRE_OBJ := $(call obj,proto/wire.c $(BUILD)/gen/proto/client.pb-c.c)

BINS := $(BUILD)/bin/ramsterd $(BUILD)/bin/ramsterctl $(BUILD)/bin/ramster-bench \
        $(BUILD)/bin/ramster-netbench $(BUILD)/bin/ramster-drill $(BUILD)/bin/ramster-run
LIBRAMSTER := $(BUILD)/lib/libramster.so $(BUILD)/lib/libramster.a $(BUILD)/lib/libramster-preload.so

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
$(BUILD)/lib/libwire.a: $(WIRE_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@; ar rcs $@ $^
$(BUILD)/lib/libnode.a: $(NODE_OBJ) $(TRANS_OBJ)
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

# ramster-run's LD_PRELOAD shim: the library's objects again, exporting only what it interposes
$(BUILD)/lib/libramster-preload.so: $(call obj,tools/ramster-preload.c) $(LIB_OBJ) $(LIBWIRE_OBJ) tools/ramster-preload.map
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,--version-script=tools/ramster-preload.map $(LDFLAGS) \
	  -o $@ $(call obj,tools/ramster-preload.c) $(LIB_OBJ) $(LIBWIRE_OBJ) $(PKG_LIBS) -ldl

# ---- programs ----------------------------------------------------------------
$(BUILD)/bin/ramsterd: $(call obj,node/main.c) $(BUILD)/lib/libnode.a $(BUILD)/lib/libtier.a $(BUILD)/lib/libwire.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS) $(RDMA_LIBS)
$(BUILD)/bin/ramsterctl: $(call obj,tools/ramsterctl.c) $(BUILD)/lib/libramster.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)
$(BUILD)/bin/ramster-bench: $(call obj,tools/ramster-bench.c) $(PAGEGEN_OBJ) $(BUILD)/lib/libramster.a $(BUILD)/lib/libtier.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)
$(BUILD)/bin/ramster-netbench: $(call obj,tools/ramster-netbench.c) $(PAGEGEN_OBJ) $(BUILD)/lib/libramster.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)
$(BUILD)/bin/ramster-run: $(call obj,tools/ramster-run.c) $(BUILD)/lib/libramster.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)
$(BUILD)/bin/ramster-drill: $(call obj,tools/ramster-drill.c) $(BUILD)/lib/libramster.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

# ---- tests -------------------------------------------------------------------
$(BUILD)/tests/unit/%: $(call obj,tests/unit/%.c) $(BUILD)/lib/libnode.a $(BUILD)/lib/libtier.a $(BUILD)/lib/libwire.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS) $(RDMA_LIBS) $(TEST_LIBS)
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
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(LIBS) $(RDMA_LIBS)
fuzz-run: fuzz
	@for f in $(FUZZ_BIN); do n=$$(basename $$f); mkdir -p build-fuzz/corpus/$$n; \
	  echo "fuzz: $$n for $(FUZZ_TIME)s"; \
	  $$f -max_total_time=$(FUZZ_TIME) -print_final_stats=1 build-fuzz/corpus/$$n tests/fuzz/seeds/$$n \
	    2>build-fuzz/$$n.log || { tail -50 build-fuzz/$$n.log; exit 1; }; \
	  grep -E 'stat::number_of_executed_units|Done' build-fuzz/$$n.log | tail -2; done

# ---- benchmarks ---------------------------------------------------------------
bench: all $(BUILD)/tools/far-workload
	tools/bench.sh $(BUILD)/bin

# bench-far.sh's workload (not installed)
$(BUILD)/tools/far-workload: $(call obj,tools/far-workload.c)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^

# ---- demo: the README's first command ----------------------------------------
demo: all
	tools/demo.sh $(BUILD)/bin

# ---- install -----------------------------------------------------------------
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
