/*
 * test_elastic.c - the elastic controller with a made-up pressure source
 * (node/elastic/controller.c): its steps, bounds and hysteresis, the
 * reserve as a hard line; and the readers of PSI, meminfo and
 * /proc/self/cgroup text (node/elastic/psi.c).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "node/elastic/elastic_int.h"

#define MiB (1ull << 20)

static const struct elastic_knobs knobs = {
    .min = 0, .max = 1024 * MiB, .reserve = 256 * MiB, .target = 1000};

/* A source: stall grows by us_per_s each second; avail and held as given. */
struct fake {
	uint64_t stall;
};

static enum elastic_move step(struct elastic_ctl *c, struct fake *f, double us_per_s,
			      uint64_t avail, uint64_t held)
{
	struct elastic_sample s;

	f->stall += (uint64_t)us_per_s;
	s = (struct elastic_sample){f->stall, avail, held, 1.0};
	return elastic_ctl_tick(c, &s);
}

/* Calm with room: it grows only after ELASTIC_CALM_TICKS calm ticks, by max/16 a tick, up to max.
 */
static void test_grows_when_calm(void **state)
{
	struct elastic_ctl c;
	struct fake f = {0};
	unsigned i;

	(void)state;
	elastic_ctl_init(&c, &knobs);
	assert_int_equal(c.budget, 0);
	for (i = 0; i < ELASTIC_CALM_TICKS - 1; i++)
		assert_int_equal(step(&c, &f, 0, 8192 * MiB, 0), ELASTIC_HOLD);
	assert_int_equal(c.budget, 0);
	assert_int_equal(step(&c, &f, 0, 8192 * MiB, 0), ELASTIC_GROW);
	assert_int_equal(c.budget, 64 * MiB);
	for (i = 0; i < 100; i++)
		step(&c, &f, 0, 8192 * MiB, c.budget);
	assert_int_equal(c.budget, knobs.max); /* bounded */
	assert_true(c.grows >= 15);
}

/* Stall above the target: it shrinks in bounded steps (a tenth x how far above, at most half). */
static void test_shrinks_under_pressure(void **state)
{
	struct elastic_ctl c;
	struct fake f = {0};
	struct elastic_knobs k = knobs;
	uint64_t before;

	(void)state;
	k.min = 512 * MiB;
	elastic_ctl_init(&c, &k);
	step(&c, &f, 0, 8192 * MiB, 0); /* primes */
	before = c.budget;
	assert_int_equal(before, 512 * MiB);
	k.min = 0;
	c.k.min = 0;
	/* twice the target: a fifth */
	assert_int_equal(step(&c, &f, 2000, 8192 * MiB, 100 * MiB), ELASTIC_SHRINK);
	assert_int_equal(c.budget, before - before / 5);
	/* a hundred times: at most half */
	before = c.budget;
	assert_int_equal(step(&c, &f, 100000, 8192 * MiB, 100 * MiB), ELASTIC_SHRINK);
	assert_int_equal(c.budget, before - before / 2);
	/* a little above: at least the smallest step */
	before = c.budget;
	step(&c, &f, 1001, 8192 * MiB, 100 * MiB);
	assert_true(before - c.budget >= ELASTIC_STEP_MIN);
	assert_int_equal(c.shrinks, 3);
}

/* Between half the target and the target it holds, and a calm run starts over. */
static void test_hysteresis(void **state)
{
	struct elastic_ctl c;
	struct fake f = {0};
	unsigned i;

	(void)state;
	elastic_ctl_init(&c, &knobs);
	for (i = 0; i < ELASTIC_CALM_TICKS; i++)
		step(&c, &f, 0, 8192 * MiB, 0);
	assert_int_equal(c.budget, 64 * MiB);
	for (i = 0; i < 10; i++)
		assert_int_equal(step(&c, &f, 700, 8192 * MiB, 0), ELASTIC_HOLD);
	assert_int_equal(c.budget, 64 * MiB);
	/* calm again: ELASTIC_CALM_TICKS more before it grows */
	for (i = 0; i < ELASTIC_CALM_TICKS - 1; i++)
		assert_int_equal(step(&c, &f, 100, 8192 * MiB, 0), ELASTIC_HOLD);
	assert_int_equal(step(&c, &f, 100, 8192 * MiB, 0), ELASTIC_GROW);
}

/*
 * The reserve is a hard line: available memory below it takes the budget
 * below what is held, by the deficit, at once and whatever the stall; the
 * reserve wins over min.
 */
static void test_reserve_gives_back(void **state)
{
	struct elastic_ctl c;
	struct fake f = {0};
	struct elastic_knobs k = knobs;

	(void)state;
	k.min = 300 * MiB;
	elastic_ctl_init(&c, &k);
	step(&c, &f, 0, 8192 * MiB, 300 * MiB);
	assert_int_equal(c.budget, 300 * MiB);
	/* a hog leaves 100 MiB available, 156 below the reserve */
	assert_int_equal(step(&c, &f, 0, 100 * MiB, 300 * MiB), ELASTIC_RESERVE);
	assert_int_equal(c.budget, 300 * MiB - 156 * MiB);
	/* nothing available: everything goes */
	step(&c, &f, 0, 0, 300 * MiB);
	assert_int_equal(c.budget, 44 * MiB);
	step(&c, &f, 0, 0, 44 * MiB);
	assert_int_equal(c.budget, 0);
	assert_true(c.reserve_shrinks >= 2);
	/* the hog gone: min again at once, then growth when calm */
	step(&c, &f, 0, 8192 * MiB, 0);
	assert_int_equal(c.budget, 300 * MiB);
}

