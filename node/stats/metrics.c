/*
 * metrics.c - the Prometheus endpoint (metrics.h).
 *
 * Names: every counter NAME of counters_foreach becomes the family
 * ramster_NAME, its unit spelled out and converted to the base unit (_s and
 * _us become _seconds, byte figures end in _bytes), and counters (monotonic)
 * end in _total; the rest are gauges. The table below is the only place that
 * knows which is which: a name not in it is a counter.
 *
 * Threads (the choice, and why): libmicrohttpd's thread asks, the loop
 * renders. Reading the loop's counters from another thread would need every
 * writer to use atomics or a lock on the hot path; copying them on a timer
 * would serve figures up to a period old and spend CPU when nobody scrapes.
 * Asking the loop (ev_async) costs one wake-up per scrape, gives a consistent
 * snapshot (the loop renders between two events) and shows a stalled loop
 * as stale pages.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <ev.h>
#include <microhttpd.h>

#include "node/clock.h"
#include "node/cluster/cluster.h"
#include "node/stats/counters.h"
#include "node/log.h"
#include "node/stats/metrics.h"
#include "node/nbd/nbd.h"
#include "node/remote/remote.h"

#define METRICS_CONN_LIMIT   16u /* connections at once */
#define METRICS_CONN_TIMEOUT 10u /* s an idle connection is kept */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct metrics {
	ev_async wake; /* first: the loop's callback gets back to us */
	struct ev_loop *loop;
	const struct client_env *env;
	struct MHD_Daemon *d;

	/* the latest rendering, under lock; gen grows with each one */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char *text;
	size_t len;
	uint64_t gen;
	uint64_t at_ns; /* CLOCK_MONOTONIC when rendered */
	bool closing;

	/* counters: written by either thread */
	atomic_uint_fast64_t scrapes;	  /* GET /metrics answered 200 */
	atomic_uint_fast64_t stale;	  /* ... with a page the loop did not renew in time */
	atomic_uint_fast64_t unavailable; /* 503: the loop never rendered one */
	atomic_uint_fast64_t not_found;	  /* 404: another path */
	atomic_uint_fast64_t bad_method;  /* 405: not GET or HEAD */
	atomic_uint_fast64_t oom;	  /* renderings or answers that failed for memory */
	atomic_uint_fast64_t renders;	  /* pages the loop rendered */
};

/* ---- names, units, types ---------------------------------------------------------- */

/*
 * Counters whose name alone does not say it all: gauges (figures that go
 * down), and names whose unit is renamed. scale converts to the base unit.
 */
struct metrics_name {
	const char *stat;
	const char *family; /* NULL: "ramster_" + stat (+ "_total" for a counter) */
	bool gauge;
	double scale; /* 0: 1 */
};

