/*
 * config.c - the cluster file (config.h), parsed with inih.
 *
 * Our reader feeds inih one physical line at a time: we always know the line,
 * see every section header (even of an empty section) and refuse over-long
 * lines rather than have them cut. The earliest problem by line is reported.
 */
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <ini.h>

#include "common/sock.h"
#include "tmem/compress.h"
#include "tmem/zalloc.h"

#include "node/config.h"
#include "node/log.h"
#include "tmem/replica.h"

#define CONFIG_DEFAULT_LOCAL_MB 256
#define CONFIG_MB_MAX		(1024u * 1024) /* 1 TiB in MiB */
#define CONFIG_SOCKET_MAX	107	       /* sun_path less its NUL */
#define CONFIG_FRAC_ONE		1024	       /* fractions are kept in 1/1024ths */
#define CONFIG_PAGE		4096
#define CONFIG_SECRET_MIN	16 /* bytes; `ramsterctl genkey` prints 64 hex digits */

enum config_section { SEC_NONE, SEC_CLUSTER, SEC_NODE, SEC_EXPORT, SEC_LIMITS, SEC_USER, SEC_BAD };

/* The state of one parse. */
struct config_parse {
	struct config *c;
	const char *path;
	FILE *f;
	char *buf; /* getline's buffer */
	size_t cap;
	int lineno; /* the physical line inih is on */
	enum config_section sec;
	struct config_node *node;  /* SEC_NODE */
	struct config_export *exp; /* SEC_EXPORT */
	struct config_user *user;  /* SEC_USER */
	int limits_line;
	uint32_t seen;		   /* keys of the current section already set */
	int cluster_line;
	int secret_line, replicas_line, heartbeat_line, dead_line, timeout_line, high_line, low_line;
	int orphan_line;
	int err_line; /* 0: no error yet */
	char err[CONFIG_ERR_MAX];
};

/* Keep the problem with the lowest line number. */
static int __attribute__((format(printf, 3, 4)))
config_fail_at(struct config_parse *p, int line, const char *fmt, ...)
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

#define config_fail(p, ...) config_fail_at((p), (p)->lineno, __VA_ARGS__)

/* ---- values ------------------------------------------------------------------ */

/* Decimal digits only: no sign, no space, no junk. */
static int config_parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return 0;
}

int config_parse_size(const char *s, uint64_t *out)
{
	char digits[32];
	size_t n = strspn(s, "0123456789");
	unsigned shift = 0;
	uint64_t v;

	if (n == 0 || n >= sizeof(digits))
		return -EINVAL;
	memcpy(digits, s, n);
	digits[n] = '\0';
	if (config_parse_u64(digits, &v))
		return -EINVAL;
	if (s[n]) {
		if (s[n + 1])
			return -EINVAL;
		switch (s[n]) {
		case 'k':
		case 'K':
			shift = 10;
			break;
		case 'm':
		case 'M':
			shift = 20;
			break;
		case 'g':
		case 'G':
			shift = 30;
			break;
		case 't':
		case 'T':
			shift = 40;
			break;
		default:
			return -EINVAL;
		}
	}
	if (shift && v > (UINT64_MAX >> shift))
		return -EINVAL;
	*out = v << shift;
	return 0;
}

static int config_number(struct config_parse *p, const char *key, const char *value, uint64_t min,
			 uint64_t max, uint64_t *out)
{
	uint64_t v;

	if (config_parse_u64(value, &v))
		return config_fail(p, "%s: '%s' is not a number", key, value);
	if (v < min || v > max)
		return config_fail(p, "%s: %llu is out of range (%llu..%llu)", key,
				   (unsigned long long)v, (unsigned long long)min,
				   (unsigned long long)max);
	*out = v;
	return 0;
}

static int config_u32(struct config_parse *p, const char *key, const char *value, uint32_t min,
		      uint32_t max, uint32_t *out)
{
	uint64_t v = 0;
	int rc = config_number(p, key, value, min, max, &v);

	if (!rc)
		*out = (uint32_t)v;
	return rc;
}

