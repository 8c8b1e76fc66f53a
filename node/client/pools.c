/*
 * pools.c - the node's pool directory (pools.h).
 *
 * Every pool is one entry on a list (oldest first, for listings); shared
 * entries are also chained in a hash by uuid. A client's table is an array
 * of entry pointers indexed by the client's pool id, grown on demand up to
 * POOLS_CLIENT_MAX. An entry counts its holds (ids naming it) and its
 * distinct clients; the last hold destroys the tmem pool and the entry.
 *
 * Every entry has a random token. When a client's connection ends, an entry
 * whose last hold it was is detached rather than destroyed (grace_ms > 0):
 * it stays on the list, held by nobody, until the grace ends (pools_expire)
 * or a connection of the same uid attaches it by its token.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/util.h"
#include "node/client/pools.h"

#define POOLS_BUCKETS	256
#define POOLS_TABLE_MIN 8

struct pools_entry {
	struct pools_entry *next, *prev; /* every pool, oldest first */
	struct pools_entry *hnext;	 /* shared: next in the uuid bucket */
	uint32_t pool;
	unsigned flags;
	unsigned char uuid[POOLS_UUID_LEN];
	uint32_t clients;
	uint32_t holds;
	uint64_t owner;
	uid_t uid;
	gid_t gid;
	unsigned mode;
	struct users_user *user;          /* charged to (NULL: none) */
	struct pools_entry *onext, *oprev; /* the pools user owns */
	unsigned char token[POOLS_TOKEN_LEN]; /* attaches it again (pools_attach) */
	bool detached;                    /* held by nobody until expire_ms */
	uint64_t expire_ms;
	uid_t detached_uid;               /* the uid of its last holder: it alone attaches it */
	bool restored;                    /* from a warm restart's image: attached as a join */
};

struct pools {
	struct tmem *t;
	struct pools_entry all; /* list head */
	struct pools_entry *buckets[POOLS_BUCKETS];
	uint64_t n_private;
	uint64_t n_shared;
	uint32_t grace_ms;  /* detached pools are kept this long (0: released at once) */
	uint64_t n_detached; /* detached now */
	struct pools_reattach_stats rs;
	void (*on_change)(void *arg, const struct pools *p); /* pools_set_on_change */
	void *on_change_arg;
};

struct pools_client {
	struct pools *p;
	uint64_t id;
	struct users *users;
	const struct users_cred *cred; /* NULL: privileged, charged to nobody */
	struct users_user *user;
	uint32_t cap;
	struct pools_entry **slot;
};

/* What pools_save writes changed: tell pools_set_on_change's fn. */
static void pools_changed(const struct pools *p)
{
	if (p->on_change)
		p->on_change(p->on_change_arg, p);
}

/* FNV-1a over the uuid. */
static unsigned pools_hash(const unsigned char *uuid)
{
	uint32_t h = 2166136261u;
	int i;

	for (i = 0; i < POOLS_UUID_LEN; i++)
		h = (h ^ uuid[i]) * 16777619u;
	return h % POOLS_BUCKETS;
}

static struct pools_entry *pools_lookup(const struct pools *p, const unsigned char *uuid)
{
	struct pools_entry *e;

	for (e = p->buckets[pools_hash(uuid)]; e; e = e->hnext)
		if (!memcmp(e->uuid, uuid, POOLS_UUID_LEN))
			return e;
	return NULL;
}

struct pools *pools_create(struct tmem *t)
{
	struct pools *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->t = t;
	p->all.next = p->all.prev = &p->all;
	return p;
}

