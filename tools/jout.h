/*
 * jout.h - the tools' JSON reports, built with jansson: one flat object of
 * named figures, printed on one line (ramster-bench, ramster-netbench,
 * ramster-drill; the bench scripts read them with jq).
 *
 * Setters take a printf-style key. A figure that is not finite (a ratio over
 * zero) is null, and so is one marked absent; an allocation failure is
 * remembered and reported by jout_print, never half-printed.
 */
#ifndef RAMSTER_TOOLS_JOUT_H
#define RAMSTER_TOOLS_JOUT_H

#include <stdbool.h>
#include <stdint.h>

struct jout;

/* @return a new empty report (never NULL: out of memory is reported at print). */
struct jout *jout_new(void);

void jout_uint(struct jout *j, uint64_t v, const char *key, ...)
    __attribute__((format(printf, 3, 4)));
/* A number (null when not finite). */
void jout_real(struct jout *j, double v, const char *key, ...)
    __attribute__((format(printf, 3, 4)));
/* A number rounded to an integer (null when not finite). */
void jout_round(struct jout *j, double v, const char *key, ...)
    __attribute__((format(printf, 3, 4)));
void jout_str(struct jout *j, const char *s, const char *key, ...)
    __attribute__((format(printf, 3, 4)));
void jout_bool(struct jout *j, bool b, const char *key, ...) __attribute__((format(printf, 3, 4)));
void jout_null(struct jout *j, const char *key, ...) __attribute__((format(printf, 2, 3)));

/* Print the report on one line of stdout and free it. @return 0, or -ENOMEM / -EIO. */
int jout_print(struct jout *j);

#endif /* RAMSTER_TOOLS_JOUT_H */