/* clang-format off */
static const struct metrics_name metrics_names[] = {
	{ "node_uptime_s",          "ramster_node_uptime_seconds",         true,  0 },
	{ "node_clients",           NULL, true, 0 },
	{ "node_pools_private",     NULL, true, 0 },
	{ "node_pools_shared",      NULL, true, 0 },
	{ "tmem_pools",             NULL, true, 0 },
	{ "tmem_objects",           NULL, true, 0 },
	{ "tmem_pages",             NULL, true, 0 },
	{ "tier_stored_pages",      NULL, true, 0 },
	{ "tier_compressed_bytes",  NULL, true, 0 },
	{ "tier_zero_pages",        NULL, true, 0 },
	{ "tier_frames",            NULL, true, 0 },
	{ "tier_frames_eph",        NULL, true, 0 },
	{ "tier_frames_pers",       NULL, true, 0 },
	{ "tier_zombies",           NULL, true, 0 },
	{ "tier_budget_frames",     NULL, true, 0 },
	{ "tier_capacity_frames",   NULL, true, 0 },
	{ "tier_meta_bytes",        NULL, true, 0 },
	{ "tier_replica_records",   NULL, true, 0 },
	{ "tier_replica_bytes",     NULL, true, 0 },
	{ "tier_remote_pages",      NULL, true, 0 },
	{ "remote_rdma_chunks",     NULL, true, 0 },
	{ "replica_target",         NULL, true, 0 },
	{ "ec_data_fragments",      NULL, true, 0 },
	{ "ec_parity_fragments",    NULL, true, 0 },
	{ "elastic_budget",         "ramster_elastic_budget_bytes",        true,  0 },
	{ "elastic_held",           "ramster_elastic_held_bytes",          true,  0 },
	{ "elastic_available",      "ramster_elastic_available_bytes",     true,  0 },
	{ "elastic_reserve",        "ramster_elastic_reserve_bytes",       true,  0 },
	{ "elastic_pressure_us",    NULL, true, 0 },
	{ "elastic_tier_budget",    "ramster_elastic_tier_budget_bytes",   true,  0 },
	{ "elastic_tier_held",      "ramster_elastic_tier_held_bytes",     true,  0 },
	{ "replica_below_target",   NULL, true, 0 },
	{ "replica_lost_now",       NULL, true, 0 },
	{ "replica_repair_active",  NULL, true, 0 },
	{ "drain_active",           NULL, true, 0 },
	{ "drain_pages_left",       NULL, true, 0 },
	{ "foreign_pages",          NULL, true, 0 },
	{ "foreign_bytes",          NULL, true, 0 },
	{ "foreign_used",           "ramster_foreign_used_bytes",          true,  0 },
	{ "foreign_budget",         "ramster_foreign_budget_bytes",        true,  0 },
	{ "cluster_peers",          NULL, true, 0 },
	{ "cluster_links_up",       NULL, true, 0 },
	{ "cluster_peers_dead",     NULL, true, 0 },
	{ "cluster_requests_pending", NULL, true, 0 },
	{ "nbd_exports",            NULL, true, 0 },
	{ "nbd_connections",        NULL, true, 0 },
	{ "nbd_bytes_read",         "ramster_nbd_read_bytes_total",        false, 0 },
	{ "nbd_bytes_written",      "ramster_nbd_written_bytes_total",     false, 0 },
	{ "loop_busy_poll_us",      "ramster_loop_busy_poll_seconds_total", false, 1e-6 },
	{ "loop_busy_poll_window_us", NULL, true, 0 },
};
/* clang-format on */

static const struct metrics_name *metrics_lookup(const char *stat)
{
	size_t i;

	for (i = 0; i < sizeof(metrics_names) / sizeof(metrics_names[0]); i++)
		if (!strcmp(metrics_names[i].stat, stat))
			return &metrics_names[i];
	return NULL;
}

/* The family of stat into out: ramster_ + stat with its unit and suffix. */
static void metrics_family(const char *stat, const struct metrics_name *mn, char *out, size_t len)
{
	size_t n, i;
	const char *unit = "";

	if (mn && mn->family) {
		snprintf(out, len, "%s", mn->family);
		return;
	}
	n = strlen(stat);
	if (n > 2 && !strcmp(stat + n - 2, "_s")) {
		n -= 2;
		unit = "_seconds";
	}
	if (n > 6 && !strcmp(stat + n - 6, "_total"))
		n -= 6; /* node_clients_total: the suffix is added back for a counter */
	snprintf(out, len, "ramster_%.*s%s%s", (int)n, stat, unit, mn && mn->gauge ? "" : "_total");
	/* a family name is [a-zA-Z_:][a-zA-Z0-9_:]*: anything else becomes '_' */
	for (i = 0; out[i]; i++)
		if (!((out[i] >= 'a' && out[i] <= 'z') || (out[i] >= 'A' && out[i] <= 'Z') ||
		      (out[i] >= '0' && out[i] <= '9') || out[i] == '_' || out[i] == ':'))
			out[i] = '_';
}

/* HELP text: backslash and newline escaped. */
static void metrics_help(FILE *f, const char *family, const char *help)
{
	fprintf(f, "# HELP %s ", family);
	for (; *help; help++) {
		if (*help == '\\')
			fputs("\\\\", f);
		else if (*help == '\n')
			fputs("\\n", f);
		else
			fputc(*help, f);
	}
	fputc('\n', f);
}

/* A label value: backslash, double quote and newline escaped. */
static void metrics_label(FILE *f, const char *v)
{
	fputc('"', f);
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fprintf(f, "\\%c", *v);
		else if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
	fputc('"', f);
}