static int config_bool(struct config_parse *p, const char *key, const char *value, bool *out)
{
	static const char *const yes[] = {"true", "yes", "1"};
	static const char *const no[] = {"false", "no", "0"};
	size_t i;

	for (i = 0; i < 3; i++) {
		if (!strcasecmp(value, yes[i])) {
			*out = true;
			return 0;
		}
		if (!strcasecmp(value, no[i])) {
			*out = false;
			return 0;
		}
	}
	return config_fail(p, "%s: '%s' is not a boolean (true/false/yes/no/1/0)", key, value);
}

/* A string that must be non-empty and shorter than size (and at most max bytes). */
static int config_string(struct config_parse *p, const char *key, const char *value, char *out,
			 size_t size, size_t max)
{
	size_t n = strlen(value);

	if (!n)
		return config_fail(p, "%s: empty value", key);
	if (n >= size || n > max)
		return config_fail(p, "%s: too long (at most %zu bytes)", key,
				   max < size - 1 ? max : size - 1);
	memcpy(out, value, n + 1);
	return 0;
}

/* Node and export names: 1..CONFIG_NAME_MAX-1 of [A-Za-z0-9._-]. */
static bool config_name_ok(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n < CONFIG_NAME_MAX &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

/* HOST:PORT with a host name or IPv4 literal and a port 1..65535 (sock_hostport_parse). */
static int config_address(struct config_parse *p, const char *key, const char *value, char *host,
			  uint16_t *port)
{
	const char *why;

	if (sock_hostport_parse(value, host, CONFIG_NAME_MAX, port, &why))
		return config_fail(p, "%s: '%s' %s", key, value, why);
	return 0;
}

/* "N/M" (a fraction of a page) or a byte count 1..4096, as 1/1024ths of a page. */
static int config_fraction(struct config_parse *p, const char *key, const char *value,
			   uint32_t *out)
{
	const char *slash = strchr(value, '/');
	char num[32];
	uint64_t n, m, frac;

	if (slash) {
		if ((size_t)(slash - value) >= sizeof(num))
			goto bad;
		memcpy(num, value, (size_t)(slash - value));
		num[slash - value] = '\0';
		if (config_parse_u64(num, &n) || config_parse_u64(slash + 1, &m) || m == 0 ||
		    m > CONFIG_PAGE)
			goto bad;
		if (n == 0 || n > m)
			return config_fail(p,
					   "%s: %s is out of range (a fraction above 0, at most 1)",
					   key, value);
		frac = (n * CONFIG_FRAC_ONE + m / 2) / m;
	} else {
		if (config_parse_u64(value, &n))
			goto bad;
		if (n < 1 || n > CONFIG_PAGE)
			return config_fail(p, "%s: %s is out of range (1..4096 bytes)", key, value);
		frac = (n * CONFIG_FRAC_ONE + CONFIG_PAGE / 2) / CONFIG_PAGE;
	}
	*out = frac ? (uint32_t)frac : 1;
	return 0;
bad:
	return config_fail(p, "%s: '%s' is neither a fraction N/M nor a byte count", key, value);
}

/* ---- [cluster] ------------------------------------------------------------------ */

static int cluster_name(struct config_parse *p, const char *key, const char *v)
{
	return config_string(p, key, v, p->c->cluster_name, CONFIG_NAME_MAX, CONFIG_NAME_MAX);
}

static int cluster_secret_file(struct config_parse *p, const char *key, const char *v)
{
	p->secret_line = p->lineno;
	return config_string(p, key, v, p->c->secret_file, CONFIG_PATH_MAX, CONFIG_PATH_MAX);
}

static int cluster_heartbeat(struct config_parse *p, const char *key, const char *v)
{
	p->heartbeat_line = p->lineno;
	return config_u32(p, key, v, 10, 60000, &p->c->heartbeat_ms);
}

static int cluster_dead_after(struct config_parse *p, const char *key, const char *v)
{
	p->dead_line = p->lineno;
	return config_u32(p, key, v, 20, 600000, &p->c->dead_after_ms);
}

static int cluster_orphan_after(struct config_parse *p, const char *key, const char *v)
{
	p->orphan_line = p->lineno;
	return config_u32(p, key, v, 100, 86400000, &p->c->orphan_after_ms);
}

static int cluster_rereplicate_rate(struct config_parse *p, const char *key, const char *v)
{
	return config_u32(p, key, v, 1, 1000000, &p->c->rereplicate_rate);
}

/* link_security: secure (frames and pages encrypted and authenticated) or integrity (MAC only). */
static int cluster_link_security(struct config_parse *p, const char *key, const char *v)
{
	if (!strcmp(v, "secure"))
		p->c->link_integrity_only = false;
	else if (!strcmp(v, "integrity"))
		p->c->link_integrity_only = true;
	else
		return config_fail(p, "%s: '%s' is not secure or integrity", key, v);
	return 0;
}

static int cluster_replicas(struct config_parse *p, const char *key, const char *v)
{
	p->replicas_line = p->lineno;
	return config_u32(p, key, v, 1, REPLICA_MAX, &p->c->replicas);
}

/* A percentage: "N" or "N%". */
static int config_percent(struct config_parse *p, const char *key, const char *v, uint32_t min,
			  uint32_t max, uint32_t *out)
{
	char num[16];
	size_t n = strlen(v);

	if (n && v[n - 1] == '%')
		n--;
	if (n >= sizeof(num))
		return config_fail(p, "%s: '%s' is not a percentage", key, v);
	memcpy(num, v, n);
	num[n] = '\0';
	return config_u32(p, key, num, min, max, out);
}

static int cluster_high_watermark(struct config_parse *p, const char *key, const char *v)
{
	p->high_line = p->lineno;
	return config_percent(p, key, v, 1, 100, &p->c->high_watermark_pct);
}

static int cluster_low_watermark(struct config_parse *p, const char *key, const char *v)
{
	p->low_line = p->lineno;
	return config_percent(p, key, v, 0, 99, &p->c->low_watermark_pct);
}

static int cluster_remotify_eph(struct config_parse *p, const char *key, const char *v)
{
	return config_bool(p, key, v, &p->c->remotify_ephemeral);
}

static int cluster_remotify_pers(struct config_parse *p, const char *key, const char *v)
{
	return config_bool(p, key, v, &p->c->remotify_persistent);
}

static int cluster_request_timeout(struct config_parse *p, const char *key, const char *v)
{
	p->timeout_line = p->lineno;
	return config_u32(p, key, v, 1, 600000, &p->c->request_timeout_ms);
}

static int cluster_room_wait(struct config_parse *p, const char *key, const char *v)
{
	return config_u32(p, key, v, 1, 60000, &p->c->room_wait_ms);
}

static int cluster_pers_max(struct config_parse *p, const char *key, const char *v)
{
	return config_fraction(p, key, v, &p->c->pers_max_frac);
}

static int cluster_pers_mean_max(struct config_parse *p, const char *key, const char *v)
{
	return config_fraction(p, key, v, &p->c->pers_mean_max_frac);
}

static int cluster_pers_mean_limit(struct config_parse *p, const char *key, const char *v)
{
	return config_fraction(p, key, v, &p->c->pers_mean_limit_frac);
}

/* ---- [node NAME] -------------------------------------------------------------- */

static int node_id(struct config_parse *p, const char *key, const char *v)
{
	struct config_node *n = p->node;
	uint32_t id = 0;
	size_t i;
	int rc = config_u32(p, key, v, 1, CONFIG_NODES_MAX, &id);

	if (rc)
		return rc;
	for (i = 0; i < p->c->n_nodes; i++)
		if (&p->c->nodes[i] != n && p->c->nodes[i].id == id)
			return config_fail(p, "id %u is already node '%s' (line %d)", id,
					   p->c->nodes[i].name, p->c->nodes[i].line);
	n->id = id;
	return 0;
}

static int node_address(struct config_parse *p, const char *key, const char *v)
{
	struct config_node *n = p->node;
	char host[CONFIG_NAME_MAX];
	uint16_t port;
	size_t i;
	int rc = config_address(p, key, v, host, &port);

	if (rc)
		return rc;
	for (i = 0; i < p->c->n_nodes; i++) {
		const struct config_node *o = &p->c->nodes[i];

		if (o != n && o->port == port && !strcasecmp(o->host, host))
			return config_fail(p, "address %s is already node '%s' (line %d)", v,
					   o->name, o->line);
	}
	memcpy(n->host, host, sizeof(host));
	n->port = port;
	return 0;
}

static int node_transport(struct config_parse *p, const char *key, const char *v)
{
	if (!strcmp(v, "tcp"))
		p->node->transport = TRANSPORT_TCP;
	else if (!strcmp(v, "rdma"))
		p->node->transport = TRANSPORT_RDMA;
	else if (!strcmp(v, "auto"))
		p->node->transport = TRANSPORT_AUTO;
	else
		return config_fail(p, "%s: '%s' is not tcp, rdma or auto", key, v);
	return 0;
}

static int node_socket(struct config_parse *p, const char *key, const char *v)
{
	return config_string(p, key, v, p->node->socket, CONFIG_PATH_MAX, CONFIG_SOCKET_MAX);
}

static int node_local_mb(struct config_parse *p, const char *key, const char *v)
{
	return config_number(p, key, v, 1, CONFIG_MB_MAX, &p->node->local_mb);
}

static int node_donate_mb(struct config_parse *p, const char *key, const char *v)
{
	return config_number(p, key, v, 0, CONFIG_MB_MAX, &p->node->donate_mb);
}

static int node_nbd_socket(struct config_parse *p, const char *key, const char *v)
{
	return config_string(p, key, v, p->node->nbd_socket, CONFIG_PATH_MAX, CONFIG_SOCKET_MAX);
}

static int node_nbd_listen(struct config_parse *p, const char *key, const char *v)
{
	int rc = config_address(p, key, v, NULL, NULL);

	if (rc)
		return rc;
	return config_string(p, key, v, p->node->nbd_listen, CONFIG_NAME_MAX, CONFIG_NAME_MAX);
}

static int node_nbd_tls(struct config_parse *p, const char *key, const char *v)
{
	static const char *const names[] = {[NBD_TLS_OFF] = "off", [NBD_TLS_ON] = "on",
					    [NBD_TLS_REQUIRE] = "require"};
	unsigned i;

	for (i = NBD_TLS_OFF; i <= NBD_TLS_REQUIRE; i++) {
		if (!strcmp(v, names[i])) {
			p->node->nbd_tls = i;
			p->node->nbd_tls_line = p->lineno;
			return 0;
		}
	}
	return config_fail(p, "%s: '%s' is not off, on or require", key, v);
}

static int node_nbd_tls_psk(struct config_parse *p, const char *key, const char *v)
{
	return config_string(p, key, v, p->node->nbd_tls_psk, CONFIG_PATH_MAX, CONFIG_PATH_MAX);
}

static int node_nbd_tls_certificates(struct config_parse *p, const char *key, const char *v)
{
	return config_string(p, key, v, p->node->nbd_tls_certificates, CONFIG_PATH_MAX,
			     CONFIG_PATH_MAX);
}

static int node_allocator(struct config_parse *p, const char *key, const char *v)
{
	enum zalloc_kind k;

	if (zalloc_parse(v, &k))
		return config_fail(p, "%s: '%s' is not dense or zbud", key, v);
	p->node->allocator = k;
	return 0;
}

static int node_compressor(struct config_parse *p, const char *key, const char *v)
{
	enum compress_algo a;

	if (compress_algo_parse(v, &a))
		return config_fail(p, "%s: '%s' is not lzo or lz4", key, v);
	p->node->compressor = a;
	return 0;
}

static int node_metrics_listen(struct config_parse *p, const char *key, const char *v)
{
	int rc = config_address(p, key, v, NULL, NULL);

	if (rc)
		return rc;
	return config_string(p, key, v, p->node->metrics_listen, sizeof(p->node->metrics_listen),
			     sizeof(p->node->metrics_listen));
}

static int node_log_level(struct config_parse *p, const char *key, const char *v)
{
	int level = log_level_parse(v);

	if (level < 0)
		return config_fail(p, "%s: '%s' is not debug, info, notice, warn or error", key, v);
	p->node->log_level = level;
	return 0;
}

static int node_busy_poll(struct config_parse *p, const char *key, const char *v)
{
	return config_number(p, key, v, 0, CONFIG_BUSY_POLL_MAX_US, &p->node->busy_poll_us);
}

/* ---- [export NAME] ------------------------------------------------------------ */

static int export_size(struct config_parse *p, const char *key, const char *v)
{
	uint64_t size;

	if (config_parse_size(v, &size))
		return config_fail(p, "%s: '%s' is not a size (a number with K, M, G or T)", key,
				   v);
	if (size == 0 || size % CONFIG_PAGE)
		return config_fail(p, "%s: %s is not a positive multiple of 4096 bytes", key, v);
	p->exp->size = size;
	return 0;
}

static int export_backing(struct config_parse *p, const char *key, const char *v)
{
	return config_string(p, key, v, p->exp->backing, CONFIG_PATH_MAX, CONFIG_PATH_MAX);
}

/* ---- [limits], [uid N], [user NAME], [group NAME] ------------------------------ */

#define LIMIT_KEY(fn, field, min, max)                                                     \
	static int fn(struct config_parse *p, const char *key, const char *v)              \
	{                                                                                  \
		return config_u32(p, key, v, min, max, &p->c->limits.field);               \
	}
LIMIT_KEY(limits_max_clients, max_clients, 1, 65536)
LIMIT_KEY(limits_max_clients_uid, max_clients_per_uid, 1, 65536)
LIMIT_KEY(limits_max_pools_uid, max_pools_per_uid, 1, 65536)
LIMIT_KEY(limits_default_weight, default_weight, 1, 10000)
LIMIT_KEY(limits_nbd_max, nbd_max_connections, 1, 4096)
LIMIT_KEY(limits_nbd_handshake, nbd_handshake_timeout_ms, 100, 600000)
LIMIT_KEY(limits_nbd_idle, nbd_idle_timeout_ms, 1000, 86400000)
LIMIT_KEY(limits_peer_unauth, peer_unauth_max, 1, 4096)
LIMIT_KEY(limits_peer_unauth_addr, peer_unauth_per_addr, 1, 4096)
LIMIT_KEY(limits_peer_handshake, peer_handshake_timeout_ms, 100, 60000)
#undef LIMIT_KEY

static int user_max_mb(struct config_parse *p, const char *key, const char *v)
{
	return config_number(p, key, v, 1, CONFIG_MB_MAX, &p->user->max_mb);
}

static int user_weight(struct config_parse *p, const char *key, const char *v)
{
	return config_u32(p, key, v, 1, 10000, &p->user->weight);
}

static int user_max_connections(struct config_parse *p, const char *key, const char *v)
{
	return config_u32(p, key, v, 1, 65536, &p->user->max_connections);
}

static int user_max_pools(struct config_parse *p, const char *key, const char *v)
{
	return config_u32(p, key, v, 1, 65536, &p->user->max_pools);
}

/* ---- sections and keys -------------------------------------------------------- */

struct config_key {
	const char *name;
	int (*set)(struct config_parse *p, const char *key, const char *value);
};

static const struct config_key cluster_keys[] = {
    {"name", cluster_name},
    {"secret_file", cluster_secret_file},
    {"heartbeat_ms", cluster_heartbeat},
    {"dead_after_ms", cluster_dead_after},
    {"orphan_after_ms", cluster_orphan_after},
    {"replicas", cluster_replicas},
    {"link_security", cluster_link_security},
    {"rereplicate_rate", cluster_rereplicate_rate},
    {"high_watermark", cluster_high_watermark},
    {"low_watermark", cluster_low_watermark},
    {"remotify_ephemeral", cluster_remotify_eph},
    {"remotify_persistent", cluster_remotify_pers},
    {"request_timeout_ms", cluster_request_timeout},
    {"room_wait_ms", cluster_room_wait},
    {"pers_max", cluster_pers_max},
    {"pers_mean_max", cluster_pers_mean_max},
    {"pers_mean_limit", cluster_pers_mean_limit},
    {NULL, NULL},
};

static const struct config_key node_keys[] = {
    {"id", node_id},
    {"address", node_address},
    {"transport", node_transport},
    {"socket", node_socket},
    {"local_mb", node_local_mb},
    {"donate_mb", node_donate_mb},
    {"nbd_socket", node_nbd_socket},
    {"nbd_listen", node_nbd_listen},
    {"nbd_tls", node_nbd_tls},
    {"nbd_tls_psk", node_nbd_tls_psk},
    {"nbd_tls_certificates", node_nbd_tls_certificates},
    {"busy_poll_us", node_busy_poll},
    {"allocator", node_allocator},
    {"compressor", node_compressor},
    {"metrics_listen", node_metrics_listen},
    {"log_level", node_log_level},
    {NULL, NULL},
};

static const struct config_key export_keys[] = {
    {"size", export_size},
    {"backing", export_backing},
    {NULL, NULL},
};

static const struct config_key limits_keys[] = {
    {"max_clients", limits_max_clients},
    {"max_clients_per_uid", limits_max_clients_uid},
    {"max_pools_per_uid", limits_max_pools_uid},
    {"default_weight", limits_default_weight},
    {"nbd_max_connections", limits_nbd_max},
    {"nbd_handshake_timeout_ms", limits_nbd_handshake},
    {"nbd_idle_timeout_ms", limits_nbd_idle},
    {"peer_unauth_max", limits_peer_unauth},
    {"peer_unauth_per_addr", limits_peer_unauth_addr},
    {"peer_handshake_timeout_ms", limits_peer_handshake},
    {NULL, NULL},
};

static const struct config_key user_keys[] = {
    {"max_mb", user_max_mb},
    {"weight", user_weight},
    {"max_connections", user_max_connections},
    {"max_pools", user_max_pools},
    {NULL, NULL},
};

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
				    group ? "gid" : "uid", (unsigned long long)id, c->users[i].line);
			return;
		}
	}
	if (c->n_users == CONFIG_USERS_MAX) {
		config_fail(p, "too many [uid]/[user]/[group] rules (at most %d)", CONFIG_USERS_MAX);
		return;
	}
	p->user = &c->users[c->n_users++];
	memset(p->user, 0, sizeof(*p->user));
	p->user->group = group;
	p->user->id = (uint32_t)id;
	snprintf(p->user->name, sizeof(p->user->name), "%s", name);
	p->user->line = p->lineno;
	p->sec = SEC_USER;
}

