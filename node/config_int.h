/*
 * config_int.h - the state of one parse of the cluster file, shared by
 * config.c (lines and sections), config_keys.c (the checks a row cannot
 * say) and config_check.c (the whole-file rules). Nothing else includes it
 * (tools/check-layout.sh) but the unit tests.
 *
 * Errors: every problem goes through config_fail_at, which keeps the one of
 * the lowest line; the parse goes on so that the earliest line wins.
 */
#ifndef RAMSTER_NODE_CONFIG_INT_H
#define RAMSTER_NODE_CONFIG_INT_H

#include <stdio.h>

#include "node/config.h"
#include "node/config_keys.h"

#define CONFIG_SEC_NONE (-1) /* before the first section header */
#define CONFIG_SEC_BAD	(-2) /* in a section whose header was refused: its keys are ignored */

struct config_parse {
	struct config *c;
	const char *path;
	FILE *f;
	char *buf; /* getline's buffer */
	size_t cap;
	int lineno;		   /* the physical line inih is on */
	int sec;		   /* enum config_sec, CONFIG_SEC_NONE or CONFIG_SEC_BAD */
	struct config_node *node;  /* CONFIG_SEC_NODE */
	struct config_export *exp; /* CONFIG_SEC_EXPORT */
	struct config_user *user;  /* CONFIG_SEC_USER */
	int cluster_line, limits_line;
	/*
	 * The line of each row's key in the current section, 0 while unset:
	 * a second one is a duplicate. [cluster] and [limits] come once, so
	 * their lines stay for the whole-file rules (config_key_line).
	 */
	int key_line[CONFIG_KEYS_MAX];
	int err_line; /* 0: no error yet */
	char err[CONFIG_ERR_MAX];
};

/* Keep the problem with the lowest line number. @return -EINVAL. */
int config_fail_at(struct config_parse *p, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define config_fail(p, ...) config_fail_at((p), (p)->lineno, __VA_ARGS__)

/* Decimal digits only: no sign, no space, no junk. @return 0, or -EINVAL. */
int config_parse_u64(const char *s, uint64_t *out);

/* @return the line of sec's key name in the file (the last section's), 0 if unset. */
int config_key_line(const struct config_parse *p, enum config_sec sec, const char *name);

/* The rules across keys and sections, once every line parsed (config_check.c). */
void config_check(struct config_parse *p);

#endif /* RAMSTER_NODE_CONFIG_INT_H */
