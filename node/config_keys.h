/*
 * config_keys.h - the keys of the cluster file, one table row each
 * (config_keys.c): name, section, type and bounds, default, help, and what a
 * reload does with a change.
 *
 * The parse (config.c), the reload (reload.c), `ramsterd --help-config` and
 * the key lists of ramster.conf(5) (generated from --help-config=scd) all
 * read the rows, so a key is added in one place: its field in config.h and
 * its row. Rows are constant; nothing here has state.
 */
#ifndef RAMSTER_NODE_CONFIG_KEYS_H
#define RAMSTER_NODE_CONFIG_KEYS_H

#include <stdint.h>
#include <stdio.h>

#include "node/config.h"

/* The sections a key lives in, in the order the docs show them. */
enum config_sec {
	CONFIG_SEC_CLUSTER, /* [cluster]: base struct config */
	CONFIG_SEC_NODE,    /* [node NAME]: base struct config_node */
	CONFIG_SEC_EXPORT,  /* [export NAME]: base struct config_export */
	CONFIG_SEC_LIMITS,  /* [limits]: base struct config (the limits member) */
	CONFIG_SEC_USER,    /* [uid N], [user NAME], [group NAME]: base struct config_user */
	CONFIG_SECS,
};

/* How a value is written, checked and kept. */
enum config_type {
	CONFIG_U32,	 /* decimal digits, min..max; a uint32_t */
	CONFIG_U64,	 /* the same, a uint64_t */
	CONFIG_PERCENT,	 /* "N" or "N%", min..max; a uint32_t */
	CONFIG_BOOL,	 /* true/false/yes/no/1/0, any case; a bool */
	CONFIG_FRACTION, /* "N/M" of a page or a byte count 1..4096; a uint32_t in 1/1024ths */
	CONFIG_SIZE,	 /* bytes with K/M/G/T, a positive multiple of 4096; a uint64_t */
	CONFIG_ENUM,	 /* one of choices; its value kept in a field of size bytes */
	CONFIG_TEXT,	 /* 1..max bytes kept as written in char[size] */
	CONFIG_PATH,	 /* the same, a file or directory name */
	CONFIG_ADDRESS,	 /* HOST:PORT, checked and kept as written in char[size] */
	CONFIG_HOSTPORT, /* HOST:PORT kept split: char[size] host at off, uint16_t port at off2 */
};

/*
 * What a reload does when the new file changes the key (node/reload.c).
 * There is no "ignored": a change is either applied or named.
 */
enum config_reload {
	CONFIG_RELOAD_RESTART,	 /* named as needing a restart; left as it runs */
	CONFIG_RELOAD_APPLY,	 /* copied into what runs; the remote side's tunables follow */
	CONFIG_RELOAD_LOG_LEVEL, /* the log's level, unless --log-level was given */
	CONFIG_RELOAD_TLS_KEYS,	 /* the NBD TLS key files are read again (nbd_reload_tls) */
	CONFIG_RELOAD_USERS,	 /* every uid's record takes its rule again (users_set_rules) */
};

struct config_choice {
	const char *name;
	int value;
	bool alias; /* accepted, not listed ("warning" for warn) */
};

struct config_parse;

struct config_key {
	const char *name;
	enum config_sec sec;
	enum config_type type;
	size_t off;	   /* the field, from the section's base (above) */
	size_t size;	   /* the field's bytes: 1, 2, 4 or 8 for numbers, the buffer for text */
	size_t off2;	   /* CONFIG_HOSTPORT: the port */
	uint64_t min, max; /* numbers; text: max is the most bytes */
	const struct config_choice *choices; /* CONFIG_ENUM: ends with a NULL name */
	const char *def;     /* the default as the file would write it; NULL: zero/empty */
	const char *def_doc; /* the default as the docs say it, when def does not say it */
	const char *arg;     /* the value's name in the docs; NULL: the type's (N, PATH, ...) */
	const char *help;    /* one paragraph; `key` marks a name or a literal */
	enum config_reload reload;
	bool auto_ok; /* CONFIG_U64: "auto" is CONFIG_AUTO */
	/*
	 * More than the type can say (unique ids and addresses, the line of
	 * nbd_tls): called once the value is stored. @return 0, or -EINVAL
	 * after config_fail (the file is refused).
	 */
	int (*check)(struct config_parse *p, const struct config_key *k, const char *value);
};

#define CONFIG_KEYS_MAX 64 /* rows at most (the parse keeps a line per row) */

extern const struct config_key config_keys[];
extern const size_t config_keys_n;

/* @return the row of name in sec, or NULL. */
const struct config_key *config_key_find(enum config_sec sec, const char *name);

/* @return "cluster", "node", "export", "limits" or "user". */
const char *config_sec_name(enum config_sec sec);

/* @return the field of k in base (the section's struct, above). */
void *config_key_field(const struct config_key *k, void *base);
const void *config_key_cfield(const struct config_key *k, const void *base);

/* @return a number's, a bool's or an enum's value in base (not for text). */
uint64_t config_key_get(const struct config_key *k, const void *base);

/*
 * Parse value as k's type and bounds into base. @return 0, or -EINVAL with
 * why set to "KEY: problem" (the text every error of the file shows after
 * "FILE:LINE: "). k->check is not called (it needs the parse).
 */
int config_key_set(const struct config_key *k, void *base, const char *value, char *why,
		   size_t whylen);

/* Apply the defaults of sec's rows to base (zeroed by the caller). */
void config_key_defaults(enum config_sec sec, void *base);

/* "restart", "applies", ... : what a reload does, in words. */
const char *config_reload_text(enum config_reload r);

/*
 * Print every key to f: format "text" (or NULL), as `ramsterd --help-config`,
 * or "scd", the key lists of ramster.conf(5) in scdoc, each section's after a
 * comment line "; [SECTION]" (tools/config-man.sh splices them into the
 * page, config_help.c). @return 0, or -EINVAL for another format.
 */
int config_help_print(FILE *f, const char *format);

#endif /* RAMSTER_NODE_CONFIG_KEYS_H */