static void config_node_defaults(struct config_node *n)
{
	memset(n, 0, sizeof(*n));
	n->transport = TRANSPORT_TCP;
	n->local_mb = CONFIG_DEFAULT_LOCAL_MB;
	n->busy_poll_us = CONFIG_DEFAULT_BUSY_POLL_US;
	n->log_level = -1;
}

/* Open the section named by a header's text (between the brackets). */
static void config_section_open(struct config_parse *p, char *text)
{
	struct config *c = p->c;
	char orig[256], *kind = text, *name, *end;
	size_t i;

	snprintf(orig, sizeof(orig), "%s", text);
	p->sec = SEC_BAD;
	p->seen = 0;
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
		p->sec = SEC_CLUSTER;
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
		config_node_defaults(p->node);
		strcpy(p->node->name, name);
		p->node->line = p->lineno;
		p->sec = SEC_NODE;
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
		memset(p->exp, 0, sizeof(*p->exp));
		strcpy(p->exp->name, name);
		p->exp->line = p->lineno;
		p->sec = SEC_EXPORT;
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
		p->sec = SEC_LIMITS;
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
	const struct config_key *keys;
	const char *what;
	unsigned i;

	switch (p->sec) {
	case SEC_CLUSTER:
		keys = cluster_keys;
		what = "[cluster]";
		break;
	case SEC_NODE:
		keys = node_keys;
		what = "[node]";
		break;
	case SEC_EXPORT:
		keys = export_keys;
		what = "[export]";
		break;
	case SEC_LIMITS:
		keys = limits_keys;
		what = "[limits]";
		break;
	case SEC_USER:
		keys = user_keys;
		what = p->user->group ? "[group]" : "[user]";
		break;
	case SEC_BAD:
		return 0; /* the section header was already reported */
	default:
		config_fail(p, "'%s' outside any section", key);
		return 0;
	}
	for (i = 0; keys[i].name; i++)
		if (!strcmp(keys[i].name, key))
			break;
	if (!keys[i].name) {
		config_fail(p, "unknown key '%s' in %s", key, what);
		return 0;
	}
	if (p->seen & (1u << i)) {
		config_fail(p, "duplicate key '%s'", key);
		return 0;
	}
	p->seen |= 1u << i;
	return keys[i].set(p, key, value) == 0;
}

