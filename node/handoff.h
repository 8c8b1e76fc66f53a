/*
 * handoff.h - a queue that hands items from any thread to the event loop
 * (as memcached's connection queue hands connections to its workers): push
 * under a leaf mutex from anywhere, even under a tmem bucket lock; the loop
 * is woken through an ev_async and takes the whole list at once.
 *
 * Items are intrusive (struct handoff_item in the caller's struct; no
 * allocation here). The mutex is a leaf: nothing else is ever taken while it
 * is held, so it may be taken under any lock of the written order.
 */
#ifndef RAMSTER_NODE_HANDOFF_H
#define RAMSTER_NODE_HANDOFF_H

#include <pthread.h>

#include <stdbool.h>

#include <ev.h>

struct handoff_item {
	struct handoff_item *next;
};

/* Runs on the loop with the items pushed since the last run, oldest first. */
typedef void (*handoff_fn)(void *arg, struct handoff_item *list);

struct handoff {
	ev_async wake;          /* first: the watcher's address is the queue's */
	struct ev_loop *loop;
	pthread_mutex_t lock;   /* a leaf: guards head and tail only */
	struct handoff_item *head, **tail;
	handoff_fn fn;
	void *arg;
};

/* Set up q on loop (loop thread); fn(arg, list) runs on the loop. */
void handoff_init(struct handoff *q, struct ev_loop *loop, handoff_fn fn, void *arg);

/* Queue it and wake the loop. Any thread, any lock held. */
void handoff_push(struct handoff *q, struct handoff_item *it);

/* Whether nothing waits in q (any thread; a moment's answer). */
bool handoff_empty(struct handoff *q);

/*
 * Stop watching (loop thread; after every pusher has stopped).
 * @return what was pushed and not yet taken, oldest first, for the caller to free.
 */
struct handoff_item *handoff_fini(struct handoff *q);

#endif /* RAMSTER_NODE_HANDOFF_H */