static void metrics_head(FILE *f, const char *family, const char *type, const char *help)
{
	metrics_help(f, family, help);
	fprintf(f, "# TYPE %s %s\n", family, type);
}

/* ---- rendering (the loop's thread) ------------------------------------------------- */

static void metrics_counter(void *arg, const char *name, uint64_t value, const char *help)
{
	FILE *f = arg;
	const struct metrics_name *mn = metrics_lookup(name);
	char family[128];
	const char *type = mn && mn->gauge ? "gauge" : "counter";

	metrics_family(name, mn, family, sizeof(family));
	metrics_head(f, family, type, help); /* a counter's HELP and TYPE name NAME_total too */
	if (mn && mn->scale)
		fprintf(f, "%s %.9g\n", family, (double)value * mn->scale);
	else
		fprintf(f, "%s %llu\n", family, (unsigned long long)value);
}

static void metrics_peers(FILE *f, const struct client_env *env)
{
	static const char *const states[] = {"up", "connecting", "down", "unreachable"};
	struct cluster_peer_info info[CONFIG_NODES_MAX];
	size_t n, i, s;

	if (!env->remote)
		return;
	n = cluster_peers(remote_cluster(env->remote), info, CONFIG_NODES_MAX);
	if (n > CONFIG_NODES_MAX)
		n = CONFIG_NODES_MAX;
	if (!n)
		return;

#define PEER_LABELS(i)                                                                             \
	do {                                                                                       \
		fputs("{peer=", f);                                                                \
		metrics_label(f, info[i].name);                                                    \
		fprintf(f, ",peer_id=\"%u\"", info[i].id);                                         \
	} while (0)

	metrics_head(f, "ramster_peer_state", "gauge",
		     "the link to the peer: 1 for its state now (up, connecting, down, unreachable)");
	for (i = 0; i < n; i++)
		for (s = 0; s < sizeof(states) / sizeof(states[0]); s++) {
			fputs("ramster_peer_state", f);
			PEER_LABELS(i);
			fprintf(f, ",state=\"%s\"} %d\n", states[s],
				!strcmp(info[i].state, states[s]));
		}
	metrics_head(f, "ramster_peer_up", "gauge", "1 if the peer's link is up");
	for (i = 0; i < n; i++) {
		fputs("ramster_peer_up", f);
		PEER_LABELS(i);
		fprintf(f, "} %d\n", !strcmp(info[i].state, "up"));
	}
	metrics_head(f, "ramster_peer_rtt_seconds", "gauge",
		     "smoothed heartbeat round trip to the peer (absent while its link is down)");
	for (i = 0; i < n; i++) {
		if (strcmp(info[i].state, "up"))
			continue; /* cluster_rtt_us is a sentinel then, not a time */
		fputs("ramster_peer_rtt_seconds", f);
		PEER_LABELS(i);
		fprintf(f, "} %.9g\n", info[i].rtt_us / 1e6);
	}
	metrics_head(f, "ramster_peer_pages_lent", "gauge",
		     "pages the peer holds for this node (its last heartbeat)");
	for (i = 0; i < n; i++) {
		fputs("ramster_peer_pages_lent", f);
		PEER_LABELS(i);
		fprintf(f, "} %llu\n", (unsigned long long)info[i].pages_there);
	}
	metrics_head(f, "ramster_peer_pages_borrowed", "gauge",
		     "pages this node holds for the peer (its foreign store)");
	for (i = 0; i < n; i++) {
		fputs("ramster_peer_pages_borrowed", f);
		PEER_LABELS(i);
		fprintf(f, "} %llu\n",
			(unsigned long long)remote_pages_held_for(env->remote, info[i].id));
	}
	metrics_head(f, "ramster_peer_donate_free_bytes", "gauge",
		     "room the peer can still lend (its last heartbeat)");
	for (i = 0; i < n; i++) {
		fputs("ramster_peer_donate_free_bytes", f);
		PEER_LABELS(i);
		fprintf(f, "} %llu\n", (unsigned long long)info[i].donate_free);
	}
	metrics_head(f, "ramster_peer_donate_bytes", "gauge",
		     "the peer's whole donation, donate_mb (its last heartbeat)");
	for (i = 0; i < n; i++) {
		fputs("ramster_peer_donate_bytes", f);
		PEER_LABELS(i);
		fprintf(f, "} %llu\n", (unsigned long long)info[i].donate_total);
	}
	metrics_head(f, "ramster_peer_epoch", "gauge",
		     "this node's epoch for the peer (grows at each death or restart)");
	for (i = 0; i < n; i++) {
		fputs("ramster_peer_epoch", f);
		PEER_LABELS(i);
		fprintf(f, "} %u\n", info[i].epoch);
	}
	metrics_head(f, "ramster_peer_ups_total", "counter", "times the peer's link came up");
	for (i = 0; i < n; i++) {
		fputs("ramster_peer_ups_total", f);
		PEER_LABELS(i);
		fprintf(f, "} %llu\n", (unsigned long long)info[i].ups);
	}
	metrics_head(f, "ramster_peer_deaths_total", "counter", "times the peer was declared dead");
	for (i = 0; i < n; i++) {
		fputs("ramster_peer_deaths_total", f);
		PEER_LABELS(i);
		fprintf(f, "} %llu\n", (unsigned long long)info[i].deaths);
	}
#undef PEER_LABELS
}

