/*
 * config_help.c - the keys of the cluster file as words: `ramsterd
 * --help-config` (text) and the key lists of ramster.conf(5) (scdoc), both
 * printed from the rows of config_keys.c so that neither can miss a key or
 * tell another default or bound than the parse applies.
 *
 * Help texts mark names and literals with `backquotes`: kept in the text,
 * bold in the man page.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "node/config_keys.h"

/* The sections as the docs name them, and what each is. */
static const char *const help_titles[CONFIG_SECS][2] = {
    [CONFIG_SEC_CLUSTER] = {"[cluster]", "settings of the collective, at most one section"},
    [CONFIG_SEC_NODE] = {"[node NAME]", "one section per node"},
    [CONFIG_SEC_EXPORT] = {"[export NAME]", "an NBD block device"},
    [CONFIG_SEC_LIMITS] = {"[limits]", "the node's bounds on its clients, at most one section"},
    [CONFIG_SEC_USER] = {"[uid N], [user NAME], [group NAME]",
			 "one rule for the clients it matches"},
};

/* The value's name: the row's, else its type's. */
static const char *help_arg(const struct config_key *k)
{
	if (k->arg)
		return k->arg;
	switch (k->type) {
	case CONFIG_U32:
	case CONFIG_U64:
		return "N";
	case CONFIG_PERCENT:
		return "PERCENT";
	case CONFIG_BOOL:
		return "BOOL";
	case CONFIG_FRACTION:
		return "FRACTION";
	case CONFIG_SIZE:
		return "SIZE";
	case CONFIG_TEXT:
		return "TEXT";
	case CONFIG_PATH:
		return "PATH";
	case CONFIG_ADDRESS:
	case CONFIG_HOSTPORT:
		return "HOST:PORT";
	case CONFIG_ENUM:
		break;
	}
	return "VALUE";
}

/* The default as the docs say it. */
static const char *help_default(const struct config_key *k)
{
	if (k->def_doc)
		return k->def_doc;
	return k->def ? k->def : "none";
}

/* What the value may be, in words ("" when the name says it all). */
static void help_bounds(const struct config_key *k, char *buf, size_t len)
{
	switch (k->type) {
	case CONFIG_U32:
	case CONFIG_U64:
		snprintf(buf, len, "%llu..%llu%s", (unsigned long long)k->min,
			 (unsigned long long)k->max, k->auto_ok ? " or auto" : "");
		break;
	case CONFIG_PERCENT:
		snprintf(buf, len, "%llu..%llu, N or N%%", (unsigned long long)k->min,
			 (unsigned long long)k->max);
		break;
	case CONFIG_BOOL:
		snprintf(buf, len, "true, false, yes, no, 1 or 0, any case");
		break;
	case CONFIG_FRACTION:
		snprintf(buf, len, "N/M of a page, or 1..4096 bytes");
		break;
	case CONFIG_SIZE:
		snprintf(buf, len, "bytes, K, M, G or T: a positive multiple of 4096");
		break;
	case CONFIG_TEXT:
	case CONFIG_PATH:
		snprintf(buf, len, "1..%llu bytes", (unsigned long long)k->max);
		break;
	default:
		buf[0] = '\0';
	}
}

/* ---- text ------------------------------------------------------------------------- */

#define HELP_WIDTH 79

/* Print s word by word, lines of at most HELP_WIDTH columns, each indented by indent. */
static void help_wrap(FILE *f, const char *s, int indent)
{
	int col = 0;

	while (*s) {
		size_t n;

		while (*s == ' ')
			s++;
		n = strcspn(s, " ");
		if (!n)
			break;
		if (col && col + 1 + (int)n > HELP_WIDTH) {
			fputc('\n', f);
			col = 0;
		}
		if (!col)
			col = fprintf(f, "%*s%.*s", indent, "", (int)n, s);
		else
			col += fprintf(f, " %.*s", (int)n, s);
		s += n;
	}
	if (col)
		fputc('\n', f);
}

