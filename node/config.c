/*
 * config.c - the cluster file (config.h), parsed with inih: lines, sections
 * and keys. What each key is (type, bounds, default) is its row in
 * config_keys.c; the rules across keys are config_check.c's.
 *
 * Our reader feeds inih one physical line at a time: we always know the line,
 * see every section header (even of an empty section) and refuse over-long
 * lines rather than have them cut. The earliest problem by line is reported.
 */
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ini.h>

#include "node/config.h"
#include "node/config_int.h"
#include "node/config_keys.h"

int config_fail_at(struct config_parse *p, int line, const char *fmt, ...)
{
	char msg[CONFIG_ERR_MAX];
	va_list ap;

	if (p->err_line && p->err_line <= line)
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (snprintf(p->err, sizeof(p->err), "%s:%d: %s", p->path, line, msg) >=
	    (int)sizeof(p->err))
		strcpy(p->err + sizeof(p->err) - 4, "...");
	p->err_line = line;
	return -EINVAL;
}

int config_key_line(const struct config_parse *p, enum config_sec sec, const char *name)
{
	const struct config_key *k = config_key_find(sec, name);

	return k ? p->key_line[k - config_keys] : 0;
}

/* ---- sections ------------------------------------------------------------------- */

/* Node and export names: 1..CONFIG_NAME_MAX-1 of [A-Za-z0-9._-]. */
static bool config_name_ok(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n < CONFIG_NAME_MAX &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

/* Enter sec at base: its keys are unset again and take their defaults. */
static void config_section_enter(struct config_parse *p, enum config_sec sec, void *base,
				 size_t size)
{
	size_t i;

	for (i = 0; i < config_keys_n; i++)
		if (config_keys[i].sec == sec)
			p->key_line[i] = 0;
	if (size) {
		memset(base, 0, size);
		config_key_defaults(sec, base);
	}
	p->sec = sec;
}

/*
 * [uid N], [user NAME] or [group NAME|N]: names are looked up now (an unknown
 * user or group refuses the file); a uid or gid may appear in one rule only.
 */
static void config_user_open(struct config_parse *p, const char *kind, const char *name)
{
	struct config *c = p->c;
	bool group = !strcmp(kind, "group");
	uint64_t id;
	size_t i;

	if (!*name || strlen(name) >= CONFIG_NAME_MAX) {
		config_fail(p, "[%s NAME] needs a name or number", kind);
		return;
	}
	if (!config_parse_u64(name, &id)) {
		if (id >= UINT32_MAX) {
			config_fail(p, "[%s %s]: id out of range", kind, name);
			return;
		}
	} else if (!strcmp(kind, "uid")) {
		config_fail(p, "[uid N] needs a number, not '%s'", name);
		return;
	} else if (group) {
		struct group *gr = getgrnam(name);

		if (!gr) {
			config_fail(p, "[group %s]: no such group", name);
			return;
		}
		id = gr->gr_gid;
	} else {
		struct passwd *pw = getpwnam(name);

		if (!pw) {
			config_fail(p, "[user %s]: no such user", name);
			return;
		}
		id = pw->pw_uid;
	}
	for (i = 0; i < c->n_users; i++) {
		if (c->users[i].group == group && c->users[i].id == id) {
			config_fail(p, "a second rule for %s %llu (first at line %d)",
				    group ? "gid" : "uid", (unsigned long long)id,
				    c->users[i].line);
			return;
		}
	}
	if (c->n_users == CONFIG_USERS_MAX) {
		config_fail(p, "too many [uid]/[user]/[group] rules (at most %d)",
			    CONFIG_USERS_MAX);
		return;
	}
	p->user = &c->users[c->n_users++];
	config_section_enter(p, CONFIG_SEC_USER, p->user, sizeof(*p->user));
	p->user->group = group;
	p->user->id = (uint32_t)id;
	snprintf(p->user->name, sizeof(p->user->name), "%s", name);
	p->user->line = p->lineno;
}

/* Open the section named by a header's text (between the brackets). */
static void config_section_open(struct config_parse *p, char *text)
{
	struct config *c = p->c;
	char orig[256], *kind = text, *name, *end;
	size_t i;

	snprintf(orig, sizeof(orig), "%s", text);
	p->sec = CONFIG_SEC_BAD;
	while (isspace((unsigned char)*kind))
		kind++;
	end = kind + strlen(kind);
	while (end > kind && isspace((unsigned char)end[-1]))
		*--end = '\0';
	name = kind + strcspn(kind, " \t");
	if (*name) {
		*name++ = '\0';
		while (isspace((unsigned char)*name))
			name++;
	}

	if (!strcmp(kind, "cluster")) {
		if (*name) {
			config_fail(p, "[cluster] takes no name");
			return;
		}
		if (c->has_cluster) {
			config_fail(p, "duplicate [cluster] section (first at line %d)",
				    p->cluster_line);
			return;
		}
		c->has_cluster = true;
		p->cluster_line = p->lineno;
		config_section_enter(p, CONFIG_SEC_CLUSTER, c, 0); /* defaults: config_defaults */
	} else if (!strcmp(kind, "node")) {
		if (!config_name_ok(name)) {
			config_fail(
			    p, "[node NAME] needs a name of 1..%d letters, digits, '.', '_' or '-'",
			    CONFIG_NAME_MAX - 1);
			return;
		}
		for (i = 0; i < c->n_nodes; i++) {
			if (!strcmp(c->nodes[i].name, name)) {
				config_fail(p, "duplicate node '%s' (first at line %d)", name,
					    c->nodes[i].line);
				return;
			}
		}
		if (c->n_nodes == CONFIG_NODES_MAX) {
			config_fail(p, "too many nodes (at most %d)", CONFIG_NODES_MAX);
			return;
		}
		p->node = &c->nodes[c->n_nodes++];
		config_section_enter(p, CONFIG_SEC_NODE, p->node, sizeof(*p->node));
		p->node->log_level = -1; /* unset: --log-level, else info */
		strcpy(p->node->name, name);
		p->node->line = p->lineno;
	} else if (!strcmp(kind, "export")) {
		if (!config_name_ok(name)) {
			config_fail(
			    p,
			    "[export NAME] needs a name of 1..%d letters, digits, '.', '_' or '-'",
			    CONFIG_NAME_MAX - 1);
			return;
		}
		for (i = 0; i < c->n_exports; i++) {
			if (!strcmp(c->exports[i].name, name)) {
				config_fail(p, "duplicate export '%s' (first at line %d)", name,
					    c->exports[i].line);
				return;
			}
		}
		if (c->n_exports == CONFIG_EXPORTS_MAX) {
			config_fail(p, "too many exports (at most %d)", CONFIG_EXPORTS_MAX);
			return;
		}
		p->exp = &c->exports[c->n_exports++];
		config_section_enter(p, CONFIG_SEC_EXPORT, p->exp, sizeof(*p->exp));
		strcpy(p->exp->name, name);
		p->exp->line = p->lineno;
	} else if (!strcmp(kind, "limits")) {
		if (*name) {
			config_fail(p, "[limits] takes no name");
			return;
		}
		if (p->limits_line) {
			config_fail(p, "duplicate [limits] section (first at line %d)",
				    p->limits_line);
			return;
		}
		p->limits_line = p->lineno;
		config_section_enter(p, CONFIG_SEC_LIMITS, c, 0); /* defaults: config_defaults */
	} else if (!strcmp(kind, "uid") || !strcmp(kind, "user") || !strcmp(kind, "group")) {
		config_user_open(p, kind, name);
	} else {
		config_fail(p,
			    "unknown section [%s] (expected [cluster], [node NAME], [export NAME], "
			    "[limits], [uid N], [user NAME] or [group NAME])",
			    orig);
	}
}

/*
 * inih's reader: one physical line, stripped of leading blanks (so an
 * indented line is never taken as a continuation of the previous value).
 * Section headers are opened here, in order with the handler's calls.
 */
static char *config_reader(char *str, int num, void *stream)
{
	struct config_parse *p = stream;
	ssize_t n = getline(&p->buf, &p->cap, p->f);
	char *s, *close;
	size_t len;

	if (n < 0)
		return NULL;
	p->lineno++;
	s = p->buf;
	if (p->lineno == 1 && n >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3))
		s += 3; /* a UTF-8 byte order mark */
	while (*s == ' ' || *s == '\t')
		s++;
	len = strlen(s);
	if ((ssize_t)len != n - (s - p->buf)) {
		config_fail(p, "NUL byte in line");
		s[0] = '\0';
		len = 0;
	}
	while (len && (s[len - 1] == '\n' || s[len - 1] == '\r'))
		s[--len] = '\0';
	if (num < 4 || len > (size_t)num - 3) {
		config_fail(p, "line too long (at most %d characters)", num - 3);
		s[0] = '\0';
		len = 0;
	}
	if (s[0] == '[') {
		close = strchr(s, ']');
		if (close) {
			char text[256];
			size_t tlen = (size_t)(close - s - 1);

			if (tlen >= sizeof(text))
				tlen = sizeof(text) - 1;
			memcpy(text, s + 1, tlen);
			text[tlen] = '\0';
			config_section_open(p, text);
		}
	}
	memcpy(str, s, len + 1);
	return str;
}