static void metrics_exports(FILE *f, const struct client_env *env)
{
	size_t n = nbd_export_count(env->nbd), i;
	struct nbd_export_info *info;

	if (!n)
		return;
	info = calloc(n, sizeof(*info));
	if (!info)
		return;
	for (i = 0; i < n; i++)
		nbd_export_info(env->nbd, i, &info[i]);

#define EXPORT_SERIES(family, field, fmt_extra)                                                    \
	for (i = 0; i < n; i++) {                                                                  \
		fputs(family "{export=", f);                                                       \
		metrics_label(f, info[i].name);                                                    \
		fprintf(f, "%s} %llu\n", fmt_extra, (unsigned long long)info[i].field);            \
	}

	metrics_head(f, "ramster_export_size_bytes", "gauge", "the export's size");
	EXPORT_SERIES("ramster_export_size_bytes", size, "");
	metrics_head(f, "ramster_export_pages", "gauge",
		     "the export's stored blocks by where their data is (local tier, a peer, "
		     "the backing file only)");
	EXPORT_SERIES("ramster_export_pages", pages_local, ",where=\"local\"");
	EXPORT_SERIES("ramster_export_pages", pages_remote, ",where=\"remote\"");
	EXPORT_SERIES("ramster_export_pages", pages_backing, ",where=\"backing\"");
	metrics_head(f, "ramster_export_clients", "gauge", "NBD connections attached now");
	EXPORT_SERIES("ramster_export_clients", clients, "");
	metrics_head(f, "ramster_export_requests_total", "counter", "transmission requests served");
	EXPORT_SERIES("ramster_export_requests_total", requests, "");
	metrics_head(f, "ramster_export_errors_total", "counter", "error replies sent");
	EXPORT_SERIES("ramster_export_errors_total", errors, "");
#undef EXPORT_SERIES
	free(info);
}

char *metrics_render(const struct client_env *env, size_t *len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	if (!f)
		return NULL;
	metrics_head(f, "ramster_build_info", "gauge",
		     "1, labelled with the version and node name");
	fputs("ramster_build_info{version=", f);
	metrics_label(f, env->version ? env->version : "");
	fputs(",node=", f);
	metrics_label(f, env->node_name ? env->node_name : "");
	fputs("} 1\n", f);
	counters_foreach(env, metrics_counter, f);
	metrics_peers(f, env);
	metrics_exports(f, env);
	if (ferror(f)) {
		fclose(f);
		free(buf);
		return NULL;
	}
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	*len = n;
	return buf;
}