static void help_text_key(FILE *f, const struct config_key *k)
{
	char bounds[128], line[512];
	size_t i, at;

	if (k->type == CONFIG_ENUM) {
		at = (size_t)snprintf(line, sizeof(line), "  %s = ", k->name);
		for (i = 0; k->choices[i].name && at < sizeof(line); i++)
			if (!k->choices[i].alias)
				at += (size_t)snprintf(line + at, sizeof(line) - at, "%s%s",
						       i ? " | " : "", k->choices[i].name);
	} else {
		help_bounds(k, bounds, sizeof(bounds));
		snprintf(line, sizeof(line), "  %s = %s%s%s%s", k->name, help_arg(k),
			 bounds[0] ? " (" : "", bounds, bounds[0] ? ")" : "");
	}
	fprintf(f, "%s\n", line);
	snprintf(line, sizeof(line), "default: %s. reload: %s.", help_default(k),
		 config_reload_text(k->reload));
	help_wrap(f, line, 6);
	help_wrap(f, k->help, 6);
}

static void help_text(FILE *f)
{
	int sec;
	size_t i;

	fputs("The keys of ramsterd's cluster file (--config FILE, ramster.conf(5)) by section:\n"
	      "each key's value, its default, what a reload (SIGHUP, `ramsterctl reload`)\n"
	      "does when the key changes, and what the key is for.\n",
	      f);
	for (sec = 0; sec < CONFIG_SECS; sec++) {
		fprintf(f, "\n%s: %s\n", help_titles[sec][0], help_titles[sec][1]);
		for (i = 0; i < config_keys_n; i++)
			if ((int)config_keys[i].sec == sec) {
				fputc('\n', f);
				help_text_key(f, &config_keys[i]);
			}
	}
}

/* ---- scdoc -------------------------------------------------------------------------- */

/*
 * s in scdoc: `x` in bold; '*' and '\' escaped everywhere, '_' unless inside
 * a word (where scdoc takes it as it is), so that no other text is styled.
 */
static void help_scd(FILE *f, const char *s)
{
	const char *start = s;

	for (; *s; s++) {
		bool inside =
		    s > start && isalnum((unsigned char)s[-1]) && isalnum((unsigned char)s[1]);

		if (*s == '`')
			fputc('*', f);
		else if (*s == '*' || *s == '\\' || (*s == '_' && !inside))
			fprintf(f, "\\%c", *s);
		else
			fputc(*s, f);
	}
}

static void help_scd_key(FILE *f, const struct config_key *k)
{
	char bounds[128];
	size_t i;

	fprintf(f, "*%s* = ", k->name);
	if (k->type == CONFIG_ENUM) {
		for (i = 0; k->choices[i].name; i++)
			if (!k->choices[i].alias)
				fprintf(f, "%s*%s*", i ? " | " : "", k->choices[i].name);
	} else {
		fputc('_', f);
		help_scd(f, help_arg(k));
		fputc('_', f);
		help_bounds(k, bounds, sizeof(bounds));
		if (bounds[0]) {
			fputs(" (", f);
			help_scd(f, bounds);
			fputc(')', f);
		}
	}
	fputs("\n\t", f);
	help_scd(f, k->help);
	fputs(" Default: ", f);
	help_scd(f, help_default(k));
	fputs(". Reload: ", f);
	help_scd(f, config_reload_text(k->reload));
	fputs(".\n", f);
}

static void help_scd_all(FILE *f)
{
	int sec;
	size_t i;

	for (sec = 0; sec < CONFIG_SECS; sec++) {
		fprintf(f, "; [%s]\n", config_sec_name(sec));
		for (i = 0; i < config_keys_n; i++)
			if ((int)config_keys[i].sec == sec) {
				help_scd_key(f, &config_keys[i]);
				fputc('\n', f);
			}
	}
}

int config_help_print(FILE *f, const char *format)
{
	if (!format || !strcmp(format, "text"))
		help_text(f);
	else if (!strcmp(format, "scd"))
		help_scd_all(f);
	else
		return -EINVAL;
	return 0;
}