static int config_handler(void *user, const char *section, const char *key, const char *value)
{
	struct config_parse *p = user;
	const struct config_key *k;
	char why[CONFIG_ERR_MAX];
	void *base;

	switch (p->sec) {
	case CONFIG_SEC_BAD:
		return 0; /* the section header was already reported */
	case CONFIG_SEC_NONE:
		config_fail(p, "'%s' outside any section", key);
		return 0;
	case CONFIG_SEC_NODE:
		base = p->node;
		break;
	case CONFIG_SEC_EXPORT:
		base = p->exp;
		break;
	case CONFIG_SEC_USER:
		base = p->user;
		break;
	default: /* [cluster], [limits]: once a file, in struct config */
		base = p->c;
		break;
	}
	k = config_key_find(p->sec, key);
	if (!k) {
		const char *what = config_sec_name(p->sec);

		if (p->sec == CONFIG_SEC_USER) /* [uid N] is a user's rule */
			what = p->user->group ? "group" : "user";
		config_fail(p, "unknown key '%s' in [%s]", key, what);
		return 0;
	}
	if (p->key_line[k - config_keys]) {
		config_fail(p, "duplicate key '%s'", key);
		return 0;
	}
	p->key_line[k - config_keys] = p->lineno;
	if (config_key_set(k, base, value, why, sizeof(why))) {
		config_fail(p, "%s", why);
		return 0;
	}
	return !k->check || k->check(p, k, value) == 0;
}

