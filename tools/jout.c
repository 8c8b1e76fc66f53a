/*
 * jout.c - the tools' JSON reports through jansson (jout.h).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include "tools/jout.h"

struct jout {
	json_t *o;
	bool oom;
};

struct jout *jout_new(void)
{
	static struct jout failed = {.o = NULL, .oom = true};
	struct jout *j = calloc(1, sizeof(*j));

	if (!j)
		return &failed;
	j->o = json_object();
	j->oom = !j->o;
	return j;
}

/* Set the key made of fmt/ap to v (stolen). */
static void __attribute__((format(printf, 3, 0)))
jout_set(struct jout *j, json_t *v, const char *fmt, va_list ap)
{
	char key[128];

	vsnprintf(key, sizeof(key), fmt, ap);
	if (j->oom || !v || json_object_set_new(j->o, key, v))
		j->oom = true;
}

#define JOUT_SETTER(name, type, make)                                                              \
	void name(struct jout *j, type v, const char *key, ...)                                    \
	{                                                                                          \
		va_list ap;                                                                        \
		va_start(ap, key);                                                                 \
		jout_set(j, make, key, ap);                                                        \
		va_end(ap);                                                                        \
	}

JOUT_SETTER(jout_uint, uint64_t, json_integer((json_int_t)v))
JOUT_SETTER(jout_real, double, isfinite(v) ? json_real(v) : json_null())
JOUT_SETTER(jout_round, double, isfinite(v) ? json_integer((json_int_t)(v < 0 ? v - 0.5 : v + 0.5)) /* no libm */ : json_null())
JOUT_SETTER(jout_str, const char *, json_string(v))
JOUT_SETTER(jout_bool, bool, json_boolean(v))

void jout_null(struct jout *j, const char *key, ...)
{
	va_list ap;

	va_start(ap, key);
	jout_set(j, json_null(), key, ap);
	va_end(ap);
}

int jout_print(struct jout *j)
{
	int rc = 0;

	if (j->oom) {
		fprintf(stderr, "JSON report: out of memory\n");
		rc = -ENOMEM;
	} else if (json_dumpf(j->o, stdout, JSON_COMPACT | JSON_REAL_PRECISION(10)) ||
		   putchar('\n') == EOF) {
		rc = -EIO;
	}
	fflush(stdout);
	if (j->o) {
		json_decref(j->o);
		free(j);
	}
	return rc;
}