/* The loop: a scrape asked for a fresh page. */
static void metrics_wake_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct metrics *m = (struct metrics *)w;
	size_t len = 0;
	char *text = metrics_render(m->env, &len);

	if (text)
		atomic_fetch_add(&m->renders, 1);
	else
		atomic_fetch_add(&m->oom, 1);
	pthread_mutex_lock(&m->lock);
	if (text) {
		free(m->text);
		m->text = text;
		m->len = len;
		m->at_ns = clock_now_ns();
	}
	m->gen++; /* a failed rendering releases the scrape too (with the old page) */
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
}

/* ---- serving (libmicrohttpd's thread) ---------------------------------------------- */

static enum MHD_Result metrics_answer(struct MHD_Connection *conn, unsigned status, char *body,
				      size_t len, const char *type)
{
	struct MHD_Response *rsp =
	    MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	enum MHD_Result rc;

	if (!rsp) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(rsp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	rc = MHD_queue_response(conn, status, rsp);
	MHD_destroy_response(rsp);
	return rc;
}

static enum MHD_Result metrics_text(struct MHD_Connection *conn, unsigned status, const char *msg)
{
	char *body = strdup(msg);

	return body ? metrics_answer(conn, status, body, strlen(body), "text/plain; charset=utf-8")
		    : MHD_NO;
}

/* A fresh page from the loop (or, if it does not answer in time, the last one). */
static enum MHD_Result metrics_scrape(struct metrics *m, struct MHD_Connection *conn)
{
	static const char tail_fmt[] =
	    "# HELP ramster_metrics_snapshot_age_seconds how old the figures above are (a stalled "
	    "event loop makes this grow)\n"
	    "# TYPE ramster_metrics_snapshot_age_seconds gauge\n"
	    "ramster_metrics_snapshot_age_seconds %.6f\n";
	struct timespec ts;
	uint64_t target, now;
	bool fresh;
	char *body = NULL;
	size_t len = 0, cap;
	int n;

	pthread_mutex_lock(&m->lock);
	target = m->gen + 1;
	pthread_mutex_unlock(&m->lock);
	ev_async_send(m->loop, &m->wake);

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += METRICS_WAIT_MS / 1000;
	ts.tv_nsec += (long)(METRICS_WAIT_MS % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&m->lock);
	while (m->gen < target && !m->closing)
		if (pthread_cond_timedwait(&m->cond, &m->lock, &ts) == ETIMEDOUT)
			break;
	fresh = m->gen >= target;
	if (m->text) {
		cap = m->len + sizeof(tail_fmt) + 32;
		body = malloc(cap);
		if (body) {
			memcpy(body, m->text, m->len);
			now = clock_now_ns();
			n = snprintf(body + m->len, cap - m->len, tail_fmt,
				     (double)(now - m->at_ns) / 1e9);
			len = m->len + (size_t)(n > 0 ? n : 0);
		}
	}
	pthread_mutex_unlock(&m->lock);

	if (!body && len == 0 && !fresh) {
		atomic_fetch_add(&m->unavailable, 1);
		return metrics_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
				    "the node's event loop did not answer\n");
	}
	if (!body) {
		atomic_fetch_add(&m->oom, 1);
		return metrics_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
	}
	if (!fresh)
		atomic_fetch_add(&m->stale, 1);
	atomic_fetch_add(&m->scrapes, 1);
	return metrics_answer(conn, MHD_HTTP_OK, body, len, METRICS_CONTENT_TYPE);
}

static enum MHD_Result metrics_handler(void *cls, struct MHD_Connection *conn, const char *url,
				       const char *method, const char *version,
				       const char *upload_data, size_t *upload_data_size,
				       void **con_cls)
{
	struct metrics *m = cls;

	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD)) {
		atomic_fetch_add(&m->bad_method, 1);
		return metrics_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET /metrics\n");
	}
	if (*upload_data_size) {
		*upload_data_size = 0; /* a GET with a body: ignore the body */
		return MHD_YES;
	}
	if (!strcmp(url, "/metrics"))
		return metrics_scrape(m, conn);
	if (!strcmp(url, "/"))
		return metrics_text(conn, MHD_HTTP_OK, "ramsterd: the metrics are at /metrics\n");
	atomic_fetch_add(&m->not_found, 1);
	return metrics_text(conn, MHD_HTTP_NOT_FOUND, "not found: the metrics are at /metrics\n");
}