/* ---- whole-file checks ---------------------------------------------------------- */

/* A relative file (secret_file, nbd_tls_*) is relative to the config file's directory. */
static void config_resolve_path(struct config_parse *p, int line, const char *key,
				char file[CONFIG_PATH_MAX])
{
	struct config *c = p->c;
	const char *slash = strrchr(c->path, '/');
	char path[CONFIG_PATH_MAX];

	if (!file[0] || file[0] == '/' || !slash)
		return;
	if ((size_t)snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - c->path), c->path,
			     file) >= sizeof(path)) {
		config_fail_at(p, line, "%s: path too long", key);
		return;
	}
	strcpy(file, path);
}

/*
 * A node's NBD TLS keys: on|require needs exactly one kind of credentials
 * (as nbdkit: --tls-psk or --tls-certificates); keys without nbd_tls are a
 * forgotten nbd_tls line. The files themselves are read by nbd_create.
 */
static void config_check_nbd_tls(struct config_parse *p, struct config_node *n)
{
	bool psk = n->nbd_tls_psk[0], x509 = n->nbd_tls_certificates[0];
	int line = n->nbd_tls_line ? n->nbd_tls_line : n->line;

	if ((n->nbd_tls == NBD_TLS_ON || n->nbd_tls == NBD_TLS_REQUIRE) && !psk && !x509)
		config_fail_at(p, line,
			       "node '%s': nbd_tls = %s needs nbd_tls_psk = FILE (psktool) or "
			       "nbd_tls_certificates = DIR (certtool)",
			       n->name, n->nbd_tls == NBD_TLS_ON ? "on" : "require");
	else if (psk && x509)
		config_fail_at(p, line,
			       "node '%s': set one of nbd_tls_psk and nbd_tls_certificates, not both",
			       n->name);
	else if ((psk || x509) && n->nbd_tls == NBD_TLS_UNSET)
		config_fail_at(p, n->line,
			       "node '%s': %s is set but nbd_tls is not (write nbd_tls = on, "
			       "require or off)",
			       n->name, psk ? "nbd_tls_psk" : "nbd_tls_certificates");
	config_resolve_path(p, line, "nbd_tls_psk", n->nbd_tls_psk);
	config_resolve_path(p, line, "nbd_tls_certificates", n->nbd_tls_certificates);
}