/* Destroy e's tmem pool and forget e. */
static void pools_entry_free(struct pools *p, struct pools_entry *e)
{
	struct pools_entry **pp;

	(void)tmem_pool_destroy(p->t, e->pool);
	if (e->user) {
		if (e->oprev)
			e->oprev->onext = e->onext;
		else
			e->user->owned = e->onext;
		if (e->onext)
			e->onext->oprev = e->oprev;
		users_pool_drop(NULL, e->user);
	}
	e->prev->next = e->next;
	e->next->prev = e->prev;
	if (e->detached)
		p->n_detached--;
	if (e->flags & TMEM_SHARED) {
		for (pp = &p->buckets[pools_hash(e->uuid)]; *pp != e; pp = &(*pp)->hnext)
			;
		*pp = e->hnext;
		p->n_shared--;
	} else {
		p->n_private--;
	}
	free(e);
	pools_changed(p);
}

void pools_destroy(struct pools *p)
{
	if (!p)
		return;
	p->on_change = NULL; /* the node is stopping: nothing to keep */
	while (p->all.next != &p->all)
		pools_entry_free(p, p->all.next);
	free(p);
}

struct pools_client *pools_client_new(struct pools *p, uint64_t id)
{
	struct pools_client *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->p = p;
	c->id = id;
	return c;
}

void pools_client_set_cred(struct pools_client *c, struct users *u, const struct users_cred *cred,
			   struct users_user *uu)
{
	c->users = u;
	c->cred = cred;
	c->user = uu;
}

void pools_client_free(struct pools_client *c)
{
	uint32_t i;

	if (!c)
		return;
	for (i = 0; i < c->cap; i++)
		if (c->slot[i])
			pools_release(c, (int)i);
	free(c->slot);
	free(c);
}

static bool pools_client_holds(const struct pools_client *c, const struct pools_entry *e)
{
	uint32_t i;

	for (i = 0; i < c->cap; i++)
		if (c->slot[i] == e)
			return true;
	return false;
}

/* Grow c's table to at least cap ids (<= POOLS_CLIENT_MAX). @return 0 or -ENOMEM. */
static int pools_client_grow(struct pools_client *c, uint32_t cap)
{
	struct pools_entry **slot;

	if (cap <= c->cap)
		return 0;
	slot = realloc(c->slot, cap * sizeof(*slot));
	if (!slot)
		return -ENOMEM;
	memset(slot + c->cap, 0, (cap - c->cap) * sizeof(*slot));
	c->slot = slot;
	c->cap = cap;
	return 0;
}

/* @return the lowest free id of c (growing its table), or -ENOSPC / -ENOMEM. */
static int pools_client_free_id(struct pools_client *c)
{
	uint32_t i, cap;

	for (i = 0; i < c->cap; i++)
		if (!c->slot[i])
			return (int)i;
	if (c->cap >= POOLS_CLIENT_MAX)
		return -ENOSPC;
	cap = c->cap ? c->cap * 2 : POOLS_TABLE_MIN;
	if (cap > POOLS_CLIENT_MAX)
		cap = POOLS_CLIENT_MAX;
	i = c->cap;
	if (pools_client_grow(c, cap))
		return -ENOMEM;
	return (int)i;
}