static void __attribute__((format(printf, 2, 0)))
metrics_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[256];

	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	log_warn("metrics: %s", line);
}

/* ---- life cycle ------------------------------------------------------------------ */

/* HOST:PORT (or [V6]:PORT) into a socket address. @return 0 or -EINVAL with err set. */
static int metrics_resolve(const char *listen, struct sockaddr_storage *ss, char *err,
			   size_t errlen)
{
	char host[CONFIG_NAME_MAX + 2];
	const char *colon = strrchr(listen, ':');
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
	struct addrinfo *ai = NULL;
	size_t hlen;
	int rc;

	if (!colon || colon == listen || (size_t)(colon - listen) >= sizeof(host)) {
		snprintf(err, errlen, "metrics_listen: '%s' is not HOST:PORT", listen);
		return -EINVAL;
	}
	hlen = (size_t)(colon - listen);
	memcpy(host, listen, hlen);
	host[hlen] = '\0';
	if (host[0] == '[' && hlen > 2 && host[hlen - 1] == ']') {
		memmove(host, host + 1, hlen - 2);
		host[hlen - 2] = '\0';
	}
	rc = getaddrinfo(host, colon + 1, &hints, &ai);
	if (rc) {
		snprintf(err, errlen, "metrics_listen %s: %s", listen, gai_strerror(rc));
		return -EINVAL;
	}
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	return 0;
}

struct metrics *metrics_create(const struct client_env *env, const char *listen, char *err,
			       size_t errlen)
{
	struct sockaddr_storage ss = {0};
	pthread_condattr_t ca;
	sigset_t all, old;
	struct metrics *m;
	uint16_t port;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;

	if (metrics_resolve(listen, &ss, err, errlen))
		return NULL;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	m = calloc(1, sizeof(*m));
	if (!m) {
		snprintf(err, errlen, "metrics: out of memory");
		return NULL;
	}
	m->loop = env->loop;
	m->env = env;
	pthread_mutex_init(&m->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&m->cond, &ca);
	pthread_condattr_destroy(&ca);
	ev_async_init(&m->wake, metrics_wake_cb);
	ev_async_start(m->loop, &m->wake);

	/* the server's thread takes no signal: the loop's ev_signal watchers get them */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
					      : ((struct sockaddr_in *)&ss)->sin_port);
	m->d = MHD_start_daemon(
	    flags, port, NULL, NULL, metrics_handler, m, MHD_OPTION_EXTERNAL_LOGGER,
	    metrics_mhd_log, m, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
	    MHD_OPTION_CONNECTION_LIMIT, METRICS_CONN_LIMIT, MHD_OPTION_CONNECTION_TIMEOUT,
	    METRICS_CONN_TIMEOUT, MHD_OPTION_END);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!m->d) {
		snprintf(err, errlen,
			 "metrics_listen %s: cannot serve there (address in use or not local; "
			 "see the warning above)",
			 listen);
		metrics_destroy(m);
		return NULL;
	}
	return m;
}

void metrics_destroy(struct metrics *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	m->closing = true;
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
	if (m->d)
		MHD_stop_daemon(m->d);
	ev_async_stop(m->loop, &m->wake);
	free(m->text);
	pthread_cond_destroy(&m->cond);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

void metrics_foreach_stat(struct metrics *m,
			  void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			  void *arg)
{
	fn(arg, "metrics_scrapes", atomic_load(&m->scrapes), "GET /metrics answered");
	fn(arg, "metrics_stale_scrapes", atomic_load(&m->stale),
	   "scrapes answered with an older page: the loop did not render in time");
	fn(arg, "metrics_unavailable", atomic_load(&m->unavailable),
	   "scrapes refused (503): the loop had never rendered a page");
	fn(arg, "metrics_not_found", atomic_load(&m->not_found), "requests for another path (404)");
	fn(arg, "metrics_bad_method", atomic_load(&m->bad_method),
	   "requests with another method than GET or HEAD (405)");
	fn(arg, "metrics_oom", atomic_load(&m->oom),
	   "renderings or answers that ran out of memory");
	fn(arg, "metrics_renders", atomic_load(&m->renders), "pages the event loop rendered");
}