/* ---- API ------------------------------------------------------------------------ */

void config_defaults(struct config *c)
{
	memset(c, 0, sizeof(*c));
	config_key_defaults(CONFIG_SEC_CLUSTER, c);
	config_key_defaults(CONFIG_SEC_LIMITS, c);
	c->request_timeout_ms = c->dead_after_ms; /* unless set (config_check) */
	c->env.frame_timeout_ms = 30000;
	c->env.rdma_read = true;
}

int config_load(struct config *c, const char *path, char *err, size_t errlen)
{
	struct config_parse p = {.c = c, .path = path, .sec = CONFIG_SEC_NONE};
	int rc;

	config_defaults(c);
	if (strlen(path) >= sizeof(c->path)) {
		snprintf(err, errlen, "%s: path too long", path);
		return -EINVAL;
	}
	strcpy(c->path, path);
	p.f = fopen(path, "re");
	if (!p.f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -EINVAL;
	}
	rc = ini_parse_stream(config_reader, &p, config_handler, &p);
	if (ferror(p.f) || rc < 0) {
		snprintf(err, errlen, "%s: %s", path, rc == -2 ? "out of memory" : "read error");
		fclose(p.f);
		free(p.buf);
		return -EINVAL;
	}
	fclose(p.f);
	free(p.buf);
	/* inih's own errors are syntax: keep the earliest problem either way */
	if (rc > 0 && (!p.err_line || rc < p.err_line))
		config_fail_at(&p, rc,
			       "syntax error (expected [section], key = value or ; comment)");
	if (!p.err_line)
		config_check(&p);
	if (p.err_line) {
		snprintf(err, errlen, "%s", p.err);
		return -EINVAL;
	}
	return 0;
}

