/*
 * notify.h - telling the service manager what the node does (sd_notify):
 * READY=1 once the node serves clients, STATUS= lines (starting, joining,
 * serving, draining, stopping), STOPPING=1 on a stop, and WATCHDOG=1 pings
 * from a timer on the node's event loop, so a loop that stalls stops the
 * pings and systemd (WatchdogSec=) sees it.
 *
 * Without $NOTIFY_SOCKET (not run by systemd as Type=notify) every call does
 * nothing and no timer runs. All calls are made on the event loop's thread.
 */
#ifndef RAMSTER_NODE_NOTIFY_H
#define RAMSTER_NODE_NOTIFY_H

#include <stdint.h>

#include "node/client/client.h"

/* Send STATUS=<formatted line> (at most 200 bytes), e.g. "starting". */
void notify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * The node serves clients: send READY=1 and a first STATUS, and start the
 * loop's timer on env->loop that pings the watchdog ($WATCHDOG_USEC: every
 * half of it) and refreshes STATUS when what it says changes (every second
 * at most). env (and what it points to) must outlive notify_stop; cluster is
 * the collective's name ("" or NULL: none). @return 0, or -errno when the
 * READY message could not be sent (the node runs on regardless).
 */
int notify_ready(const struct client_env *env, const char *cluster);

/* The node stops: send STOPPING=1 and STATUS=stopping. Safe from a signal watcher. */
void notify_stopping(void);

/* Stop the timer (before the loop is destroyed). Safe without notify_ready. */
void notify_stop(void);

/* The watchdog interval asked for in microseconds, 0 when none (after notify_ready). */
uint64_t notify_watchdog_usec(void);

/* Counters: messages sent, failed sends, watchdog pings. */
void notify_foreach_stat(void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			 void *arg);

#endif /* RAMSTER_NODE_NOTIFY_H */