/*
 * The secret must be there, readable, and at least CONFIG_SECRET_MIN bytes of
 * anything (random bytes, or `ramsterctl genkey`'s 64 hex digits): the key is
 * a hash of the whole file (cluster_load_key).
 */
static void config_check_secret(struct config_parse *p)
{
	struct config *c = p->c;
	char buf[4096];
	ssize_t n;
	int fd, err;

	if (!c->secret_file[0]) {
		config_fail_at(p, p->cluster_line,
			       "secret_file is required with a [cluster] section and 2+ nodes");
		return;
	}
	fd = open(c->secret_file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		config_fail_at(p, p->secret_line, "cannot read secret_file %s: %s", c->secret_file,
			       strerror(errno));
		return;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	err = errno;
	close(fd);
	if (n < 0) {
		config_fail_at(p, p->secret_line, "cannot read secret_file %s: %s", c->secret_file,
			       strerror(err));
		return;
	}
	while (n > 0 && isspace((unsigned char)buf[n - 1]))
		n--;
	if (n < CONFIG_SECRET_MIN)
		config_fail_at(p, p->secret_line,
			       "secret_file %s: too short (%zd bytes; at least %d, see `ramsterctl genkey`)",
			       c->secret_file, n, CONFIG_SECRET_MIN);
}

static void config_check(struct config_parse *p)
{
	struct config *c = p->c;
	bool collective = c->has_cluster || c->n_nodes >= 2;
	size_t i;

	for (i = 0; collective && i < c->n_nodes; i++) {
		const struct config_node *n = &c->nodes[i];

		if (!n->id)
			config_fail_at(
			    p, n->line,
			    "node '%s' has no id (required with a [cluster] section or 2+ nodes)",
			    n->name);
		else if (!n->port)
			config_fail_at(p, n->line,
				       "node '%s' has no address (required with a [cluster] "
				       "section or 2+ nodes)",
				       n->name);
	}
	for (i = 0; i < c->n_exports; i++)
		if (!c->exports[i].size)
			config_fail_at(p, c->exports[i].line, "export '%s' has no size",
				       c->exports[i].name);
	if (c->low_watermark_pct >= c->high_watermark_pct)
		config_fail_at(p, p->low_line ? p->low_line : p->high_line,
			       "low_watermark (%u%%) must be below high_watermark (%u%%)",
			       c->low_watermark_pct, c->high_watermark_pct);
	if (c->dead_after_ms <= c->heartbeat_ms)
		config_fail_at(p, p->dead_line ? p->dead_line : p->heartbeat_line,
			       "dead_after_ms (%u) must be above heartbeat_ms (%u)",
			       c->dead_after_ms, c->heartbeat_ms);
	if (!p->timeout_line)
		c->request_timeout_ms = c->dead_after_ms;
	if (c->orphan_after_ms <= c->dead_after_ms)
		config_fail_at(p, p->orphan_line ? p->orphan_line : p->dead_line,
			       "orphan_after_ms (%u) must be above dead_after_ms (%u)",
			       c->orphan_after_ms, c->dead_after_ms);
	if (c->replicas > 1 && c->replicas + 1 > c->n_nodes)
		config_fail_at(p, p->replicas_line,
			       "replicas = %u needs at least %u nodes (the owner and %u peers); "
			       "the file has %zu",
			       c->replicas, c->replicas + 1, c->replicas, c->n_nodes);
	for (i = 0; i < c->n_nodes; i++)
		config_check_nbd_tls(p, &c->nodes[i]);
	config_resolve_path(p, p->secret_line, "secret_file", c->secret_file);
	if (c->has_cluster && c->n_nodes >= 2)
		config_check_secret(p);
}

/* ---- API ------------------------------------------------------------------------ */

void config_defaults(struct config *c)
{
	memset(c, 0, sizeof(*c));
	c->heartbeat_ms = 100;
	c->dead_after_ms = 1000;
	c->replicas = 1;
	c->rereplicate_rate = 2000;
	c->high_watermark_pct = 90;
	c->low_watermark_pct = 80;
	c->remotify_ephemeral = true;
	c->remotify_persistent = true;
	c->request_timeout_ms = c->dead_after_ms;
	c->orphan_after_ms = CONFIG_DEFAULT_ORPHAN_AFTER_MS;
	c->room_wait_ms = 500; /* STORE_DEFAULT_ROOM_WAIT_MS */
	c->env.frame_timeout_ms = 30000;
	c->env.rdma_read = true;
	c->limits = (struct config_limits){
	    .max_clients = 1024,
	    .max_clients_per_uid = 64,
	    .max_pools_per_uid = 4096,
	    .default_weight = 100,
	    .nbd_max_connections = 64,
	    .nbd_handshake_timeout_ms = 10000,
	    .nbd_idle_timeout_ms = 600000,
	    .peer_unauth_max = 32,
	    .peer_unauth_per_addr = 4,
	    .peer_handshake_timeout_ms = 3000,
	};
}

int config_load(struct config *c, const char *path, char *err, size_t errlen)
{
	struct config_parse p = {.c = c, .path = path, .sec = SEC_NONE};
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
			snprintf(err, errlen, "RAMSTER_FRAME_TIMEOUT_MS: not a number of milliseconds "
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
