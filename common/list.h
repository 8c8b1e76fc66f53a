/*
 * list.h - an intrusive, circular, doubly linked list (the kernel's shape):
 * a struct list_head in the owner, O(1) add and delete, no allocation. An
 * empty list (and a deleted entry) points at itself, so deleting twice is
 * harmless. No locking: the owner of the list says which lock guards it.
 */
#ifndef RAMSTER_COMMON_LIST_H
#define RAMSTER_COMMON_LIST_H

#include <stdbool.h>

#include "common/util.h"

struct list_head {
	struct list_head *next, *prev;
};

static inline void list_init(struct list_head *h)
{
	h->next = h;
	h->prev = h;
}

static inline bool list_empty(const struct list_head *h)
{
	return h->next == h;
}

static inline void list_insert(struct list_head *n, struct list_head *prev, struct list_head *next)
{
	n->prev = prev;
	n->next = next;
	prev->next = n;
	next->prev = n;
}

/* n at the front of h. */
static inline void list_add(struct list_head *h, struct list_head *n)
{
	list_insert(n, h, h->next);
}

/* n at the back of h. */
static inline void list_add_tail(struct list_head *h, struct list_head *n)
{
	list_insert(n, h->prev, h);
}

/* Take n off its list; n then reads as an empty list. */
static inline void list_del(struct list_head *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	list_init(n);
}

#define list_entry(ptr, type, member) container_of(ptr, type, member)
/* The first entry of a non-empty list. */
#define list_first_entry(h, type, member) list_entry((h)->next, type, member)

/* pos runs over the entries of h; the body may delete pos (tmp keeps the next). */
#define list_for_each_safe(pos, tmp, h)                                                            \
	for ((pos) = (h)->next, (tmp) = (pos)->next; (pos) != (h);                                 \
	     (pos) = (tmp), (tmp) = (pos)->next)

#endif /* RAMSTER_COMMON_LIST_H */