const struct config_node *config_find_node(const struct config *c, const char *name)
{
	size_t i;

	for (i = 0; i < c->n_nodes; i++)
		if (!strcmp(c->nodes[i].name, name))
			return &c->nodes[i];
	return NULL;
}

/* ---- the environment ----------------------------------------------------------- */

int config_env_read(struct config_env *e, char *err, size_t errlen)
{
	const char *v;
	char *end;

	memset(e, 0, sizeof(*e));
	e->frame_timeout_ms = 30000;
	e->rdma_read = true;
	v = getenv("RAMSTER_SOCKET");
	if (v && *v) {
		if (strlen(v) >= sizeof(e->socket)) {
			snprintf(err, errlen, "RAMSTER_SOCKET: path too long");
			return -EINVAL;
		}
		snprintf(e->socket, sizeof(e->socket), "%s", v);
	}
	v = getenv("RAMSTER_BUSY_POLL_US");
	if (v && *v) {
		unsigned long long us = strtoull(v, &end, 10);

		if (*end || *v == '-' || us > CONFIG_BUSY_POLL_MAX_US) {
			snprintf(err, errlen,
				 "RAMSTER_BUSY_POLL_US: not a number of microseconds 0..%u",
				 CONFIG_BUSY_POLL_MAX_US);
			return -EINVAL;
		}
		e->has_busy_poll = true;
		e->busy_poll_us = us;
	}
	v = getenv("RAMSTER_FRAME_TIMEOUT_MS");
	if (v && *v) {
		unsigned long long ms = strtoull(v, &end, 10);

		if (*end || *v == '-' || ms == 0 || ms > 3600000) {
			snprintf(err, errlen,
				 "RAMSTER_FRAME_TIMEOUT_MS: not a number of milliseconds "
				 "1..3600000");
			return -EINVAL;
		}
		e->frame_timeout_ms = (uint32_t)ms;
	}
	v = getenv("RAMSTER_RDMA_READ");
	if (v && *v) {
		if (strcmp(v, "0") && strcmp(v, "1")) {
			snprintf(err, errlen, "RAMSTER_RDMA_READ: '%s' is not 0 or 1", v);
			return -EINVAL;
		}
		e->rdma_read = !strcmp(v, "1");
	}
	e->no_memlock = getenv("RAMSTER_NO_MEMLOCK") != NULL;
	v = getenv("RAMSTER_TEST_HOLDER_LIE");
	if (v && *v) {
		if (!strcmp(v, "other"))
			e->holder_lie = HOLDER_LIE_OTHER;
		else if (!strcmp(v, "old"))
			e->holder_lie = HOLDER_LIE_OLD;
		else if (!strcmp(v, "garbage"))
			e->holder_lie = HOLDER_LIE_GARBAGE;
		else {
			snprintf(err, errlen,
				 "RAMSTER_TEST_HOLDER_LIE: '%s' is not other, old or garbage", v);
			return -EINVAL;
		}
	}
	return 0;
}
