/*
 * controller.c - how much to lend, one tick at a time (elastic_int.h,
 * docs/elastic.md).
 *
 * In the manner of Meta's senpai (TMO): each tick compares the memory stall
 * of the last interval (PSI some, us per s) with the target and moves the
 * budget by a bounded step: above the target it shrinks by a tenth of itself
 * times how far above (at least ELASTIC_STEP_MIN, at most half); calm (below
 * half the target) for ELASTIC_CALM_TICKS ticks in a row it grows by a
 * sixteenth of max (at least ELASTIC_STEP_MIN); between the two it holds (the
 * hysteresis). Two hard lines come first: the budget never exceeds what the
 * host can spare above its reserve (held + avail - reserve), and when avail
 * is below the reserve the budget drops at once below what is held, by the
 * deficit: the pages given back make the room. Then [min, max], except that
 * the reserve wins over min.
 */
#include <string.h>

#include "node/elastic/elastic_int.h"

void elastic_ctl_init(struct elastic_ctl *c, const struct elastic_knobs *k)
{
	memset(c, 0, sizeof(*c));
	c->k = *k;
	c->budget = k->min;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

enum elastic_move elastic_ctl_tick(struct elastic_ctl *c, const struct elastic_sample *s)
{
	uint64_t stall = 0, cap, old = c->budget, b = c->budget, step;
	enum elastic_move mv = ELASTIC_HOLD;
	double ratio;

	c->ticks++;
	if (c->primed && s->stall_us >= c->last_stall && s->dt_s > 0)
		stall = s->stall_us - c->last_stall;
	c->pressure = c->primed && s->dt_s > 0 ? (double)stall / s->dt_s : 0;
	c->last_stall = s->stall_us;
	c->primed = true;

	/* the hard line: what the host can spare above its reserve */
	if (s->avail >= c->k.reserve)
		cap = s->held + (s->avail - c->k.reserve);
	else
		cap = s->held > c->k.reserve - s->avail ? s->held - (c->k.reserve - s->avail) : 0;

	ratio = c->k.target ? c->pressure / c->k.target : 0;
	if (old > cap) {
		/* memory taken from the host: give back at once, whatever the stall */
		b = cap;
		c->calm = 0;
		mv = ELASTIC_RESERVE;
	} else if (ratio > 1.0) {
		double f = 0.1 * ratio;

		if (f > 0.5)
			f = 0.5;
		step = max_u64(ELASTIC_STEP_MIN, (uint64_t)((double)b * f));
		b = b > step ? b - step : 0;
		c->calm = 0;
		mv = ELASTIC_SHRINK;
	} else if (ratio < 0.5) {
		if (++c->calm >= ELASTIC_CALM_TICKS) {
			step = max_u64(ELASTIC_STEP_MIN, c->k.max / 16);
			b += step;
			mv = ELASTIC_GROW;
		}
	} else {
		c->calm = 0;
	}
	if (b > cap)
		b = cap; /* growing stops at what the host can spare */
	b = min_u64(b, c->k.max);
	if (b < c->k.min && cap >= c->k.min)
		b = c->k.min; /* the floor, unless the reserve needs it */
	if (mv == ELASTIC_GROW && b <= old)
		mv = b == old ? ELASTIC_HOLD : ELASTIC_BOUND;
	else if (mv == ELASTIC_HOLD && b != old)
		mv = ELASTIC_BOUND;
	c->budget = b;
	switch (mv) {
	case ELASTIC_GROW:
		c->grows++;
		break;
	case ELASTIC_SHRINK:
		c->shrinks++;
		break;
	case ELASTIC_RESERVE:
		c->reserve_shrinks++;
		break;
	default:
		c->holds++;
	}
	return mv;
}