/* Growing stops at what the host can spare above its reserve. */
static void test_grow_capped_by_room(void **state)
{
	struct elastic_ctl c;
	struct fake f = {0};
	unsigned i;

	(void)state;
	elastic_ctl_init(&c, &knobs);
	for (i = 0; i < 40; i++)
		step(&c, &f, 0, 300 * MiB, 0);
	assert_int_equal(c.budget, 44 * MiB);
}

static void test_psi_parse(void **state)
{
	uint64_t us = 0, avail = 0, total = 0;
	char cg[64];

	(void)state;
	assert_int_equal(psi_parse_some("some avg10=0.00 avg60=0.00 avg300=0.00 total=123456\n"
					"full avg10=0.00 avg60=0.00 avg300=0.00 total=99\n",
					&us),
			 0);
	assert_int_equal(us, 123456);
	assert_int_equal(psi_parse_some("full avg10=0.00 total=5\n", &us), -EINVAL);
	assert_int_equal(psi_parse_some("some avg10=0.00 total=\n", &us), -EINVAL);
	assert_int_equal(psi_parse_some("some avg10=0.00 total=12x\n", &us), -EINVAL);
	assert_int_equal(psi_parse_meminfo("MemTotal:       24000000 kB\nMemFree:  1 kB\n"
					   "MemAvailable:   1000 kB\n",
					   &avail, &total),
			 0);
	assert_int_equal(avail, 1000 * 1024);
	assert_int_equal(total, 24000000ull * 1024);
	assert_int_equal(psi_parse_meminfo("MemTotal: 5 kB\n", &avail, &total), -EINVAL);
	assert_int_equal(
	    psi_parse_meminfo("MemAvailable: 99999999999999999999 kB\nMemTotal: 5 kB\n", &avail,
			      &total),
	    -EINVAL);
	assert_int_equal(psi_parse_cgroup("0::/system.slice/ramsterd.service\n", "0::", cg, sizeof(cg)),
			 0);
	assert_string_equal(cg, "/system.slice/ramsterd.service");
	assert_int_equal(psi_parse_cgroup("0::/\n", "0::", cg, sizeof(cg)), 0);
	assert_string_equal(cg, "/");
	assert_int_equal(psi_parse_cgroup("1:name=systemd:/x\n", "0::", cg, sizeof(cg)), -EINVAL);
	assert_int_equal(psi_parse_cgroup("9:pids:/\n4:memory:/process_api/x\n0::/\n", ":memory:", cg,
					  sizeof(cg)),
			 0);
	assert_string_equal(cg, "/process_api/x");
	assert_int_equal(psi_parse_cgroup("4:memory:/a\n", "0::", cg, sizeof(cg)), -EINVAL);
	assert_int_equal(psi_parse_cgroup("0::/a/../../etc\n", "0::", cg, sizeof(cg)), -EINVAL);
	assert_int_equal(
	    psi_parse_cgroup(
		"0::/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
		"0::", cg, sizeof(cg)),
	    -EINVAL);
}

/* psi_stall_step: the first reading only primes; then the larger delta a second. */
static void test_psi_stall(void **state)
{
	struct psi_stall st = {0};
	struct psi_reading rd = {.stall_us = 5000000, .cg_stall_us = 100};
	uint64_t us = 1;
	double dt = 1;

	(void)state;
	assert_true(psi_stall_step(&st, &rd, 1000000000ull, &us, &dt) == 0);
	assert_int_equal(us, 0);
	assert_true(dt == 0);
	/* the host stalls 300 us in half a second, the cgroup 200: the host's */
	rd.stall_us += 300;
	rd.cg_stall_us += 200;
	assert_true(psi_stall_step(&st, &rd, 1500000000ull, &us, &dt) == 600);
	assert_int_equal(us, 300);
	assert_true(dt == 0.5);
	/* the cgroup's larger delta wins, though its total is the smaller */
	rd.stall_us += 10;
	rd.cg_stall_us += 2000;
	assert_true(psi_stall_step(&st, &rd, 2500000000ull, NULL, NULL) == 2000);
	/* a total that went back counts 0 */
	rd.stall_us -= 50;
	rd.cg_stall_us += 7;
	assert_true(psi_stall_step(&st, &rd, 3500000000ull, &us, NULL) == 7);
	assert_int_equal(us, 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_grows_when_calm),
	    cmocka_unit_test(test_shrinks_under_pressure),
	    cmocka_unit_test(test_hysteresis),
	    cmocka_unit_test(test_reserve_gives_back),
	    cmocka_unit_test(test_grow_capped_by_room),
	    cmocka_unit_test(test_psi_parse),
	    cmocka_unit_test(test_psi_stall),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
