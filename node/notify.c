/*
 * notify.c - sd_notify for the node (notify.h): readiness, status lines and
 * the watchdog, through libsystemd.
 *
 * One state per process (sd_notify's socket is the process's). The timer
 * lives on the node's loop and nowhere else: a ping proves the loop still
 * turns, which is what systemd's watchdog should judge. The status line is
 * rebuilt on each tick from the node's own figures (clients, peers up, the
 * drain's pages left) and sent only when it changed.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-daemon.h>

#include "node/cluster/cluster.h"
#include "node/log.h"
#include "node/notify.h"
#include "node/remote/remote.h"

#define NOTIFY_STATUS_MAX   200
#define NOTIFY_TICK_MAX_US  1000000 /* status refreshed at least this often */
#define NOTIFY_PEERS_MAX    64      /* node ids are 1..64 */

static struct {
	bool on;		   /* $NOTIFY_SOCKET was set at notify_ready */
	bool stopping;
	const struct client_env *env;
	char cluster[64];
	ev_timer tick;		   /* on env->loop, while on */
	uint64_t watchdog_usec;	   /* 0: no watchdog asked for */
	char last[NOTIFY_STATUS_MAX]; /* the STATUS last sent */
	struct cluster_peer_info peers[NOTIFY_PEERS_MAX];
	uint64_t sent;		   /* messages the manager took */
	uint64_t errors;	   /* messages that failed to send */
	uint64_t pings;		   /* WATCHDOG=1 sent */
} nt;

/* sd_notify with the counters; 0 without a socket is neither. */
static int notify_send(const char *msg)
{
	int r = sd_notify(0, msg);

	if (r > 0)
		nt.sent++;
	else if (r < 0)
		nt.errors++;
	return r;
}

static void notify_send_status(const char *status)
{
	char msg[NOTIFY_STATUS_MAX + 8];

	snprintf(msg, sizeof(msg), "STATUS=%s", status);
	if (notify_send(msg) > 0)
		snprintf(nt.last, sizeof(nt.last), "%s", status);
}

void notify_status(const char *fmt, ...)
{
	char status[NOTIFY_STATUS_MAX];
	va_list ap;

	if (!getenv("NOTIFY_SOCKET"))
		return;
	va_start(ap, fmt);
	vsnprintf(status, sizeof(status), fmt, ap);
	va_end(ap);
	notify_send_status(status);
}

struct notify_drain {
	uint64_t active, pages_left;
};

static void notify_drain_stat(void *arg, const char *name, uint64_t value, const char *help)
{
	struct notify_drain *d = arg;

	if (!strcmp(name, "drain_active"))
		d->active = value;
	else if (!strcmp(name, "drain_pages_left"))
		d->pages_left = value;
}

/* What the node does now, in one line. */
static void notify_describe(char *buf, size_t len)
{
	const struct client_env *env = nt.env;
	uint64_t clients = env->stats->clients;
	struct notify_drain d = {0};
	size_t i, n, up = 0, never = 0;
	int w = 0;

	if (nt.stopping) {
		snprintf(buf, len, "stopping");
		return;
	}
	if (!env->remote) {
		snprintf(buf, len, "serving %llu client%s on %s", (unsigned long long)clients,
			 clients == 1 ? "" : "s", env->socket_path);
		return;
	}
	n = cluster_peers(remote_cluster(env->remote), nt.peers, NOTIFY_PEERS_MAX);
	if (n > NOTIFY_PEERS_MAX)
		n = NOTIFY_PEERS_MAX;
	for (i = 0; i < n; i++) {
		up += !strcmp(nt.peers[i].state, "up");
		never += !nt.peers[i].ups;
	}
	remote_foreach_stat(env->remote, notify_drain_stat, &d);
	if (d.active && d.pages_left)
		w = snprintf(buf, len, "draining: %llu pages left to hand back; ",
			     (unsigned long long)d.pages_left);
	else if (d.active)
		w = snprintf(buf, len, "drained: holds no page for peers; ");
	else if (never)
		w = snprintf(buf, len, "joining cluster '%s': ", nt.cluster);
	if (w < 0 || (size_t)w >= len)
		return;
	snprintf(buf + w, len - (size_t)w, "%s%zu of %zu peers up, %llu client%s",
		 w ? "" : "serving: ", up, n, (unsigned long long)clients, clients == 1 ? "" : "s");
}

static void notify_tick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	char status[NOTIFY_STATUS_MAX];

	if (nt.watchdog_usec && notify_send("WATCHDOG=1") > 0)
		nt.pings++;
	notify_describe(status, sizeof(status));
	if (strcmp(status, nt.last))
		notify_send_status(status);
}

int notify_ready(const struct client_env *env, const char *cluster)
{
	char status[NOTIFY_STATUS_MAX], msg[NOTIFY_STATUS_MAX + 16];
	uint64_t usec = 0;
	double tick;
	int r;

	if (!getenv("NOTIFY_SOCKET"))
		return 0;
	nt.on = true;
	nt.stopping = false;
	nt.last[0] = '\0';
	nt.env = env;
	snprintf(nt.cluster, sizeof(nt.cluster), "%s", cluster ? cluster : "");
	r = sd_watchdog_enabled(0, &usec);
	if (r < 0)
		log_warn("watchdog: bad $WATCHDOG_USEC or $WATCHDOG_PID (%s): not pinging",
			 strerror(-r));
	nt.watchdog_usec = r > 0 ? usec : 0;

	notify_describe(status, sizeof(status));
	snprintf(msg, sizeof(msg), "READY=1\nSTATUS=%s", status);
	r = notify_send(msg);
	if (r > 0)
		snprintf(nt.last, sizeof(nt.last), "%s", status);
	else
		log_warn("sd_notify READY=1 to %s failed: %s", getenv("NOTIFY_SOCKET"),
			 r ? strerror(-r) : "no socket");

	tick = NOTIFY_TICK_MAX_US;
	if (nt.watchdog_usec && nt.watchdog_usec / 2 < NOTIFY_TICK_MAX_US)
		tick = (double)(nt.watchdog_usec / 2);
	ev_timer_init(&nt.tick, notify_tick_cb, 0., tick / 1e6);
	ev_timer_again(env->loop, &nt.tick);
	if (nt.watchdog_usec)
		log_info("watchdog: pinging systemd every %.0f ms (WatchdogSec %.3g s)", tick / 1e3,
			 (double)nt.watchdog_usec / 1e6);
	return r > 0 ? 0 : r ? r : -ENOTCONN;
}

void notify_stopping(void)
{
	if (!nt.on || nt.stopping)
		return;
	nt.stopping = true;
	notify_send("STOPPING=1\nSTATUS=stopping");
	snprintf(nt.last, sizeof(nt.last), "stopping");
}

void notify_stop(void)
{
	if (!nt.on)
		return;
	ev_timer_stop(nt.env->loop, &nt.tick);
	nt.on = false;
	nt.env = NULL;
}

uint64_t notify_watchdog_usec(void)
{
	return nt.watchdog_usec;
}

void notify_foreach_stat(void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			 void *arg)
{
	fn(arg, "systemd_notify_sent", nt.sent, "messages sent to the service manager (sd_notify)");
	fn(arg, "systemd_notify_errors", nt.errors, "messages to the service manager that failed");
	fn(arg, "systemd_watchdog_pings", nt.pings, "WATCHDOG=1 pings sent from the event loop");
}
