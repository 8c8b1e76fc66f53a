/*
 * nbd_limits.c - bounds on the NBD frontend's connections (issue 14): at
 * most nbd_max_connections at once (more are closed at accept), a handshake
 * that must end within nbd_handshake_timeout_ms, and a transmission-phase
 * connection with no socket activity for nbd_idle_timeout_ms (no request
 * read, no reply byte taken: a client that stopped reading its replies
 * counts as idle) is closed. With NBD_OUT_HIGH and one request's payload a
 * connection's hold, this bounds the frontend's memory. Loop thread only.
 */
#include <unistd.h>

#include "common/util.h"
#include "node/log.h"
#include "node/nbd/nbd_int.h"

#define NBD_LIMITS_WARN_EVERY 10.0 /* s between refusal warnings */

static void nbd_limits_sweep_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct nbd *n = container_of(w, struct nbd, lim.sweep);
	struct nbd_conn *c, *next;
	ev_tstamp now = ev_now(loop);

	for (c = n->conns; c; c = next) {
		next = c->next;
		if (!c->transmit && now - c->since >= n->lim.handshake_s) {
			n->lim.handshake_timeouts++;
			log_info("nbd connection %llu: no handshake after %.1f s: closing",
				 (unsigned long long)c->id, now - c->since);
			nbd_close(c, "handshake timeout");
		} else if (c->transmit && !c->busy && !c->pending &&
			   now - c->active >= n->lim.idle_s) {
			n->lim.idle_timeouts++;
			log_info("nbd connection %llu: idle for %.0f s: closing",
				 (unsigned long long)c->id, now - c->active);
			nbd_close(c, "idle timeout");
		}
	}
}

void nbd_limits_start(struct nbd *n, const struct config_limits *lim)
{
	double period;

	n->lim.max_conns = lim->nbd_max_connections ? lim->nbd_max_connections : 64;
	n->lim.handshake_s =
	    (lim->nbd_handshake_timeout_ms ? lim->nbd_handshake_timeout_ms : 10000) / 1000.0;
	n->lim.idle_s = (lim->nbd_idle_timeout_ms ? lim->nbd_idle_timeout_ms : 600000) / 1000.0;
	n->lim.warned = -NBD_LIMITS_WARN_EVERY;
	period = n->lim.handshake_s < n->lim.idle_s ? n->lim.handshake_s : n->lim.idle_s;
	period /= 4;
	if (period > 1.0)
		period = 1.0;
	ev_timer_init(&n->lim.sweep, nbd_limits_sweep_cb, period, period);
	ev_timer_start(n->loop, &n->lim.sweep);
}

void nbd_limits_stop(struct nbd *n)
{
	ev_timer_stop(n->loop, &n->lim.sweep);
}

bool nbd_limits_admit(struct nbd *n, int fd)
{
	if (n->st.conns < n->lim.max_conns)
		return true;
	n->lim.refused++;
	if (ev_now(n->loop) - n->lim.warned >= NBD_LIMITS_WARN_EVERY) {
		log_warn("NBD connection refused: %u open (nbd_max_connections)", n->lim.max_conns);
		n->lim.warned = ev_now(n->loop);
	}
	close(fd);
	return false;
}

void nbd_limits_foreach_stat(const struct nbd *n,
			     void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			     void *arg)
{
	fn(arg, "nbd_connections_refused", n->lim.refused,
	   "NBD connections closed at accept: nbd_max_connections open");
	fn(arg, "nbd_handshake_timeouts", n->lim.handshake_timeouts,
	   "NBD connections closed: no handshake within nbd_handshake_timeout_ms");
	fn(arg, "nbd_idle_timeouts", n->lim.idle_timeouts,
	   "NBD connections closed: idle for nbd_idle_timeout_ms");
}
