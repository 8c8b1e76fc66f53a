/*
 * handoff.c - items from any thread to the event loop (handoff.h).
 */
#include "node/handoff.h"

static struct handoff_item *take_all(struct handoff *q)
{
	struct handoff_item *list;

	pthread_mutex_lock(&q->lock);
	list = q->head;
	q->head = NULL;
	q->tail = &q->head;
	pthread_mutex_unlock(&q->lock);
	return list;
}

static void handoff_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct handoff *q = (struct handoff *)w;
	struct handoff_item *list = take_all(q);

	if (list)
		q->fn(q->arg, list);
}

void handoff_init(struct handoff *q, struct ev_loop *loop, handoff_fn fn, void *arg)
{
	q->loop = loop;
	q->fn = fn;
	q->arg = arg;
	q->head = NULL;
	q->tail = &q->head;
	pthread_mutex_init(&q->lock, NULL);
	ev_async_init(&q->wake, handoff_cb);
	ev_async_start(loop, &q->wake);
}

void handoff_push(struct handoff *q, struct handoff_item *it)
{
	it->next = NULL;
	pthread_mutex_lock(&q->lock);
	*q->tail = it;
	q->tail = &it->next;
	pthread_mutex_unlock(&q->lock);
	ev_async_send(q->loop, &q->wake);
}

bool handoff_empty(struct handoff *q)
{
	bool empty;

	pthread_mutex_lock(&q->lock);
	empty = !q->head;
	pthread_mutex_unlock(&q->lock);
	return empty;
}

struct handoff_item *handoff_fini(struct handoff *q)
{
	struct handoff_item *list;

	ev_async_stop(q->loop, &q->wake);
	list = take_all(q);
	pthread_mutex_destroy(&q->lock);
	return list;
}