/* Fill token with random bytes (getrandom: the kernel's CSPRNG). @return 0 or -errno. */
static int pools_token_new(unsigned char *token)
{
	size_t got = 0;
	ssize_t n;

	while (got < POOLS_TOKEN_LEN) {
		n = getrandom(token + got, POOLS_TOKEN_LEN - got, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	return 0;
}

/* A new entry over a new tmem pool. @return 0 with *out set, or -errno. */
static int pools_entry_new(struct pools_client *c, unsigned flags, const unsigned char *uuid,
			   unsigned mode, struct pools_entry **out)
{
	struct pools *p = c->p;
	struct pools_entry *e;
	uint64_t owner = c->id;
	int pool, rc;

	if (c->user) {
		rc = users_pool_take(c->users, c->user);
		if (rc)
			return rc;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		rc = -ENOMEM;
		goto drop;
	}
	rc = pools_token_new(e->token);
	if (rc) {
		free(e);
		goto drop;
	}
	pool = tmem_pool_new(p->t, flags);
	if (pool < 0) {
		free(e);
		rc = pool;
		goto drop;
	}
	if (c->user && c->user->tier_owner < TMEM_OWNERS_MAX)
		/* the tier's weighted eviction charges its pages to the uid */
		(void)tmem_pool_set_owner(p->t, (uint32_t)pool, c->user->tier_owner,
					  c->user->weight);
	e->mode = mode;
	if (c->cred) {
		e->uid = c->cred->uid;
		e->gid = c->cred->gid;
	}
	e->user = c->user;
	if (e->user) {
		e->onext = e->user->owned;
		if (e->onext)
			e->onext->oprev = e;
		e->user->owned = e;
	}
	e->pool = (uint32_t)pool;
	e->flags = flags;
	if (flags & TMEM_SHARED) {
		unsigned h = pools_hash(uuid);

		memcpy(e->uuid, uuid, POOLS_UUID_LEN);
		e->hnext = p->buckets[h];
		p->buckets[h] = e;
		p->n_shared++;
	} else {
		e->owner = owner;
		p->n_private++;
	}
	e->prev = p->all.prev;
	e->next = &p->all;
	p->all.prev->next = e;
	p->all.prev = e;
	*out = e;
	pools_changed(p);
	return 0;
drop:
	if (c->user)
		users_pool_drop(c->users, c->user);
	return rc;
}

/* The bits of e's mode that apply to cred (all for the privileged). */
static unsigned pools_access(const struct pools_entry *e, const struct users_cred *cred)
{
	if (!cred || cred->privileged)
		return USERS_READ | USERS_WRITE;
	if (!(e->flags & TMEM_SHARED))
		return e->uid == cred->uid ? USERS_READ | USERS_WRITE : 0;
	if (e->uid == cred->uid)
		return (e->mode >> 6) & 7;
	if (users_cred_in_group(cred, e->gid))
		return (e->mode >> 3) & 7;
	return e->mode & 7;
}

int pools_new(struct pools_client *c, unsigned flags, const unsigned char *uuid)
{
	return pools_new_mode(c, flags, uuid, 0);
}

int pools_new_mode(struct pools_client *c, unsigned flags, const unsigned char *uuid,
		   unsigned mode)
{
	struct pools *p = c->p;
	struct pools_entry *e;
	int id, rc;

	if (flags & ~(unsigned)(TMEM_PERSISTENT | TMEM_SHARED))
		return -EINVAL;
	if (!(flags & TMEM_SHARED) != !uuid)
		return -EINVAL;
	if (mode > 0777 || (mode && !(flags & TMEM_SHARED)))
		return -EINVAL;
	if (!mode)
		mode = USERS_MODE_DEFAULT;
	id = pools_client_free_id(c);
	if (id < 0)
		return id;
	e = uuid ? pools_lookup(p, uuid) : NULL;
	if (e) {
		if (!(pools_access(e, c->cred) & (USERS_READ | USERS_WRITE))) {
			if (c->user)
				c->user->refused_access++;
			return -EACCES;
		}
		if ((e->flags ^ flags) & TMEM_PERSISTENT)
			return -EINVAL;
		if (e->detached) {
			/* joined in its grace: it lives on, held by c */
			e->detached = false;
			p->n_detached--;
		}
		if (!pools_client_holds(c, e))
			e->clients++;
	} else {
		rc = pools_entry_new(c, flags, uuid, mode, &e);
		if (rc)
			return rc;
		e->clients = 1;
	}
	e->holds++;
	c->slot[id] = e;
	return id;
}

int pools_release(struct pools_client *c, int id)
{
	struct pools_entry *e;

	if (id < 0 || (uint32_t)id >= c->cap || !c->slot[id])
		return -ENOENT;
	e = c->slot[id];
	c->slot[id] = NULL;
	if (!pools_client_holds(c, e))
		e->clients--;
	if (--e->holds == 0)
		pools_entry_free(c->p, e);
	return 0;
}

int pools_resolve(const struct pools_client *c, int id, uint32_t *pool)
{
	if (id < 0 || (uint32_t)id >= c->cap || !c->slot[id])
		return -ENOENT;
	*pool = c->slot[id]->pool;
	return 0;
}

int pools_resolve_for(const struct pools_client *c, int id, unsigned need, uint32_t *pool,
		      struct users_user **owner)
{
	const struct pools_entry *e;

	if (id < 0 || (uint32_t)id >= c->cap || !c->slot[id])
		return -ENOENT;
	e = c->slot[id];
	if ((pools_access(e, c->cred) & need) != need) {
		if (c->user)
			c->user->refused_access++;
		return -EACCES;
	}
	*pool = e->pool;
	if (owner)
		*owner = e->user;
	return 0;
}

uint64_t pools_owner_pages(const struct pools *p, const struct users_user *uu, uint64_t *remote)
{
	const struct pools_entry *e;
	struct tmem_pool_info ti;
	uint64_t pages = 0, rem = 0;

	for (e = uu->owned; e; e = e->onext)
		if (!tmem_pool_info(p->t, e->pool, &ti)) {
			pages += ti.pages;
			rem += ti.remote;
		}
	if (remote)
		*remote = rem;
	return pages;
}

bool pools_visible(const struct pools_info *info, const struct users_cred *cred)
{
	struct pools_entry e = {.flags = info->flags, .uid = info->uid, .gid = info->gid,
				.mode = info->mode};

	return pools_access(&e, cred) != 0;
}

void pools_foreach(const struct pools *p, void (*fn)(void *arg, const struct pools_info *info),
		   void *arg)
{
	const struct pools_entry *e;
	struct pools_info info;

	for (e = p->all.next; e != &p->all; e = e->next) {
		info.pool = e->pool;
		info.flags = e->flags;
		memcpy(info.uuid, e->uuid, POOLS_UUID_LEN);
		info.clients = e->clients;
		info.holds = e->holds;
		info.owner = e->owner;
		info.uid = e->uid;
		info.gid = e->gid;
		info.mode = e->mode;
		info.user = e->user;
		info.detached = e->detached;
		fn(arg, &info);
	}
}

void pools_count(const struct pools *p, uint64_t *private_pools, uint64_t *shared_pools)
{
	*private_pools = p->n_private;
	*shared_pools = p->n_shared;
}

/* ---- detach and attach ------------------------------------------------------- */

void pools_set_on_change(struct pools *p, void (*fn)(void *arg, const struct pools *p),
			 void *arg)
{
	p->on_change = fn;
	p->on_change_arg = arg;
}

void pools_set_grace(struct pools *p, uint32_t grace_ms)
{
	p->grace_ms = grace_ms;
}

int pools_token(const struct pools_client *c, int id, unsigned char *token)
{
	if (id < 0 || (uint32_t)id >= c->cap || !c->slot[id])
		return -ENOENT;
	memcpy(token, c->slot[id]->token, POOLS_TOKEN_LEN);
	return 0;
}

/* Take c's last hold of slot id's entry off it and keep the entry until now_ms + grace. */
static void pools_detach(struct pools_client *c, uint32_t id, uint64_t now_ms)
{
	struct pools_entry *e = c->slot[id];

	c->slot[id] = NULL;
	e->holds = 0;
	e->clients = 0;
	e->detached = true;
	e->expire_ms = now_ms + c->p->grace_ms;
	e->detached_uid = c->cred ? c->cred->uid : 0;
	c->p->n_detached++;
	c->p->rs.detached++;
}

void pools_client_close(struct pools_client *c, uint64_t now_ms)
{
	uint32_t i;

	if (!c)
		return;
	for (i = 0; i < c->cap; i++) {
		if (!c->slot[i])
			continue;
		/* another id of c or another client still holds it: a plain release */
		if (c->p->grace_ms && c->slot[i]->holds == 1)
			pools_detach(c, i, now_ms);
		else
			pools_release(c, (int)i);
	}
	pools_client_free(c);
}

static struct pools_entry *pools_by_token(const struct pools *p, const unsigned char *token)
{
	struct pools_entry *e;

	/* attaching is rare (after a reconnect): a walk of the list will do */
	for (e = p->all.next; e != &p->all; e = e->next)
		if (!memcmp(e->token, token, POOLS_TOKEN_LEN))
			return e;
	return NULL;
}

/* @return want when it is a free id of c (growing the table), else c's lowest free id. */
static int pools_attach_id(struct pools_client *c, int want)
{
	if (want >= 0 && want < POOLS_CLIENT_MAX) {
		uint32_t cap = c->cap ? c->cap : POOLS_TABLE_MIN;

		while (cap <= (uint32_t)want)
			cap *= 2;
		if (cap > POOLS_CLIENT_MAX)
			cap = POOLS_CLIENT_MAX;
		if (!pools_client_grow(c, cap) && !c->slot[want])
			return want;
	}
	return pools_client_free_id(c);
}

/* Whether c may attach e: a detached pool its last holder's uid alone, a held one as a join. */
static bool pools_attach_allowed(const struct pools_client *c, const struct pools_entry *e)
{
	if (!c->cred)
		return true;
	if (e->detached && (!e->restored || !(e->flags & TMEM_SHARED)))
		return e->detached_uid == c->cred->uid;
	return (pools_access(e, c->cred) & (USERS_READ | USERS_WRITE)) != 0;
}

int pools_attach(struct pools_client *c, const unsigned char *token, size_t len, int want)
{
	struct pools *p = c->p;
	struct pools_entry *e;
	int id;

	if (!token || len != POOLS_TOKEN_LEN)
		return -EINVAL;
	e = pools_by_token(p, token);
	if (!e)
		return -ENOENT; /* expired, destroyed, or never made here (a cold restart) */
	if (!pools_attach_allowed(c, e)) {
		p->rs.attach_refused++;
		if (c->user)
			c->user->refused_access++;
		return -EACCES;
	}
	id = pools_attach_id(c, want);
	if (id < 0)
		return id;
	if (e->detached) {
		e->detached = false;
		p->n_detached--;
	}
	if (!(e->flags & TMEM_SHARED))
		e->owner = c->id;
	if (!pools_client_holds(c, e))
		e->clients++;
	e->holds++;
	c->slot[id] = e;
	p->rs.reattached++;
	return id;
}

uint64_t pools_expire(struct pools *p, uint64_t now_ms)
{
	struct pools_entry *e, *next;
	uint64_t first = 0;

	if (!p->n_detached)
		return 0;
	for (e = p->all.next; e != &p->all; e = next) {
		next = e->next;
		if (!e->detached)
			continue;
		if (e->expire_ms <= now_ms) {
			p->rs.expired++;
			pools_entry_free(p, e); /* as a last release does */
		} else if (!first || e->expire_ms < first) {
			first = e->expire_ms;
		}
	}
	return first;
}

void pools_reattach_counts(const struct pools *p, struct pools_reattach_stats *out)
{
	*out = p->rs;
}

/* ---- a warm restart's image (node/restart/restart.h) ------------------------------- */

/* ENTRY: u32 pool, u32 flags, u32 uid, u32 gid, u32 mode, u32 charged, uuid, token. */
#define POOLS_REC_LEN (24 + POOLS_UUID_LEN + POOLS_TOKEN_LEN)

int pools_save(const struct pools *p,
	       int (*emit)(void *arg, uint16_t tag, const void *head, size_t head_len,
			   const void *body, size_t body_len),
	       void *arg)
{
	const struct pools_entry *e;
	uint8_t rec[POOLS_REC_LEN];
	int rc;

	for (e = p->all.next; e != &p->all; e = e->next) {
		put_le32(rec, e->pool);
		put_le32(rec + 4, e->flags);
		put_le32(rec + 8, (uint32_t)e->uid);
		put_le32(rec + 12, (uint32_t)e->gid);
		put_le32(rec + 16, e->mode);
		put_le32(rec + 20, e->user != NULL);
		memcpy(rec + 24, e->uuid, POOLS_UUID_LEN);
		memcpy(rec + 24 + POOLS_UUID_LEN, e->token, POOLS_TOKEN_LEN);
		rc = emit(arg, POOLS_TAG_ENTRY, rec, sizeof(rec), NULL, 0);
		if (rc)
			return rc;
	}
	return 0;
}

int pools_load_record(struct pools *p, struct users *u, uint16_t tag, const uint8_t *rec,
		      size_t len, uint64_t now_ms)
{
	struct pools_entry *e;
	struct users_user *uu = NULL;
	uint32_t pool, flags, charged, grace;
	int rc;

	if (tag != POOLS_TAG_ENTRY || len != POOLS_REC_LEN)
		return -EBADMSG;
	pool = get_le32(rec);
	flags = get_le32(rec + 4);
	charged = get_le32(rec + 20);
	if ((flags & ~(unsigned)(TMEM_PERSISTENT | TMEM_SHARED)) || charged > 1 ||
	    get_le32(rec + 16) > 0777)
		return -EBADMSG;
	if ((flags & TMEM_SHARED) && pools_lookup(p, rec + 24))
		return -EBADMSG; /* the same uuid twice */
	if (pools_by_token(p, rec + 24 + POOLS_UUID_LEN))
		return -EBADMSG; /* the same token twice */
	if (charged && u) {
		uu = users_adopt(u, (uid_t)get_le32(rec + 8), (gid_t)get_le32(rec + 12));
		if (!uu)
			return -ENOMEM;
	}
	/* the pool is made here, empty, so that its pages are charged to uu's
	 * owner id in this process as they load (tmem/snapshot.c finds it made) */
	rc = tmem_pool_new_at(p->t, pool, flags);
	if (rc < 0)
		return rc == -ENOMEM ? rc : -EBADMSG;
	e = calloc(1, sizeof(*e));
	if (!e) {
		(void)tmem_pool_destroy(p->t, pool);
		return -ENOMEM;
	}
	if (uu && uu->tier_owner < TMEM_OWNERS_MAX)
		(void)tmem_pool_set_owner(p->t, pool, uu->tier_owner, uu->weight);
	e->pool = pool;
	e->flags = flags;
	e->uid = (uid_t)get_le32(rec + 8);
	e->gid = (gid_t)get_le32(rec + 12);
	e->mode = get_le32(rec + 16);
	memcpy(e->token, rec + 24 + POOLS_UUID_LEN, POOLS_TOKEN_LEN);
	e->user = uu;
	if (uu) {
		uu->pools++; /* it had it: no max_pools check on the way back */
		e->onext = uu->owned;
		if (e->onext)
			e->onext->oprev = e;
		uu->owned = e;
	}
	if (flags & TMEM_SHARED) {
		unsigned h = pools_hash(rec + 24);

		memcpy(e->uuid, rec + 24, POOLS_UUID_LEN);
		e->hnext = p->buckets[h];
		p->buckets[h] = e;
		p->n_shared++;
	} else {
		p->n_private++;
	}
	/* nobody holds it until its client comes back for it */
	grace = p->grace_ms > POOLS_RESTART_GRACE_MS ? p->grace_ms : POOLS_RESTART_GRACE_MS;
	e->detached = true;
	e->restored = true;
	e->detached_uid = e->uid;
	e->expire_ms = now_ms + grace;
	p->n_detached++;
	p->rs.restored++;
	e->prev = p->all.prev;
	e->next = &p->all;
	p->all.prev->next = e;
	p->all.prev = e;
	return 0;
}
