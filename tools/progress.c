/*
 * progress.c - in-place progress on a terminal, plain lines elsewhere (progress.h).
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/progress.h"

#define PROGRESS_TTY_S 0.1
#define PROGRESS_BAR   24

static double progress_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void progress_start(struct progress *p, FILE *f, const char *what, uint64_t total)
{
	const char *env = getenv("RAMSTER_PROGRESS");

	memset(p, 0, sizeof(*p));
	p->f = f;
	snprintf(p->what, sizeof(p->what), "%s", what);
	p->total = total;
	p->start = progress_now();
	p->last = -1e9;
	if (env && !strcmp(env, "off"))
		p->mode = 0;
	else if (env && !strcmp(env, "plain"))
		p->mode = 1;
	else if (env && !strcmp(env, "tty"))
		p->mode = 2;
	else
		p->mode = isatty(fileno(f)) ? 2 : 1;
}

bool progress_tty(const struct progress *p)
{
	return p->mode == 2;
}

static void __attribute__((format(printf, 4, 0)))
progress_draw(struct progress *p, uint64_t done, bool end, const char *fmt, va_list ap)
{
	double t = progress_now(), pct = 0;
	char detail[160] = "";
	int i, fill;

	if (!p->mode)
		return;
	if (!end && t - p->last < (p->mode == 2 ? PROGRESS_TTY_S : PROGRESS_PLAIN_S))
		return;
	p->last = t;
	if (fmt)
		vsnprintf(detail, sizeof(detail), fmt, ap);
	if (p->total)
		pct = 100.0 * (double)(done > p->total ? p->total : done) / (double)p->total;
	if (p->mode == 2) {
		fprintf(p->f, "\r\033[K%s ", p->what);
		if (p->total) {
			fill = (int)(pct / 100.0 * PROGRESS_BAR + 0.5);
			fputc('[', p->f);
			for (i = 0; i < PROGRESS_BAR; i++)
				fputc(i < fill ? '#' : '.', p->f);
			fprintf(p->f, "] %3.0f%% ", pct);
		}
		fprintf(p->f, "%llu", (unsigned long long)done);
		if (p->total)
			fprintf(p->f, "/%llu", (unsigned long long)p->total);
		fprintf(p->f, "%s%s %.1fs", detail[0] ? " " : "", detail, t - p->start);
		if (end)
			fputc('\n', p->f);
	} else {
		fprintf(p->f, "%s: %llu", p->what, (unsigned long long)done);
		if (p->total)
			fprintf(p->f, "/%llu (%.0f%%)", (unsigned long long)p->total, pct);
		fprintf(p->f, "%s%s after %.1fs%s\n", detail[0] ? ", " : "", detail, t - p->start,
			end ? ", done" : "");
	}
	p->drawn = true;
	fflush(p->f);
}

void progress_set(struct progress *p, uint64_t done, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	progress_draw(p, done, false, fmt, ap);
	va_end(ap);
}

void progress_end(struct progress *p, uint64_t done, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	progress_draw(p, done, true, fmt, ap);
	va_end(ap);
}
